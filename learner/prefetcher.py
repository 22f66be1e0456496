"""The replay mirror's prefetch thread: training batches made in the background and queued.

`MirrorPrefetcher` refreshes and samples a `learner.mirror.ReplayMirror` on its own thread, and
reanalyses a share of each batch's positions first when given a reanalyser
(learner/reanalysis.py).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Self

import numpy as np

from learner.losses import TrainBatch
from learner.mirror import ReplayMirror

logger = logging.getLogger(__name__)

REFRESH_S = 0.5  # the prefetcher's pause between refreshes: a new game can be drawn within
# about this long, and a refresh with nothing new (one round trip, ~1 ms) stays a small share
EMPTY_POLL_S = 0.25  # the prefetcher's wait while the window is empty or malformed-only


class MirrorPrefetcher:
    """Training batches from a `ReplayMirror`, made on a background thread and queued.

    The thread refreshes the mirror at most every `refresh_s` seconds (and on every turn while
    it holds no position, waiting EMPTY_POLL_S in between), then samples a batch of
    `batch_size` with `q_weight` of the root value in the value target, and keeps up to `depth`
    batches queued for `get()`. The mirror belongs to this thread from then on. `malformed`
    counts skipped records (games). A Redis failure (ReplayUnavailable) or any other error stops
    the thread and is raised by the next `get()`.

    With a `reanalyser` (learner/reanalysis.py) and `reanalyse_share` > 0, that share of each
    batch's positions is searched again with the reanalyser's newest weights before the batch is
    made, and the new targets stay in the mirror. `take_target_stats()` gives the mean weights
    version of the targets trained on and the share of them reanalysed, since its last call.
    """

    def __init__(
        self,
        mirror: ReplayMirror,
        batch_size: int,
        *,
        depth: int,
        seed: int,
        q_weight: float = 0.0,
        refresh_s: float = REFRESH_S,
        reanalyser: Any = None,
        reanalyse_share: float = 0.0,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if depth < 1:
            raise ValueError(f"prefetch depth must be >= 1, got {depth}")
        if not 0.0 <= q_weight <= 1.0:
            raise ValueError(f"q_weight must be in [0, 1], got {q_weight}")
        if not refresh_s >= 0:
            raise ValueError(f"refresh_s must be >= 0, got {refresh_s}")
        if not 0.0 <= reanalyse_share <= 1.0:
            raise ValueError(f"reanalysis share must be in [0, 1], got {reanalyse_share}")
        self._reanalyser = reanalyser
        self._reanalyse_share = reanalyse_share if reanalyser is not None else 0.0
        self._stats_lock = threading.Lock()
        self._version_sum = 0.0  # target versions of the rows batched since take_target_stats
        self._rows = 0
        self._reanalysed = 0
        self._mirror = mirror
        self._batch_size = batch_size
        self._q_weight = q_weight
        self._refresh_s = refresh_s
        self._rng = np.random.default_rng(seed)
        self._refreshed_at = -float("inf")
        self._queue: queue.Queue[TrainBatch] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="replay-prefetch", daemon=True)
        self._thread.start()

    @property
    def malformed(self) -> int:
        """Records skipped so far because they did not decode or did not fit."""
        return self._mirror.malformed

    def take_target_stats(self) -> tuple[float | None, float]:
        """(mean weights version of the targets batched, share of them reanalysed) since the
        last call; (None, 0.0) when no batch was made."""
        with self._stats_lock:
            rows, total, fresh = self._rows, self._version_sum, self._reanalysed
            self._rows, self._version_sum, self._reanalysed = 0, 0.0, 0
        return (None, 0.0) if rows == 0 else (total / rows, fresh / rows)

    def get(self, timeout: float | None = None) -> TrainBatch:
        """The next batch; raises queue.Empty after `timeout` s, or the thread's error."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return self._queue.get(timeout=EMPTY_POLL_S)
            except queue.Empty:
                if self._error is not None:
                    raise self._error from None
                if self._stop.is_set():
                    raise RuntimeError("the prefetcher is closed") from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    def close(self) -> None:
        """Stop the thread and drop the queued batches."""
        self._stop.set()
        while self._thread.is_alive():
            try:
                while True:
                    self._queue.get_nowait()  # unblock a put() in progress
            except queue.Empty:
                pass
            self._thread.join(timeout=EMPTY_POLL_S)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next_batch(self) -> TrainBatch | None:
        now = time.monotonic()
        if self._mirror.num_drawable == 0 or now - self._refreshed_at >= self._refresh_s:
            self._mirror.refresh()
            self._refreshed_at = now
        if self._mirror.num_drawable == 0:
            self._stop.wait(EMPTY_POLL_S)
            return None
        rows = self._mirror.draw(self._batch_size, self._rng)
        if self._reanalyse_share > 0 and self._reanalyser.version is not None:
            # The draws are uniform and independent: the first ones are as good a sample as any.
            pick = np.unique(rows[: round(self._reanalyse_share * len(rows))])
            got = self._reanalyser.run(self._mirror.histories(pick))
            ok = got.ok
            self._mirror.set_targets(pick[ok], got.pi[ok], got.root_wdl[ok], got.version)
            if got.bad.any():
                self._mirror.exclude(pick[got.bad])
        rows = self._without_excluded(rows)
        if len(rows) == 0:  # every draw was a bad position
            self._stop.wait(EMPTY_POLL_S)
            return None
        versions = self._mirror.target_versions(rows)
        fresh = self._mirror.reanalysed(rows)
        with self._stats_lock:
            self._version_sum += float(versions.sum())
            self._rows += len(rows)
            self._reanalysed += int(fresh.sum())
        return self._mirror.batch_at(rows, self._q_weight)

    def _without_excluded(self, rows: np.ndarray) -> np.ndarray:
        """`rows` less the excluded ones, topped up with new draws (a few tries: a window of
        nothing but bad positions trains on a smaller batch rather than waiting)."""
        for _ in range(8):
            keep = rows[~self._mirror.excluded(rows)]
            if len(keep) == len(rows):
                return rows
            more = self._mirror.draw(len(rows) - len(keep), self._rng)
            rows = np.concatenate([keep, more])
        return rows[~self._mirror.excluded(rows)]

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batch = self._next_batch()
                if batch is None:
                    continue
                while not self._stop.is_set():
                    try:
                        self._queue.put(batch, timeout=EMPTY_POLL_S)
                        break
                    except queue.Full:
                        pass
        except BaseException as e:  # handed to the training thread by get()
            logger.exception("replay prefetcher stopped")
            self._error = e
