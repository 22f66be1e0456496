#!/usr/bin/env bash
# Rebuilds the compiled core after a C++ edit in an editable install (seconds, not a full pip run).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(ls -d build/cp3*/ | head -n 1)
cmake --build "$build" -j 2
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['platlib'])")
# Copied beside the old module and renamed over it: a process that has the old one loaded keeps
# its (unlinked) file, where copying over it in place would crash that process.
for so in "$build"/_core*.so; do
  tmp=$(mktemp "$site/game/.core.XXXXXX")
  cp "$so" "$tmp"
  chmod 644 "$tmp"
  mv -f "$tmp" "$site/game/$(basename "$so")"
done
