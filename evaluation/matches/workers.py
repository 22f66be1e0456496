"""A match between two player *specs*, its game pairs spread over workers (:func:`run_match`).

Workers build their own players from the specs: one Ray task per game pair when Ray is
available, else a local process pool, else a plain loop. Where a network searches to a number
of simulations, a task holds several pairs (``side_by_side``) whose games are played side by
side (evaluation.matches.games.play_pairs), their searches sharing forward passes; the moves are
those of one pair after another. Results cross process boundaries as plain dicts of strings
and numbers, never as pickled objects. The command line over it is ``python -m
evaluation.match``.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any

from checkerzero.cluster.start import start_ray, stop_ray
from evaluation.matches.games import (
    DEFAULT_MAX_PLIES,
    PairPlan,
    _check_games,
    play_pair,
    play_pairs,
    schedule,
)
from evaluation.matches.records import MatchResult, PairRecord
from evaluation.players.base import Player
from evaluation.players.make import make_player
from game.egdb.build import cached_database
from game.openings import Opening

# Seconds to wait for any one game pair before giving up on a worker (Ray waits forever on a
# resource no node has): ample for depth 8 on a slow core, whose pairs take about a minute.
DEFAULT_PAIR_TIMEOUT_S = 1800.0


# Game pairs a match worker plays side by side by default where a network searches to a number
# of simulations (``run_match``): 8 games share each forward pass (x ``leaves_per_game`` leaves).
SIDE_BY_SIDE = 4


PARENT_POLL_S = 0.5  # how often a worker process checks that the match that started it lives


def _exit_with_parent(parent_pid: int) -> None:
    """Worker initializer: a daemon thread ends this process once its parent is gone (killed,
    even with SIGKILL), instead of letting it play its current pair to the end unseen."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _pairs_task(
    spec_a: str,
    spec_b: str,
    pairs: list[tuple[int, str, list[str]]],
    max_plies: int,
    size: int,
    options: dict[str, Any],
    adjudicate: bool = False,
) -> list[dict[str, Any]]:
    """Game pairs in a worker: plain arguments in, plain dicts out, in order (nothing pickled).
    ``pairs`` holds ``(index, opening name, opening moves)``. One pair is played one game after
    the other; several side by side (``play_pairs``), each network loaded once and every game
    given its own player object (a ``fork`` of it; a fresh one of any other kind)."""
    protos = make_player(spec_a, **options), make_player(spec_b, **options)
    egdb = (
        cached_database(options["egdb_dir"], size, options["egdb_pieces"]) if adjudicate else None
    )
    openings = [(index, Opening(name, tuple(moves), size=size)) for index, name, moves in pairs]
    if len(openings) == 1:
        ((index, opening),) = openings
        record = play_pair(*protos, opening, index, max_plies=max_plies, size=size, egdb=egdb)
        return [record.to_dict()]

    def player(k: int) -> Player:
        fork = getattr(protos[k], "fork", None)
        return fork() if fork is not None else make_player((spec_a, spec_b)[k], **options)

    plans = [
        PairPlan(a=(player(0), player(0)), b=(player(1), player(1)), opening=o, index=i)
        for i, o in openings
    ]
    records = play_pairs(plans, max_plies=max_plies, size=size, egdb=egdb)
    return [record.to_dict() for record in records]


def batches_side_by_side(player: Player) -> bool:
    """Whether ``player``'s games gain from being played side by side: a network searching to a
    number of simulations (its games then share forward passes); a timed one searches alone."""
    return callable(getattr(player, "decide", None)) and not getattr(player, "time_ms", 0)


def _ray_module(mode: str) -> Any | None:
    if mode == "off":
        return None
    try:
        import ray
    except ImportError:
        if mode == "on":
            raise ValueError("--ray on, but Ray is not installed") from None
        return None
    return ray


