#!/usr/bin/env bash
# Equal-time A/B matches of the alpha-beta's search switches, for a quiet machine: each switch
# on against the same player without it, ab+nn:t200,tm on both sides, one match at a time, two
# workers (one core a side on two cores), the load average logged every minute beside each.
#
#   scripts/ab_switches.sh [GAMES] [MATCH...]
#
# MATCH names lines of the table below (all of them, in order, without names); GAMES is the
# number of games of each (default 312: the ACF deck, both colours). Each match writes
# $OUT/<name>.{pdn,json,log} and <name>.load.txt (OUT defaults to runs/ab-switches); a match
# whose JSON exists is skipped, and an interrupted one goes on from its journal. A switch
# becomes a default only where its match wins (docs/api.md, "Search switches").
#
#   name     the switch (player-spec option)                                   about (312 games)
#   qs       threat quiescence (,qs)                                            50 min
#   asp      aspiration windows (,asp)                                          50 min
#   margin   reverse-futility pruning (,margin)                                 50 min
#   lmr      cautious late-move reductions (,lmr)                               50 min
#   ttkeep   the transposition table kept between moves (,ttkeep)              50 min
#   tt64     a 64 MB transposition table instead of 16 MB (,tt=64)             50 min
#   tm       time management itself (,tm) against 200 ms a move unmanaged      50 min
#            (not equal time: unmanaged, an iteration starts only with half the time left,
#            so that player spends about 60% of it)
set -euo pipefail
cd "$(dirname "$0")/.."
games=${1:-312}
shift $(( $# > 0 ? 1 : 0 ))
python=${PYTHON:-.venv/bin/python}
out=${OUT:-runs/ab-switches}
mkdir -p "$out"
base=ab+nn:t200,tm

# name | player A (the switch on) | player B (the same player without it)
table="qs|$base,qs|$base
asp|$base,asp|$base
margin|$base,margin|$base
lmr|$base,lmr|$base
ttkeep|$base,ttkeep|$base
tt64|$base,tt=64|$base
tm|$base|ab+nn:t200"

if (( $# == 0 )); then
    set -- $(cut -d'|' -f1 <<<"$table")
fi
for name in "$@"; do
    grep -q "^$name|" <<<"$table" || { echo "no match named $name ($(cut -d'|' -f1 <<<"$table" | tr '\n' ' '))" >&2; exit 2; }
done

for name in "$@"; do
    IFS='|' read -r _ a b < <(grep "^$name|" <<<"$table")
    if [[ -f $out/$name.json ]]; then
        echo "== $name: already measured ($out/$name.json), skipped"
        continue
    fi
    echo "== $name: $a against $b, $games games [$(date -u +%H:%M:%S)]"
    load=$out/$name.load.txt
    (while true; do echo "$(date -u +%H:%M:%S) $(cat /proc/loadavg)" >>"$load"; sleep 60; done) &
    logger=$!
    status=0
    "$python" -m evaluation.match "$a" "$b" --games "$games" --workers 2 --ray off \
        --journal "$out/$name.journal" --out "$out/$name.pdn" --json "$out/$name.json.part" \
        </dev/null >>"$out/$name.log" 2>&1 || status=$?
    kill "$logger" 2>/dev/null || true
    if (( status != 0 )); then
        echo "== $name: the match failed; the end of $out/$name.log:"
        tail -n 20 "$out/$name.log"
        continue
    fi
    mv "$out/$name.json.part" "$out/$name.json"
    tail -n 4 "$out/$name.log"
done
