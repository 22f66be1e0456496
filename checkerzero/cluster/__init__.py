"""Ray: starting or joining a cluster, supervising an actor's loop, the cluster's preflight."""
