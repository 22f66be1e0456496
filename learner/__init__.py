"""checkerzero: learner."""
