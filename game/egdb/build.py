"""Builds an endgame database: the signature pairs as a DAG on a process pool or Ray tasks.

A pair (a signature and its colour swap) depends only on the pairs its captures and crownings
reach, all with fewer pieces or fewer men. ``build()`` runs every pair whose dependencies are
done, as many at a time as there are workers, and reports progress after each. Each file is
written under a temporary name and renamed into place, so a killed build leaves only complete
files; the next build checks those (header, length, checksum) and skips them. The folder's
manifest (``game.egdb.manifest``) is written at the start, listing the complete files, and again
after each pair, so it always names exactly the finished files.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import functools
import logging
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from game import _core
from game.egdb import (
    EgdbError,
    EndgameDatabase,
    Signature,
    available_pieces,
    pair_complete,
    pair_dependencies,
    pairs,
    swapped,
)
from game.egdb.manifest import (
    entry_for,
    manifest_path,
    read_manifest,
    regular_size,
    write_manifest,
)

log = logging.getLogger(__name__)

# Progress lines at most this often (and after the last slice): small slices finish in
# milliseconds, and a line for each would flood a run's log.
PROGRESS_EVERY_S = 2.0


@dataclass
class BuildReport:
    pairs_total: int
    pairs_built: int
    pairs_skipped: int  # already complete on disk
    positions: int  # positions solved by this build
    seconds: float
    bytes: int  # size of all files of the database


def _solve(folder: str, size: int, sig: Signature) -> dict:
    return _core.egdb_solve_pair(folder, size, sig)


def _format_eta(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def build(
    folder: str | Path,
    size: int,
    max_pieces: int,
    workers: int = 1,
    use_ray: bool = False,
    progress: Callable[[str], None] | None = None,
) -> BuildReport:
    """Builds (or completes) the database of up to ``max_pieces`` pieces in ``folder``.

    ``workers`` processes solve pairs at once (1: in this process). With ``use_ray`` the pairs are
    Ray tasks on the connected cluster (``ray.init()`` first, or a local one is started); every
    node must see ``folder`` at the same path (a shared file system), since tasks read their
    dependencies' files and write their own there.
    """
    if max_pieces < 1:
        raise ValueError(f"--pieces must be at least 1, got {max_pieces}")
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    say = progress or log.info
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _remove_stale(folder, size)
    order = pairs(size, max_pieces)
    deps = {s: pair_dependencies(size, s) for s in order}
    sizes = {
        s: _core.egdb_index_size(size, s)
        + (0 if s == swapped(s) else _core.egdb_index_size(size, swapped(s)))
        for s in order
    }
    done = {s for s in order if pair_complete(folder, size, s)}
    manifest = _complete_entries(folder, size, order, done)
    write_manifest(folder, size, manifest)
    skipped = len(done)
    todo = [s for s in order if s not in done]
    total_positions = sum(sizes[s] for s in todo)
    say(
        f"endgame database {size}x{size} up to {max_pieces} pieces in {folder}: "
        f"{len(order)} slices, "
        f"{skipped} already built, {len(todo)} to build ({total_positions:,} positions)"
    )
    start = time.monotonic()
    solved = 0
    last_report = start

    def report(sig: Signature) -> None:
        nonlocal last_report, solved
        done.add(sig)
        for name in _pair_names(size, sig):
            manifest[name] = entry_for(folder / name)
        write_manifest(folder, size, manifest)
        solved += sizes[sig]
        now = time.monotonic()
        if now - last_report < PROGRESS_EVERY_S and len(done) < len(order):
            return
        last_report = now
        elapsed = max(now - start, 1e-9)
        rate = solved / elapsed
        eta = (total_positions - solved) / rate if rate > 0 else 0.0
        say(
            f"egdb {size}x{size}: {len(done)}/{len(order)} slices (last {'-'.join(map(str, sig))}) "
            f"{solved:,}/{total_positions:,} positions, {rate / 1e6:.2f} M positions/s, "
            f"ETA {_format_eta(eta)}"
        )

    if use_ray:
        _run_ray(folder, size, todo, deps, done, report)
    elif workers == 1:
        for sig in todo:
            _solve(str(folder), size, sig)
            report(sig)
    else:
        _run_processes(folder, size, todo, deps, done, report, workers)
    seconds = time.monotonic() - start
    db_bytes = sum(
        p.stat().st_size
        for pattern in (f"{size}x{size}_*.egdb", f"{size}x{size}_*.dtc")
        for p in folder.glob(pattern)
    )
    say(
        f"egdb {size}x{size} up to {max_pieces} pieces: done in {seconds:.1f} s, "
        f"{db_bytes:,} bytes in {folder}"
    )
    return BuildReport(len(order), len(todo), skipped, solved, seconds, db_bytes)


def file_name(size: int, sig: Signature) -> str:
    return _core.egdb_file_name(size, sig)


def _pair_names(size: int, sig: Signature) -> set[str]:
    """The value and distance files of a signature pair."""
    return {
        namer(size, s)
        for s in (sig, swapped(sig))
        for namer in (_core.egdb_file_name, _core.egdb_distance_file_name)
    }


def _complete_entries(folder: Path, size: int, order, done) -> dict[str, dict]:
    """Manifest entries of the complete files: this build's finished pairs (an old manifest's
    entry reused when the file's size agrees, else the file hashed) and, from an old manifest,
    the files of a larger database still there at their listed size."""
    try:
        old = read_manifest(folder, size)["files"]
    except EgdbError:
        old = {}
    ours = {name for s in order for name in _pair_names(size, s)}
    entries = {}
    for sig in done:
        for name in _pair_names(size, sig):
            size_now = regular_size(folder / name)
            known = old.get(name)
            entries[name] = (
                known if known and known["bytes"] == size_now else entry_for(folder / name)
            )
    for name, known in old.items():
        if name in ours:
            continue
        try:
            if regular_size(folder / name) == known["bytes"]:
                entries[name] = known
        except EgdbError:
            pass  # gone: no longer listed
    return entries


def _remove_stale(folder: Path, size: int) -> None:
    """The temporary files a killed build left in ``folder``."""
    for pattern in (
        f"{size}x{size}_*.egdb.tmp*",
        f"{size}x{size}_*.dtc.tmp*",
        f"{size}x{size}.manifest.json.tmp*",
    ):
        for stale in folder.glob(pattern):  # left by a killed build
            stale.unlink()


def _run_processes(
    folder: Path,
    size: int,
    todo: list[Signature],
    deps: dict[Signature, set[Signature]],
    done: set[Signature],
    report: Callable[[Signature], None],
    workers: int,
) -> None:
    """The pairs in `todo` solved by `workers` processes, each once its dependencies are done."""
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        running: dict[cf.Future, Signature] = {}
        waiting = list(todo)
        while waiting or running:
            for sig in [s for s in waiting if deps[s] <= done][: max(0, workers - len(running))]:
                waiting.remove(sig)
                running[pool.submit(_solve, str(folder), size, sig)] = sig
            if not running:
                raise RuntimeError(
                    "endgame database: slices left whose dependencies cannot be built"
                )
            finished, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
            for fut in finished:
                sig = running.pop(fut)
                fut.result()  # a worker's error stops the build here, naming the slice
                report(sig)


def _run_ray(folder, size, todo, deps, done, report) -> None:
    import ray  # optional: only a --ray build needs it

    if not ray.is_initialized():
        ray.init()
    solve = ray.remote(_solve)
    waiting = list(todo)
    running = {}
    while waiting or running:
        for sig in [s for s in waiting if deps[s] <= done]:
            waiting.remove(sig)
            running[solve.remote(str(folder), size, sig)] = sig
        if not running:
            raise RuntimeError("endgame database: slices left whose dependencies cannot be built")
        ready, _ = ray.wait(list(running), num_returns=1)
        for ref in ready:
            sig = running.pop(ref)
            ray.get(ref)
            report(sig)


def ensure_database(
    folder: str | Path,
    size: int,
    max_pieces: int,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
) -> EndgameDatabase:
    """Opens the database, first building whatever part of it is missing or damaged (with
    progress lines naming what was wrong); complete files are kept. A folder without a manifest
    gets one (the build checks every file first). A file that is not a regular one, or one in the
    folder that the manifest does not list, stops it with an error naming the file."""
    say = progress or log.info
    if available_pieces(folder, size, 1) == 0 and not os.path.lexists(manifest_path(folder, size)):
        say(
            f"endgame database {size}x{size} up to {max_pieces} pieces not found in {folder}: "
            "building it"
        )
    else:
        try:
            return EndgameDatabase(folder, size, max_pieces)
        except EgdbError as e:
            say(f"{e}: building what is missing or damaged, and the manifest")
    build(folder, size, max_pieces, workers=workers, progress=say)
    return EndgameDatabase(folder, size, max_pieces)


@functools.cache
def cached_database(folder: str, size: int, max_pieces: int, workers: int = 1) -> EndgameDatabase:
    """``ensure_database`` once per process and arguments: players and searches share one map."""
    return ensure_database(folder, size, max_pieces, workers=workers)


# Unmapped before the interpreter tears the compiled module down (else it reports leaks).
atexit.register(cached_database.cache_clear)


def database_from_config(cfg, size: int) -> EndgameDatabase:
    """The database the ``egdb`` config group names (built first if missing), for board ``size``."""
    try:
        folder, pieces, workers = str(cfg["dir"]), int(cfg["pieces"]), int(cfg["build_workers"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"config group egdb needs dir, pieces and build_workers: {err}") from None
    return cached_database(folder, size, pieces, workers)