def run_match(
    spec_a: str,
    spec_b: str,
    openings: Sequence[Opening],
    *,
    games: int,
    seed: int = 0,
    max_plies: int = DEFAULT_MAX_PLIES,
    size: int = 8,
    workers: int = 1,
    ray_mode: str = "auto",
    player_options: Mapping[str, Any] | None = None,
    pair_timeout_s: float = DEFAULT_PAIR_TIMEOUT_S,
    progress: Callable[[PairRecord, int, int], None] | None = None,
    adjudicate: bool = False,
    side_by_side: int = SIDE_BY_SIDE,
    played: Sequence[PairRecord] = (),
) -> MatchResult:
    """A match between two player specs, one task per game pair, or per ``side_by_side`` pairs
    played side by side (``play_pairs``) where a network searching to a number of simulations
    plays: its games then share forward passes (fewer, larger batches), and the moves are the
    same as one pair after another.

    ``adjudicate`` ends each game as soon as it reaches the endgame database named by the
    ``egdb_dir`` and ``egdb_pieces`` player options (built here first if missing).

    ``ray_mode``: ``auto`` uses Ray when it is installed (joining a running cluster, else
    starting a local one with ``workers`` CPUs), ``on`` requires it, ``off`` uses a local
    process pool of ``workers`` processes (a plain loop for ``workers == 1``). The result is the
    same whichever runs it: pairs are put back in schedule order.

    ``played``: pairs of this match already played (a journal of an interrupted run); they are
    not played again, and each must be the pair its index names in this match's schedule.
    """
    if ray_mode not in ("auto", "on", "off"):
        raise ValueError(f"ray mode must be auto, on or off, got {ray_mode!r}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if isinstance(side_by_side, bool) or not isinstance(side_by_side, int) or side_by_side < 1:
        raise ValueError(f"side_by_side must be an integer >= 1, got {side_by_side!r}")
    options = dict(player_options or {})
    # Fail fast, here, on a bad spec rather than in every worker.
    first_a, first_b = make_player(spec_a, **options), make_player(spec_b, **options)
    name_a, name_b = first_a.name, first_b.name
    if not (batches_side_by_side(first_a) or batches_side_by_side(first_b)):
        side_by_side = 1
    del first_a, first_b
    uses_db = adjudicate or "+db:" in spec_a or "+db:" in spec_b
    if uses_db:  # build a missing database once here, not in every worker
        if not options.get("egdb_dir") or int(options.get("egdb_pieces", 0)) < 1:
            raise ValueError("the endgame database needs the egdb_dir and egdb_pieces options")
        cached_database(options["egdb_dir"], size, int(options["egdb_pieces"]))
    plan = schedule(openings, _check_games(games), seed)
    done: list[PairRecord] = _check_played(played, plan, name_a, name_b)
    skip = {p.index for p in done}
    pairs = [(i, o.name, list(o.moves)) for i, o in enumerate(plan) if i not in skip]
    # Pairs per task: side_by_side, but never so many that a worker is left without a share.
    per_task = max(1, min(side_by_side, math.ceil(len(pairs) / workers)))
    jobs = [
        (spec_a, spec_b, pairs[k : k + per_task], max_plies, size, options, adjudicate)
        for k in range(0, len(pairs), per_task)
    ]
    task_timeout_s = pair_timeout_s * per_task

    def finished(ds: Sequence[Mapping[str, Any]]) -> None:
        for d in ds:
            pair = PairRecord.from_dict(d)
            done.append(pair)
            if progress is not None:
                progress(pair, len(done), len(plan))

    ray = _ray_module(ray_mode)
    if ray is not None and jobs:
        _run_on_ray(ray, jobs, workers, task_timeout_s, finished)
    elif workers == 1 or len(jobs) <= 1:
        for job in jobs:
            finished(_pairs_task(*job))
    else:
        _run_in_processes(jobs, workers, task_timeout_s, finished)
    return MatchResult(name_a, name_b, tuple(sorted(done, key=lambda p: p.index)))


def _check_played(
    played: Sequence[PairRecord], plan: Sequence[Opening], name_a: str, name_b: str
) -> list[PairRecord]:
    """``played`` if every pair is the one its index names in ``plan``, played once by these
    players; else ValueError."""
    seen: set[int] = set()
    for pair in played:
        players = (pair.a_black.black, pair.a_black.white, pair.a_white.white, pair.a_white.black)
        if players != (name_a, name_b, name_a, name_b):
            raise ValueError(
                f"game pair {pair.index} ({pair.opening}) was played by "
                f"{pair.a_black.black} and {pair.a_black.white}, not {name_a} and {name_b}"
            )
        if not 0 <= pair.index < len(plan):
            raise ValueError(
                f"game pair {pair.index} ({pair.opening}) is outside this match's schedule "
                f"of {len(plan)} pairs"
            )
        if pair.opening != plan[pair.index].name:
            raise ValueError(
                f"game pair {pair.index} was played from {pair.opening}, but this match's "
                f"schedule has {plan[pair.index].name} there (another seed or deck?)"
            )
        if pair.index in seen:
            raise ValueError(f"game pair {pair.index} ({pair.opening}) is given twice")
        seen.add(pair.index)
    return list(played)


def _run_in_processes(
    jobs: list[tuple],
    workers: int,
    timeout_s: float,
    finished: Callable[[Sequence[Mapping[str, Any]]], None],
) -> None:
    ctx = get_context("spawn")  # no fork of a process that may hold threads
    with ProcessPoolExecutor(
        max_workers=min(workers, len(jobs)),
        mp_context=ctx,
        initializer=_exit_with_parent,
        initargs=(os.getpid(),),
    ) as pool:
        futures = [pool.submit(_pairs_task, *job) for job in jobs]
        for future in as_completed(futures, timeout=timeout_s * len(jobs)):
            finished(future.result())


def _run_on_ray(
    ray: Any,
    jobs: list[tuple],
    workers: int,
    timeout_s: float,
    finished: Callable[[Sequence[Mapping[str, Any]]], None],
) -> None:
    owned = not ray.is_initialized()  # joined or started here: shut down here
    start_ray("auto", num_cpus=workers, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1)(_pairs_task)
        pending = [task.remote(*job) for job in jobs]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=timeout_s)
            if not ready:
                raise TimeoutError(f"no game pairs finished within {timeout_s:.0f} s on Ray")
            finished(ray.get(ready[0], timeout=timeout_s))
    finally:
        if owned:
            stop_ray()
