#!/usr/bin/env bash
# One-factor A/B sweep of the laptop preset, as recorded in docs/tuning.md.
#
#   scripts/sweep.sh ARMS_FILE MINUTES [GAMES]
#
# ARMS_FILE holds one arm per line: a name, then Hydra overrides (none for the control), e.g.
#   control
#   lr0.1 learner.optimizer.lr=0.1
# Each arm trains from a random network for MINUTES of wall time in runs/sweep-<name>, alone on
# the machine, then its last published weights play GAMES (default 312: the whole ACF deck,
# both colours) against minimax depth 4 at the default 100 simulations; the learner leaves
# summary.json and the match final_match.json for scripts/sweep_summary.py. The file is re-read
# before every arm, so arms can be appended while the sweep runs. Arms whose match file exists
# are skipped, so an interrupted sweep picks up where it stopped.
set -euo pipefail
arms_file=$1
minutes=$2
games=${3:-312}
python=${PYTHON:-.venv/bin/python}

i=0
while true; do
    i=$((i + 1))
    line=$(grep -v '^\s*\(#\|$\)' "$arms_file" | sed -n "${i}p")
    [[ -z "$line" ]] && break
    read -r name overrides <<<"$line"
    dir=runs/sweep-$name
    if [[ -f $dir/final_match_minimax4.pdn ]]; then
        echo "== $name: already measured, skipped"
        continue
    fi
    echo "== $name: training $minutes min with: ${overrides:-(defaults)} [$(date -u +%H:%M:%S)]"
    mkdir -p runs
    # shellcheck disable=SC2086  # the overrides are words on purpose
    if ! "$python" -m learner run_dir="$dir" learner.time_limit_min="$minutes" \
        cluster.address=local $overrides >"$dir.log" 2>&1; then
        echo "== $name: the learner failed; the end of $dir.log:"
        tail -n 20 "$dir.log"
        continue
    fi
    echo "== $name: match, $games games vs minimax:4 [$(date -u +%H:%M:%S)]"
    "$python" -m evaluation.match "$dir/checkpoints/latest.safetensors" minimax:4 \
        --games "$games" --workers 2 --ray off --out "$dir/final_match_minimax4.pdn.part" \
        --json "$dir/final_match.json" >"$dir/final_match.log" 2>&1
    mv "$dir/final_match_minimax4.pdn.part" "$dir/final_match_minimax4.pdn"
    tail -n 4 "$dir/final_match.log"
done
echo "== sweep done [$(date -u +%H:%M:%S)]"
