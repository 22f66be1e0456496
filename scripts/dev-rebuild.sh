#!/usr/bin/env bash
# Rebuilds the compiled core after a C++ edit in an editable install (seconds, not a full pip run).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(ls -d build/cp3*/ | head -n 1)
cmake --build "$build" -j 2
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['platlib'])")
cp "$build"/_core*.so "$site/game/"
