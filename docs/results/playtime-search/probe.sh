#!/usr/bin/env bash
# play-time probes (writes runs/probe/): one checkpoint, 312 games vs minimax:6 at 100 simulations, one spec option each
set -u
# run from the repository root: docs/results/playtime-search/probe.sh base cpuct=2.0 ...
ck=${CK:-runs/sweep-control-60min-d/checkpoints/latest.safetensors}
tag=${TAG:-d}
for opt in "$@"; do
  name=$tag-${opt//[=,:]/_}
  [ -f runs/probe/$name.json ] && continue
  spec=$ck
  [ "$opt" != base ] && spec="$ck:$opt"
  echo "== $name [$(date -u +%H:%M:%S)]"
  .venv/bin/python -m evaluation.match "$spec" minimax:6 --games 312 --workers 2 --ray off --out runs/probe/$name.pdn --json runs/probe/$name.json > runs/probe/$name.log 2>&1
  tail -3 runs/probe/$name.log | head -1
  .venv/bin/python -c "import json;d=json.load(open('runs/probe/$name.json'));print('$name', d['wins'],d['draws'],d['losses'], round(100*d['score'],1), round(d['elo']))"
done
echo "== done [$(date -u +%H:%M:%S)]"
