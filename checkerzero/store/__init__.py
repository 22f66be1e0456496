"""What the processes of a run share through Redis, and the private redis-server."""
