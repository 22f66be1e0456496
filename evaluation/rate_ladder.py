"""`python -m evaluation.rate_ladder`: rate the fixed ladder once and write its table.

    python -m evaluation.rate_ladder --workers 16                  # the full ladder, +-15 Elo
    python -m evaluation.rate_ladder --dry-run                     # its plan: games and hours
    python -m evaluation.rate_ladder --rungs random,minimax:1,minimax:2 --pairs 20 --out t.csv
    python -m evaluation.rate_ladder --extend --rungs minimax:9,minimax:10 --pairs 64

Every rung plays the one below it and the one below that (``--no-next-neighbours``: only the
one below; the second path tightens the chain: 178 k games instead of 288 k for +-15), colour-
reversed pairs from distinct openings (the deck, then seeded random continuations of it: the
minimax rungs are deterministic, so a repeated opening would repeat a game). How many pairs:
enough for every rung's 95% interval, random anchored at 0, to be at most ``--target`` Elo
either side, planned from the draw model's Fisher information (evaluation.ladder.plan.plan_pairs) at
rough ratings first, then at the ratings fitted so far: a first round of ``--probe-pairs`` per
match, then rounds that at most double the pairs until the fit meets the target (where the
fit's own intervals are still wider than planned, the pairs grow by their ratio squared).

Every finished pair is appended to ``--games-file`` (JSON lines) at once: a run that is killed
and started again with the same arguments keeps its games and plays only what is missing. The
table (evaluation.ladder.table.write_table) is rewritten after every round, marked ``provisional``
until the target is met. Beside the final table go its game counts (``<table>.results.csv``:
per match and first mover, everything the fit reads), so that anyone can refit it and check.
``--extend`` adds ``--rungs`` above the top of the table at ``--out`` without moving it: the
table's rungs stay at their ratings and its draw and first-move terms hold, only the matches of
the new rungs are played (``--pairs`` each, 100 by default), and the new rows and their game
counts are appended (extend_table). A rung's ``ab+nn`` evaluation file is named relative to
the project, so the rung is the same player from any working directory.
The library functions are in evaluation.ladder.rungs, ladder_table and ladder_plan.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import sys
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from checkerzero.config import compose
from checkerzero.revision import git_revision
from evaluation.ladder.plan import plan_pairs, predicted_half_widths, rating_matches
from evaluation.ladder.rungs import (
    fit_all,
    ladder_player,
    pair_results,
    play_rating_pair,
    rating_openings,
)
from evaluation.ladder.table import (
    PACKAGE_TABLE,
    read_results,
    read_table,
    results_path,
    table_from_ratings,
    weights_text,
    write_results,
    write_table,
)
from evaluation.matches.games import DEFAULT_MAX_PLIES
from evaluation.matches.records import PairRecord
from evaluation.players.alphabeta import minimax_options
from evaluation.stats.elo import PairResult, Ratings

# Adjacent rungs about 150-250 Elo apart: close enough that a candidate anywhere on the ladder
# has a rung within ~100-125 Elo (where its games tell most about it), and that each match is
# informative (score 70-80%, not the 100% that leaves a gap unmeasured: minimax:1 beats random
# 40-0). Between random and minimax:1 (~870 apart) the noisy rungs play minimax:1's move or, with
# probability P, a random one; 40-game matches put P = 0.75, 0.5, 0.25 at about +120, +360,
# +680, so 0.65 / 0.45 / 0.3 / 0.15 step by ~200. minimax:1..8 are ~150-290 apart (README).
DEFAULT_RUNGS = (
    "random",
    "noisy:0.65:minimax:1",
    "noisy:0.45:minimax:1",
    "noisy:0.3:minimax:1",
    "noisy:0.15:minimax:1",
    *(f"minimax:{d}" for d in range(1, 9)),
)
# Rough ratings to plan from before any game (the measurements above; unknown rungs: 200 per
# step), and a rough draw_elo (minimax:7-8 draw over half their games).
PRIOR_ELO = {
    "random": 0.0,
    "noisy:0.65:minimax:1": 210.0,
    "noisy:0.45:minimax:1": 420.0,
    "noisy:0.3:minimax:1": 615.0,
    "noisy:0.15:minimax:1": 770.0,
    "minimax:1": 870.0,
    "minimax:2": 1120.0,
    "minimax:3": 1410.0,
    "minimax:4": 1560.0,
    "minimax:5": 1810.0,
    "minimax:6": 2035.0,
    "minimax:7": 2235.0,
    "minimax:8": 2295.0,
}
PRIOR_DRAW_ELO = 150.0
# Seconds per game of a match, by its stronger rung, measured on this project's 2-core machine
# under load (minimax:D against minimax:D-1, 4 games): depth <= 3 ~0.01, 4: 0.04, 5: 0.07,
# 6: 0.18, 7: 0.44, 8: 1.83. Replaced by the games file's own timings once a match has some.
SECONDS_PER_GAME = {"minimax:4": 0.04, "minimax:5": 0.07, "minimax:6": 0.18, "minimax:7": 0.44}
SECONDS_PER_GAME |= {"minimax:8": 1.83}
DEFAULT_SECONDS_PER_GAME = 0.01
PROGRESS_EVERY_S = 10.0

Match = tuple[str, str]


def read_games(path: Path) -> dict[Match, dict[int, dict[str, Any]]]:
    """(a, b) -> pair index -> the pair's line from a games file; a line cut short by a kill,
    or not a pair, is skipped (logged)."""
    games: dict[Match, dict[int, dict[str, Any]]] = defaultdict(dict)
    if not path.is_file():
        return games
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            PairRecord.from_dict(d["pair"])
            games[(str(d["a"]), str(d["b"]))][int(d["index"])] = d
        except (ValueError, KeyError, TypeError):
            logging.warning("%s, line %d: not a game pair; skipped", path, number)
    return games


def results_of(games: Mapping[Match, Mapping[int, Mapping[str, Any]]]) -> list[PairResult]:
    """The games as PairResult rows (each match from the stronger rung's side)."""
    rows: list[PairResult] = []
    for (a, b), pairs in sorted(games.items()):
        records = [PairRecord.from_dict(pairs[i]["pair"]) for i in sorted(pairs)]
        rows += pair_results(records, a, b)
    return rows


def rung_results(
    games: Mapping[Match, Mapping[int, Mapping[str, Any]]], rungs: Sequence[str]
) -> list[PairResult]:
    """The games between ``rungs`` as PairResult rows (what the fit reads)."""
    return [r for r in results_of(games) if r.a in rungs and r.b in rungs]


def fit_games(
    games: Mapping[Match, Mapping[int, Mapping[str, Any]]], rungs: Sequence[str], elo_cfg: Any
) -> Ratings | None:
    """The fit of the games so far, None while they do not reach every rung."""
    rows = rung_results(games, rungs)
    if not rows:
        return None
    try:
        ratings = fit_all(rows, elo_cfg)
    except ValueError as e:
        logging.info("no fit yet: %s", e)
        return None
    return ratings if all(r in ratings.names for r in rungs) else None


def pairs_for_target(have: int, widest: float, target: float) -> int:
    """Pairs per match for the widest fitted interval (``widest`` Elo either side, after
    ``have`` pairs per match) to shrink to ``target``: intervals narrow as one over the square
    root of the games, plus 2% so that the next fit does not land just outside; ``have`` when
    it is already narrow enough."""
    if widest <= target or have < 1:
        return have
    return math.ceil(have * (widest / target) ** 2 * 1.02)


def seconds_per_game(games: Mapping[Match, Mapping[int, Mapping[str, Any]]], match: Match) -> float:
    played = games.get(match) or {}
    if played:
        return sum(float(d.get("seconds", 0.0)) for d in played.values()) / (2 * len(played))
    return SECONDS_PER_GAME.get(match[0], DEFAULT_SECONDS_PER_GAME)


def describe_plan(
    pairs: int,
    matches: Sequence[Match],
    games: Mapping[Match, Mapping[int, Mapping[str, Any]]],
    workers: int,
) -> str:
    """How many games the plan plays in all and still has to, and roughly how long on
    ``workers`` cores."""
    missing = {m: max(pairs - len(games.get(m) or {}), 0) for m in matches}
    todo_games = 2 * sum(missing.values())
    seconds = sum(2 * n * seconds_per_game(games, m) for m, n in missing.items()) / workers
    return (
        f"{pairs:,} pairs per match x {len(matches)} matches = {2 * pairs * len(matches):,} games;"
        f" {todo_games:,} still to play, about {seconds / 3600:.1f} h on {workers} worker(s)"
    )


class _Progress:
    def __init__(self, total: int, label: str) -> None:
        self.total, self.label = total, label
        self.done = 0
        self.t0 = self.last = time.monotonic()

    def tick(self, d: Mapping[str, Any]) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S and self.done < self.total:
            return
        self.last = now
        rate = self.done / max(now - self.t0, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        print(
            f"[{now - self.t0:6.0f} s] {self.label}: {self.done:,}/{self.total:,} pairs"
            f" ({rate:.2f}/s, about {eta / 60:.0f} min left); last {d['a']} vs {d['b']}"
            f" #{d['index']}",
            flush=True,
        )


def play_jobs(
    jobs: Sequence[tuple[Match, int]],
    openings: Sequence[Any],
    games_file: Path,
    *,
    workers: int,
    max_plies: int,
    options: dict[str, Any],
    label: str,
) -> None:
    """Plays the pairs, appending each to ``games_file`` as it finishes (a kill loses only the
    pairs in flight)."""
    progress = _Progress(len(jobs), label)
    args = [
        (a, b, i, openings[i].name, list(openings[i].moves), max_plies, 8, options)
        for (a, b), i in jobs
    ]
    games_file.parent.mkdir(parents=True, exist_ok=True)
    with games_file.open("a+") as out:
        if out.tell() > 0:  # a line cut short by a kill stays on its own, skipped when read
            out.seek(out.tell() - 1)
            if out.read(1) != "\n":
                out.write("\n")

        def keep(d: Mapping[str, Any]) -> None:
            out.write(json.dumps(d, sort_keys=True) + "\n")
            out.flush()
            progress.tick(d)

        if workers == 1:
            for job in args:
                keep(play_rating_pair(*job))
            return
        ctx = get_context("spawn")  # no fork of a process that may hold threads
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            queue = iter(args)
            running: set[Future] = set()
            while True:
                while len(running) < 4 * workers and (job := next(queue, None)) is not None:
                    running.add(pool.submit(play_rating_pair, *job))
                if not running:
                    break
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    keep(future.result())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.rate_ladder",
        description="Rate the fixed ladder once (random = 0) and write its table.",
    )
    parser.add_argument(
        "--rungs", default=",".join(DEFAULT_RUNGS), help="player specs, weakest first"
    )
    parser.add_argument("--out", type=Path, default=PACKAGE_TABLE, help="the table (CSV)")
    parser.add_argument(
        "--games-file", type=Path, help="finished pairs, JSON lines (default: OUT.games.jsonl)"
    )
    parser.add_argument("--target", type=float, default=15.0, help="Elo either side, 95%%")
    parser.add_argument("--pairs", type=int, help="pairs per match instead of the target's plan")
    parser.add_argument("--probe-pairs", type=int, default=50, help="pairs per match, round 1")
    parser.add_argument("--max-pairs", type=int, default=20_000, help="most pairs per match")
    parser.add_argument(
        "--next-neighbours",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also each rung against the one two below (a second path: ~40%% fewer games)",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0, help="the openings' random plies")
    parser.add_argument("--extend-plies", type=int, default=4, help="random plies per opening")
    parser.add_argument("--max-plies", type=int, default=DEFAULT_MAX_PLIES)
    parser.add_argument("--dry-run", action="store_true", help="print the plan, play nothing")
    parser.add_argument(
        "--extend",
        action="store_true",
        help="add --rungs above the top of the table at --out, its rungs and terms fixed",
    )
    parser.add_argument("overrides", nargs="*", help="config overrides (evaluation.baseline...)")
    return parser


def _settings(args: argparse.Namespace) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """The minimax options, the rungs and the Elo settings of a command line; ValueError (a
    ConfigError included) names a bad one."""
    cfg = compose(args.overrides)
    options = minimax_options(cfg.evaluation.baseline)
    rungs = [s.strip() for s in args.rungs.split(",") if s.strip()]
    names = [ladder_player(s, **options).name for s in rungs]
    if names != rungs:
        raise ValueError(f"--rungs: write each spec as its player's name: {names}")
    if len(set(rungs)) != len(rungs) or len(rungs) < (1 if args.extend else 2):
        raise ValueError(f"--rungs needs two or more distinct players, got {rungs}")
    elo_cfg = dict(cfg.evaluation.elo)
    if not args.extend and rungs[0] != elo_cfg.get("anchor_player", "random"):
        raise ValueError(f"--rungs must start with the anchor {elo_cfg.get('anchor_player')}")
    for key, value in (("workers", args.workers), ("probe-pairs", args.probe_pairs)):
        if value < 1:
            raise ValueError(f"--{key} must be >= 1, got {value}")
    if args.pairs is not None and args.pairs < 1:
        raise ValueError(f"--pairs must be >= 1, got {args.pairs}")
    return options, rungs, elo_cfg


def missing_jobs(
    matches: Sequence[Match], games: Mapping[Match, Mapping[int, Any]], goal: int
) -> list[tuple[Match, int]]:
    """The (match, pair index) of the first ``goal`` pairs of each match not yet played."""
    return [(m, i) for i in range(goal) for m in matches if i not in (games.get(m) or {})]


def play_round(
    jobs: Sequence[tuple[Match, int]],
    goal: int,
    args: argparse.Namespace,
    options: dict[str, Any],
    games_file: Path,
    label: str,
) -> bool:
    """Plays ``jobs`` from the first ``goal`` rating openings; False (said why) when the board
    has fewer distinct openings."""
    openings = rating_openings(goal, plies=args.extend_plies, seed=args.seed)
    if len(openings) < goal:
        print(f"error: only {len(openings)} distinct openings for {goal} pairs per match")
        return False
    play_jobs(
        jobs,
        openings,
        games_file,
        workers=args.workers,
        max_plies=args.max_plies,
        options=options,
        label=label,
    )
    return True


def main(argv: Sequence[str] | None = None) -> int:
    # Over 80 lines: the command's rounds (plan, play, refit) read top to bottom; each step is
    # a function of its own.
    parser = _parser()
    args = parser.parse_intermixed_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    games_file = args.games_file or args.out.with_name(args.out.name + ".games.jsonl")
    try:
        options, rungs, elo_cfg = _settings(args)
    except ValueError as e:  # ConfigError included
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.extend:
        return extend_table(args, options, rungs, elo_cfg, games_file)
    matches = rating_matches(rungs, args.next_neighbours)
    meta = {
        "status": "provisional",
        "rungs": " ".join(rungs),
        "weights": weights_text(options.get("weights")),
        "max_plies": args.max_plies,
        "git_revision": git_revision(),
    }
    ratings: Ratings | None = None
    for round_number in range(1, 100):
        games = read_games(games_file)
        ratings = fit_games(games, rungs, elo_cfg)
        if ratings is not None:
            elo, draw_elo = {r: ratings.elo(r) for r in rungs}, ratings.draw_elo
            where = "the fit so far"
        else:
            elo = {r: PRIOR_ELO.get(r, 200.0 * k) for k, r in enumerate(rungs)}
            draw_elo, where = PRIOR_DRAW_ELO, "rough prior ratings"
        if args.pairs is not None:
            need = args.pairs
        else:
            need = plan_pairs(rungs, elo, draw_elo, matches, args.target)
            if ratings is not None:  # the plan is expected information; the fit's is observed
                have = min(len(games.get(m) or {}) for m in matches)
                widest = max(ratings[r].upper - ratings[r].elo for r in rungs)
                need = max(need, pairs_for_target(have, widest, args.target))
        need = min(need, args.max_pairs)
        print(f"plan from {where}: {describe_plan(need, matches, games, args.workers)}")
        if args.dry_run:
            widths = predicted_half_widths(rungs, elo, draw_elo, dict.fromkeys(matches, need))
            for r in rungs:
                print(f"  {r:>22}  {elo[r]:7.0f}  +-{widths[r]:.0f} expected")
            return 0
        have = max((len(games.get(m) or {}) for m in matches), default=0)
        goal = need if args.pairs is not None else min(need, max(args.probe_pairs, 2 * have))
        jobs = missing_jobs(matches, games, goal)
        if ratings is not None and not jobs:
            break
        if not jobs:  # every planned pair is played but the fit is not identified
            print("error: the games do not identify every rating; play more (--pairs)")
            return 1
        label = f"round {round_number} (to {goal} pairs per match)"
        if not play_round(jobs, goal, args, options, games_file, label):
            return 1
        games = read_games(games_file)
        ratings = fit_games(games, rungs, elo_cfg)
        if ratings is not None:
            write_table(table_from_ratings(ratings, rungs, meta | {"date": _now()}), args.out)
    if ratings is None:
        print("error: no rating fit", file=sys.stderr)
        return 1
    widest = max(ratings[r].upper - ratings[r].elo for r in rungs)
    meta["status"] = "final" if widest <= args.target else f"provisional (+-{widest:.0f} Elo)"
    write_table(table_from_ratings(ratings, rungs, meta | {"date": _now()}), args.out)
    write_results(rung_results(games, rungs), results_path(args.out))  # the games of the fit
    _print_ratings(ratings, rungs)
    print(
        f"wrote {args.out} ({meta['status']}) and its game counts {results_path(args.out)};"
        f" games in {games_file}"
    )
    return 0


EXTEND_PAIRS = 100  # pairs per match of an extension without --pairs (about +-35 Elo a link)


def extend_table(
    args: argparse.Namespace,
    options: dict[str, Any],
    new: Sequence[str],
    elo_cfg: dict[str, Any],
    games_file: Path,
) -> int:
    """``--extend``: rungs added above the top of a rated table. The table's rungs keep their
    ratings and its draw and first-move terms hold (evaluation.ladder.rungs.fit_all with the
    table), so every rating already quoted on its scale stands; only the matches with a new rung
    are played (each new rung against the one or two below it), and the table is rewritten with
    the new rows after the old and its game counts with theirs. Resumes as a full rating does."""
    try:
        table = read_table(args.out)
        old_results = read_results(results_path(args.out))
    except ValueError as e:
        print(f"error: --extend: {e}", file=sys.stderr)
        return 2
    old = [r.player for r in table.rows]
    if clash := [r for r in new if r in old]:
        print(f"error: --extend: {clash} already in {args.out}", file=sys.stderr)
        return 2
    weights = weights_text(options.get("weights"))
    if table.meta.get("weights", weights) != weights:
        print(
            f"error: --extend: {args.out} was rated with minimax weights"
            f" {table.meta['weights']}, these are {weights}",
            file=sys.stderr,
        )
        return 2
    rungs = [*old, *new]
    matches = [m for m in rating_matches(rungs, args.next_neighbours) if m[0] in new]
    pairs = args.pairs or EXTEND_PAIRS
    games = read_games(games_file)
    print(f"extending {args.out}: {describe_plan(pairs, matches, games, args.workers)}")
    if args.dry_run:
        return 0
    jobs = missing_jobs(matches, games, pairs)
    label = f"extension (to {pairs} pairs per match)"
    if not play_round(jobs, pairs, args, options, games_file, label):
        return 1
    rows = [r for r in results_of(read_games(games_file)) if (r.a, r.b) in matches]
    try:
        ratings = fit_all(rows, elo_cfg, table=table)
    except ValueError as e:
        print(f"error: no rating fit: {e}", file=sys.stderr)
        return 1
    added = table_from_ratings(ratings, new, {}).rows
    widest = max(r.upper - r.elo for r in added)
    note = f"{' '.join(new)} added {_now()} at {git_revision()}, {pairs} pairs a match"
    note += f", +-{widest:.0f} Elo at most"
    meta = table.meta | {
        "rungs": " ".join(rungs),
        "extended": "; ".join(filter(None, (table.meta.get("extended"), note))),
    }
    write_table(dataclasses.replace(table, rows=table.rows + added, meta=meta), args.out)
    write_results([*old_results, *rows], results_path(args.out))
    _print_ratings(ratings, new)
    print(f"wrote {args.out} (extended) and its game counts; games in {games_file}")
    return 0


def _print_ratings(ratings: Ratings, rungs: Sequence[str]) -> None:
    for r in rungs:
        p = ratings[r]
        print(f"  {r:>22}  {p.elo:7.1f}  [{p.lower:7.1f}, {p.upper:7.1f}]  {p.games:,} games")
    print(f"draw_elo {ratings.draw_elo:.1f}, first move {ratings.first_move_elo or 0:.1f} Elo")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


if __name__ == "__main__":
    sys.exit(main())
