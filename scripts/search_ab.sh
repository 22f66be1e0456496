#!/usr/bin/env bash
# The hour-long A/B of Gumbel search and reanalysis (docs/tuning.md), for a quiet machine:
#
#   scripts/search_ab.sh [MINUTES] [GAMES] [ARM...]
#
# With ARM names (control, gumbel16, gumbel32, reanalysis) only those arms run, in the order
# given, each trained and matched against both minimax depths before the next starts: the way to
# take the A/B in pieces over several sittings (a control belongs with the arms of its day).
#
# Arms, in this order, each from a random network for MINUTES (default 60) of wall time on the
# laptop defaults plus its overrides: a control on today's defaults the same day; Gumbel self-play
# at 16 and at 32 simulations; reanalysis on. scripts/sweep.sh trains each arm alone on the
# machine and plays GAMES (default 312: the ACF deck, both colours) against minimax:4; this
# script then plays the same weights against minimax:6 (final_match_minimax6.json), and writes
# the table and the plot (runs/search_ab.md, runs/search_ab.png) with scripts/sweep_summary.py.
# Every final match uses the same judge: the evaluation players' PUCT search at their default
# simulations, whatever the arm searched with in self-play, so the arms compare networks.
# Interrupted, it picks up where it stopped (sweep.sh skips measured arms, and so does this
# script's minimax:6 match).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-60}
games=${2:-312}
shift $(( $# < 2 ? $# : 2 ))
python=${PYTHON:-.venv/bin/python}
day=$(date -u +%Y%m%d)
arms=runs/search_ab_arms.txt
mkdir -p runs
cat >"$arms" <<ARMS
control-$day
gumbel16-$day mcts.root_policy=gumbel mcts.simulations=16
gumbel32-$day mcts.root_policy=gumbel mcts.simulations=32
reanalysis-$day learner.reanalysis.enabled=true
ARMS
if (( $# > 0 )); then
    chosen=""
    for arm in "$@"; do
        line=$(grep "^$arm-$day\b" "$arms") || { echo "no arm named $arm (control, gumbel16, gumbel32, reanalysis)" >&2; exit 2; }
        chosen+="$line"$'\n'
    done
    printf '%s' "$chosen" >"$arms"
fi
dirs=()
while read -r name overrides; do
    dir=runs/sweep-$name
    dirs+=("$dir")
    one=runs/search_ab_arm.txt
    echo "$name $overrides" >"$one"
    scripts/sweep.sh "$one" "$minutes" "$games" </dev/null
    [[ -f $dir/checkpoints/latest.safetensors ]] || continue
    if [[ ! -f $dir/final_match_minimax6.json ]]; then
        echo "== $name: match, $games games vs minimax:6 [$(date -u +%H:%M:%S)]"
        "$python" -m evaluation.match "$dir/checkpoints/latest.safetensors" minimax:6 \
            --games "$games" --workers 2 --ray off --out "$dir/final_match_minimax6.pdn" \
            --json "$dir/final_match_minimax6.json.part" </dev/null >"$dir/final_match_minimax6.log" 2>&1
        mv "$dir/final_match_minimax6.json.part" "$dir/final_match_minimax6.json"
        tail -n 4 "$dir/final_match_minimax6.log"
    fi
done < <(grep -v '^\s*\(#\|$\)' "$arms")
"$python" scripts/sweep_summary.py "${dirs[@]}" --plot runs/search_ab.png | tee runs/search_ab.md
echo "== minimax:6 (final_match_minimax6.json of each arm):"
for dir in "${dirs[@]}"; do
    [[ -f $dir/final_match_minimax6.json ]] && echo "$dir: $("$python" -c \
        'import json,sys; m=json.load(open(sys.argv[1])); print({k: m[k] for k in m if k in ("score", "wins", "draws", "losses", "elo", "elo_lower", "elo_upper")})' \
        "$dir/final_match_minimax6.json")"
done
