"""checkerzero: actors."""
