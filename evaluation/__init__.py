"""checkerzero: evaluation."""
