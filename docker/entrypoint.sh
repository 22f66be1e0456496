#!/bin/sh
# What a checkerzero container does: `head`, `worker`, `redis`, or any other command as given.
#
#   head [OVERRIDES]  Ray's head (GCS on $RAY_PORT), then `python -m learner preset=cluster` with
#                     OVERRIDES (Hydra, e.g. selfplay.actors=64). The run lives in
#                     $CHECKERZERO_RUN_DIR, so a restarted container resumes it.
#   ray-head          Ray's head alone, blocking (a learner started by hand or by `ray exec`).
#   worker            joins the head at $RAY_HEAD (host:port) and blocks; the learner places
#                     self-play actors on it, also when it joins after the run started.
#   redis             the replay store: redis-server with the password from $REDIS_PASSWORD,
#                     written into a config file of mode 0600 (never onto a command line, where
#                     `ps` would show it), and an append-only file under $REDIS_DATA_DIR.
#
# Ray always runs with token authentication: every role that starts or joins Ray needs
# RAY_AUTH_TOKEN_FILE, a file (a Docker or Kubernetes secret) holding the cluster's token, the same
# on every node; a client without it is refused. Make one with `openssl rand -hex 32`. The token
# never enters the environment or a command line: Ray reads it from the file (RAY_AUTH_TOKEN_PATH).
#
# Secrets: for REDIS_PASSWORD and WANDB_API_KEY, a variable NAME_FILE naming a file (a Docker or
# Kubernetes secret) sets NAME from that file. Extra `ray start` flags: $RAY_START_ARGS.
set -eu

die() {
  echo "checkerzero-node: $*" >&2
  exit 2
}

from_file() { # from_file NAME: NAME takes the contents of the file named by NAME_FILE, if set
  eval "file=\${$1_FILE:-}"
  if [ -n "$file" ]; then
    [ -r "$file" ] || die "$1_FILE=$file is not a readable file"
    value=$(cat "$file") # cat's arguments hold the file's name, never the secret
    export "$1=$value"   # a shell builtin: no process sees the value in its arguments
  fi
}
from_file REDIS_PASSWORD
from_file WANDB_API_KEY

ray_auth() { # token authentication for every Ray process this container starts, or refuse
  case "${RAY_AUTH_MODE:-token}" in
  token) ;;
  *) die "RAY_AUTH_MODE=$RAY_AUTH_MODE: this image runs Ray only with token authentication" ;;
  esac
  [ -z "${RAY_AUTH_TOKEN:-}" ] || die "pass Ray's token as a file (RAY_AUTH_TOKEN_FILE), not in RAY_AUTH_TOKEN"
  token=${RAY_AUTH_TOKEN_FILE:-${RAY_AUTH_TOKEN_PATH:-}}
  [ -n "$token" ] || die "set RAY_AUTH_TOKEN_FILE to a file holding the cluster's Ray token \
(e.g. openssl rand -hex 32 > docker/secrets/ray_token); Ray never runs here without one"
  [ -f "$token" ] && [ -r "$token" ] || die "RAY_AUTH_TOKEN_FILE=$token is not a readable file"
  [ -s "$token" ] || die "RAY_AUTH_TOKEN_FILE=$token is empty"
  export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$token"
}

RAY_PORT=${RAY_PORT:-6380} # never 6379, Redis's port
RAY_START_ARGS=${RAY_START_ARGS:-}
role=${1:-worker}
[ $# -gt 0 ] && shift

case "$role" in
head)
  ray_auth
  # shellcheck disable=SC2086 # RAY_START_ARGS is a list of flags
  ray start --head --port="$RAY_PORT" --include-dashboard=false --disable-usage-stats \
    $RAY_START_ARGS
  # The learner as PID 1's child would miss SIGTERM: exec it, so `docker stop` or a pod's
  # termination lets it save a checkpoint and stop its actors.
  exec python -m learner preset=cluster cluster.address=auto \
    "run_dir=${CHECKERZERO_RUN_DIR:-$CHECKERZERO_HOME/runs/cluster}" "$@"
  ;;
ray-head)
  ray_auth
  # shellcheck disable=SC2086
  exec ray start --head --port="$RAY_PORT" --include-dashboard=false --disable-usage-stats --block \
    $RAY_START_ARGS "$@"
  ;;
worker)
  ray_auth
  [ -n "${RAY_HEAD:-}" ] || die "set RAY_HEAD to the head's host:port (Ray's port, e.g. head:6380)"
  # shellcheck disable=SC2086
  exec ray start --address="$RAY_HEAD" --block --disable-usage-stats $RAY_START_ARGS "$@"
  ;;
redis)
  [ -n "${REDIS_PASSWORD:-}" ] || die "set REDIS_PASSWORD or REDIS_PASSWORD_FILE for the redis role"
  case "$REDIS_PASSWORD" in
  *[!A-Za-z0-9._~+/=-]*) die "REDIS_PASSWORD may hold only letters, digits and ._~+/=-" ;;
  esac
  data=${REDIS_DATA_DIR:-/data}
  mkdir -p "$data"
  umask 077
  conf=$(mktemp /tmp/redis.XXXXXX.conf)
  {
    echo "bind ${REDIS_BIND:-0.0.0.0}"
    echo "port ${REDIS_PORT:-6379}"
    echo "protected-mode yes"
    echo "requirepass \"$REDIS_PASSWORD\""
    echo "dir \"$data\""
    echo "appendonly yes"
    echo "appendfsync everysec"
    echo "save \"\""
  } >"$conf"
  exec redis-server "$conf" "$@"
  ;;
*)
  exec "$role" "$@"
  ;;
esac
