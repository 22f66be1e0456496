#!/usr/bin/env bash
# One-command set-up for a fresh machine: system packages, a virtual environment, the project.
#   bash scripts/setup.sh          (then: source .venv/bin/activate)
# Installs redis-server (the replay store's embedded default) with apt when it is missing,
# PyTorch 2.13, and the project with its C++ core compiled by scikit-build-core, plus the test,
# benchmark and peer extras.
#
# Which PyTorch build: CHECKERZERO_TORCH selects it.
#   cpu (default)  the CPU build (about 200 MB) from PyTorch's CPU wheel index. On Linux a plain
#                  `pip install torch` from PyPI pulls the CUDA build with several GB of libraries.
#   cuda           PyPI's default Linux build (CUDA 12.x); for GPU nodes.
#   cu126, cu128…  that CUDA variant from PyTorch's own index.
#   skip           keep whatever torch the environment already has.
# A wheel of the right build already on disk (pip's find-links or cache) is used without a download.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}

if ! command -v redis-server >/dev/null 2>&1; then
  echo "== installing redis-server (apt)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  if command -v apt-get >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
  else
    echo "error: redis-server is missing and apt-get is not available; install Redis >= 6" >&2
    echo "       (macOS: brew install redis) or set CHECKERZERO_REDIS_SERVER to its path." >&2
    exit 1
  fi
fi
# The Debian package may start a system service on 6379; the project never uses it.

# The play page's browser test drives Debian's headless Chromium through chromium-driver
# (browser builds that download themselves cannot be fetched everywhere; these come from apt).
if ! command -v chromedriver >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "== installing chromium and chromium-driver (apt)"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "note: chromium-driver is missing and apt-get is not available; the browser test skips" >&2
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
echo "== installing PyTorch (${CHECKERZERO_TORCH:-cpu}) and the project"
"$VENV/bin/pip" install -q --upgrade pip
TORCH_VERSION=2.13.0
TORCH_INDEX=https://download.pytorch.org/whl
case "${CHECKERZERO_TORCH:-cpu}" in
  cpu) "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" --extra-index-url "$TORCH_INDEX/cpu" ;;
  cuda) "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" ;;
  cu[0-9]*) "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" \
              --extra-index-url "$TORCH_INDEX/${CHECKERZERO_TORCH}" ;;
  skip) ;;
  *) echo "error: CHECKERZERO_TORCH must be cpu, cuda, cuXYZ or skip (got '$CHECKERZERO_TORCH')" >&2
     exit 1 ;;
esac
"$VENV/bin/pip" install -q -e '.[dev]'
"$VENV/bin/python" -c "import torch; print('PyTorch', torch.__version__, '(CUDA ' + str(torch.version.cuda) + ')' if torch.version.cuda else '(CPU build)')"
"$VENV/bin/python" -c "import game, learner, actors, evaluation; print('checkerzero ready:', game.Position().fen())"
