#!/usr/bin/env bash
# The equal-time matches of docs/results.md ("The strongest player at equal time"), for a quiet
# machine: one match at a time, two workers (one core a side on two cores), the load average
# logged every minute beside each match.
#
#   scripts/equal_time.sh [GAMES] [MATCH...]
#
# MATCH names one line of the table below (all of them, in order, without names); GAMES is the
# number of games of each (default 312: the ACF deck, both colours). Each match writes
# runs/equal-time/<name>.{pdn,json,log} and <name>.load.txt; a match whose JSON exists is
# skipped, and an interrupted one goes on from its journal (<name>.journal: the game pairs it
# finished), so the four-hour match can be spread over several sittings. The endgame database
# the `db` and `db-network` matches need (6 pieces, about half an hour on two cores) is built
# first, or finished.
#
#   name         what it measures                                     about (312 games, 2 cores)
#   network      the network player against the baseline at 200 ms      50 min
#   leaves2      2 leaves a forward pass instead of 8, at 200 ms          50 min
#   db           the database at play, for the strongest player        50 min
#   book         the network's opening book, for the network player    67 min
#   solver       the MCTS-solver, for the network player               67 min
#   db-network   the database at play, for the network player          67 min
#   tm-network   the network player's own time management              67 min
#   t1000        the strongest player against the baseline at 1000 ms  4 h
#   qs           the alpha-beta's threat quiescence (,qs)               50 min
#   asp          aspiration windows (,asp)                              50 min
#   margin       reverse-futility pruning: the defaults against ,margin=0  50 min
#   lmr          cautious late-move reductions: ab+nn:t200,tm,margin=0     50 min
#                (lmr on by default) against the same with lmr=0 (as first measured)
#   ttkeep       the transposition table kept between moves (,ttkeep)   50 min
#   probcut      ProbCut: the defaults against ,probcut=0 (as first      50 min
#                measured: ,probcut on top of lmr and margin)
#   pcpieces     ProbCut only with 9 pieces or more (,pcpieces=9) against    50 min
#                ProbCut everywhere (the default; measured Elo +4 [-11, +20])
#   book-ab      the fast player's own opening book (,book; built first   50 min
#                if missing: about an hour on two cores at depth 16)
#   v2           the shipped evaluation (nneval-v2, the best generation)  50 min
#                against the first one (nneval-v1, the yardstick), both ab+nn:t200,tm
#   v2-t1000     the same at 1000 ms a move                              4 h
#   eval         the evaluation file EVAL=FILE against nneval-v1, both      50 min
#                ab+nn:t200,tm (files eval-<FILE's stem>.*)
#   tt64         a 64 MB transposition table instead of 16 MB (,tt=64)  50 min
#   policy       move ordering by the evaluation's move-ordering head     50 min
#                (,policy with game/data/nneval-v2-policy.safetensors: nneval-v2 and a head
#                distilled from the MCTS network by python -m learner.nneval.policy)
#   defaults     lmr and margin (the defaults before probcut) against none,  50 min
#                both with nneval-v1
#   search       today's default switches (lmr, margin, probcut) against     50 min
#                none, both with nneval-v1: the search's whole gain, same evaluation
#   shipped      the shipped player (nneval-v2, today's default switches)   50 min
#                against the first learned one (nneval-v1, no switches): the evaluation's
#                and the search's gains together
#   tm           time management itself (,tm) against 200 ms unmanaged 50 min
#                (not equal time: unmanaged, an iteration starts only with half the time
#                left, so that player spends about 60% of it)
# The alpha-beta's search switches (qs ... policy) become defaults only where their match wins
# (docs/api.md, "Search switches"); each is measured on top of the defaults of its day (lmr, then
# margin, then probcut, on since each won its match; ttkeep was measured before any). OUT names
# another folder for the files (runs/equal-time).
set -euo pipefail
cd "$(dirname "$0")/.."
games=${1:-312}
shift $(( $# > 0 ? 1 : 0 ))
python=${PYTHON:-.venv/bin/python}
net=game/data/long-320min.safetensors
egdb_dir=${EGDB_DIR:-egdb}
egdb_pieces=${EGDB_PIECES:-6}
out=${OUT:-runs/equal-time}
base=ab+nn:t200,tm  # the strongest player (its default switches on), each switch on against it
yardstick=game/data/nneval-v1.safetensors  # the first learned evaluation, kept to measure later ones
book=game/data/nneval-v2.book.json  # the book of the shipped evaluation (book-ab)
policy=game/data/nneval-v2-policy.safetensors  # nneval-v2 with a move-ordering head (policy)
mkdir -p "$out"

# name | player A (the component on) | player B (the same player without it)
table="network|$net:t200|minimax:t200
leaves2|$net:t200,leaves=2|$net:t200
db|ab+nn+db:t200,tm|ab+nn:t200,tm
book|$net:t200,book=1|$net:t200,book=0
solver|$net:t200,solver=1|$net:t200,solver=0
db-network|$net:t200,egdb=1|$net:t200,egdb=0
tm-network|$net:t200,tm=1|$net:t200
t1000|ab+nn:t1000,tm|minimax:t1000
qs|$base,qs|$base
asp|$base,asp|$base
margin|$base|$base,margin=0
lmr|$base,margin=0|$base,margin=0,lmr=0
ttkeep|$base,ttkeep|$base
probcut|$base|$base,probcut=0
pcpieces|$base,pcpieces=9|$base
book-ab|$base,book|$base
v2|$base|$base:$yardstick
v2-t1000|ab+nn:t1000,tm|ab+nn:t1000,tm:$yardstick
eval|$base:${EVAL:-}|$base:$yardstick
tt64|$base,tt=64|$base
policy|$base,policy:$policy|$base
defaults|$base,probcut=0:$yardstick|$base,lmr=0,margin=0,probcut=0:$yardstick
search|$base:$yardstick|$base,lmr=0,margin=0,probcut=0:$yardstick
shipped|$base|$base,lmr=0,margin=0,probcut=0:$yardstick
tm|$base|ab+nn:t200"

if (( $# == 0 )); then
    set -- $(cut -d'|' -f1 <<<"$table")
fi
for name in "$@"; do
    grep -q "^$name|" <<<"$table" || { echo "no match named $name ($(cut -d'|' -f1 <<<"$table" | tr '\n' ' '))" >&2; exit 2; }
done

for match in "$@"; do
    IFS='|' read -r _ a b < <(grep "^$match|" <<<"$table")
    name=$match
    if [[ $match == eval ]]; then
        [[ -f ${EVAL:-} ]] || { echo "eval needs EVAL=<an evaluation file>, got '${EVAL:-}'" >&2; exit 2; }
        name=eval-$(basename "${EVAL%.*}")
    fi
    if [[ -f $out/$name.json ]]; then
        echo "== $name: already measured ($out/$name.json), skipped"
        continue
    fi
    if [[ $name == db || $name == db-network ]]; then  # a finished build only checks its files; a partial one goes on
        echo "== the endgame database, $egdb_pieces pieces, in $egdb_dir [$(date -u +%H:%M:%S)]"
        "$python" -m game.egdb build --pieces "$egdb_pieces" --out "$egdb_dir" </dev/null
    fi
    if [[ $name == book-ab && ! -f $book ]]; then
        echo "== the fast player's book [$(date -u +%H:%M:%S)]"
        "$python" -m evaluation.book build --evaluation game/data/nneval-v2.safetensors --workers 2 </dev/null
    fi
    echo "== $name: $a against $b, $games games [$(date -u +%H:%M:%S)]"
    load=$out/$name.load.txt
    (while true; do echo "$(date -u +%H:%M:%S) $(cat /proc/loadavg)" >>"$load"; sleep 60; done) &
    logger=$!
    status=0
    "$python" -m evaluation.match "$a" "$b" --games "$games" --workers 2 --ray off \
        --egdb-dir "$egdb_dir" --egdb-pieces "$egdb_pieces" \
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
echo "== done [$(date -u +%H:%M:%S)]"
