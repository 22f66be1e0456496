"""A learner-side mirror of the replay window: each game decoded once, batches drawn in NumPy.

Sampling with `ReplayStore.sample` fetches the whole record of every drawn game from Redis, and
decoding it with `game.records.training_samples` parses it in Python for every batch
(~0.45 ms per record), which a GPU learner at batch 4096 outruns. `ReplayMirror` keeps the
window decoded in flat arrays instead:

    per game       start row of its positions, the length the store lists for it
    per position   packed state uint32 (4,), index within its game, first visit entry and
                   number of entries, result code from the mover's view (win, draw, loss),
                   root_wdl float32 (3,) (NaN for a forced move played unsearched), whether
                   it was a full search (playout cap randomization)
    per full one   its position row (to draw full searches only)
                   root_wdl float32 (3,) (NaN for a forced move played unsearched), plies
                   left in the game and whether that is exact (learner.moves_left)
    per visit      action uint8, visit fraction float32 (count / the position's total)

Every array is indexed by an absolute row (game rows are game ids; position and visit rows count
what was appended since the mirror last started afresh), so dropping the oldest games never
rewrites an offset. `refresh()` reads the window's ids and lengths (one round trip), drops the
games that left it and fetches and decodes only the new ones (pipelined MGETs); `sample()` draws
positions uniformly and builds the batch with vectorised gathers and the C++ encoder, identical
to `training_samples` of each drawn record, encoded, for the same draws (tests/test_mirror.py).

Fast searches (playout cap randomization, `GameRecord.full_search` False) never train the policy:
with `fast_value` (replay.fast_positions_train_value) they are drawn like any position and their
rows of the batch have policy weight 0, so they train the value head only; without it they are
never drawn (KataGo's way), and every draw is a full search.

Reanalysis (learner.reanalysis, learner/reanalysis.py) re-searches drawn positions with newer
weights: `set_targets` keeps a position's new policy target and root value beside the stored
ones, with the weights version they came from, until the position leaves the window; `batch_at`
then trains on the new ones. `target_versions` says which version each position's target comes
from (the record's `network_version`, or the reanalysis'), for the targets' age.

`learner.prefetcher.MirrorPrefetcher` runs refresh and sample on a prefetch thread and queues
the batches; the growable arrays are `learner.mirror_column.Column`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence

import numpy as np

from checkerzero.store.replay import ReplayEmpty, ReplayStore
from game import encoding
from game.encoding import HISTORY, NUM_WDL, PACKED_WORDS, num_actions
from game.records import GameRecord, mover_outcome, value_targets
from learner.losses import TrainBatch
from learner.mirror_column import Column
from learner.moves_left import moves_left_targets

logger = logging.getLogger(__name__)

FETCH_GAMES = 1024  # new records per pipelined round trip when catching up: bounds one reply
# (1024 x ~4 KB typical, 64 MB at the 64 KB worst case) and the decoded-but-unappended memory
MALFORMED_LOG_EVERY = 1000  # log the first malformed record, then one in this many


class ReplayMirror:
    """The replay window decoded locally; refreshed incrementally, sampled without Redis.

    Not thread-safe: one thread at a time calls `refresh`, `sample`, `draw`, `batch_at` and
    `locate` (in a run, the prefetch thread); a second thread calling while one is inside raises
    RuntimeError rather than corrupt the arrays. The counters (`num_positions`, `num_games`,
    `malformed`) may be read from any thread.

    A record that does not decode or fails its checks (GameRecord.from_bytes raises ValueError:
    positions the rules cannot reach, illegal played or visited actions, zero visit counts, root
    values that are not probabilities; see game/records.py), is for another board size or holds
    a different number of decisions than the store lists is counted in `malformed` (the run's
    `replay/records_rejected`), logged the first time and every MALFORMED_LOG_EVERY-th, and
    contributes no positions: nothing from it reaches the encoder or a training batch.
    """

    def __init__(self, store: ReplayStore, board_size: int, *, fast_value: bool = True):
        """`fast_value`: fast searches' positions are drawn for the value head (their policy
        weight 0); False: they are never drawn."""
        if board_size not in (6, 8):
            raise ValueError(f"board_size must be 6 or 8, got {board_size}")
        self.store = store
        self.board_size = board_size
        self.fast_value = bool(fast_value)
        self._num_actions = num_actions(board_size)
        self._busy = threading.Lock()
        self._malformed = 0
        self.rebuilds = 0  # times the store was found emptied or rewritten and read afresh
        # per game (row = game id)
        self._game_start = Column(np.int64)  # absolute row of its first position
        self._game_length = Column(np.int64)  # positions the store lists for it
        # per position
        self._positions = Column(np.uint32, PACKED_WORDS)
        self._index = Column(np.int32)  # decision index within its game
        self._visit_start = Column(np.int64)  # absolute row of its first visit entry
        self._visit_len = Column(np.int32)  # visit entries (>= 1)
        self._result = Column(np.uint8)  # _WIN, _DRAW or _LOSS for the side to move
        self._root_wdl = Column(np.float32, NUM_WDL)
        self._full = Column(np.bool_)  # a full search (False: fast, playout cap randomization)
        # per full search, in order: its absolute position row
        self._full_rows = Column(np.int64)
        self._plies_left = Column(np.int32)  # the moves-left head's target
        self._plies_exact = Column(np.bool_)  # False: a lower bound (a game cut short)
        self._version = Column(np.int64)  # weights version of the search that made its target
        # reanalysed positions: absolute row -> (actions, fractions, root_wdl, version)
        self._fresh: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, int]] = {}
        self.reanalysis_rejected = 0  # new targets refused by set_targets (not finite, illegal)
        self._excluded: set[int] = set()  # rows never to train on (bad stored histories)
        # per visit entry
        self._actions = Column(np.uint8)
        self._fractions = Column(np.float32)
        self._clear(first_id=1)

    @property
    def num_positions(self) -> int:
        """Positions that can be drawn (the window's, less those of malformed records)."""
        return self._positions.size

    @property
    def num_drawable(self) -> int:
        """Positions `draw` chooses from: all of them, or only full searches without
        `fast_value`."""
        return self._positions.size if self.fast_value else self._full_rows.size

    @property
    def num_games(self) -> int:
        """Games of the window held, malformed ones (no positions) included."""
        return self._game_start.size

    @property
    def first_id(self) -> int:
        """Id of the oldest game held (the next id to read when none is)."""
        return self._game_start.lo

    @property
    def malformed(self) -> int:
        """Records skipped so far because they did not decode or did not fit (games, not draws)."""
        return self._malformed

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (capacity, not just the live rows)."""
        return sum(c.data.nbytes for c in self._columns())

    def refresh(self) -> int:
        """Catch up with the store's window; returns how many new games were read.

        One round trip reads the window's ids and lengths; the games that left it are dropped,
        and only ids not held yet are fetched (pipelined MGETs of FETCH_GAMES) and decoded. When
        the ids went backwards (the store was emptied, or rewritten with fewer games), everything
        is read afresh. A store emptied and refilled beyond the newest id held between two
        refreshes goes unnoticed: ids and lengths are all that is compared, and the lengths come
        through ReplayStore's local copy, which keeps those it had.
        """
        with self._exclusive():
            first, cumulative = self.store.window()
            lengths = np.diff(cumulative, prepend=0)
            last = first + len(lengths) - 1
            if self._rewritten(first, last, lengths):
                logger.warning(
                    "replay store %r went back to games %d..%d (held %d..%d): reading it afresh",
                    self.store.namespace,
                    first,
                    last,
                    self._game_start.lo,
                    self._game_start.hi - 1,
                )
                self.rebuilds += 1
                self._clear(first)
            self._drop_games_below(first)
            new_ids = np.arange(self._game_start.hi, last + 1)
            new_lengths = lengths[self._game_start.hi - first :]
            for lo in range(0, len(new_ids), FETCH_GAMES):
                ids = new_ids[lo : lo + FETCH_GAMES].tolist()
                self._append_games(ids, new_lengths[lo : lo + FETCH_GAMES], self.store.fetch(ids))
            return len(new_ids)

    def draw(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """`batch_size` absolute position rows drawn uniformly, with replacement: over every
        position, or over the full searches only without `fast_value`."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        with self._exclusive():
            if self._positions.size == 0:
                raise ReplayEmpty(
                    f"replay mirror of {self.store.namespace!r} holds no position yet "
                    f"({self.num_games} games held, {self._malformed} malformed records)"
                )
            full = self._full_rows
            if self.fast_value or full.size == self._positions.size:
                return rng.integers(self._positions.lo, self._positions.hi, size=batch_size)
            if full.size == 0:
                raise ReplayEmpty(
                    f"replay mirror of {self.store.namespace!r} holds no fully searched "
                    f"position yet ({self._positions.size} fast ones; "
                    "replay.fast_positions_train_value is false)"
                )
            return full.take(rng.integers(full.lo, full.hi, size=batch_size))

    def sample(
        self, batch_size: int, rng: np.random.Generator, q_weight: float = 0.0
    ) -> TrainBatch:
        """A training batch of `batch_size` uniform draws (`draw` then `batch_at`)."""
        return self.batch_at(self.draw(batch_size, rng), q_weight)

    def locate(self, rows: np.ndarray | Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(game ids, decision indices within the game) of absolute position `rows`."""
        with self._exclusive():
            p = self._checked(rows)
            starts = self._game_start.view()
            ids = self._game_start.lo + np.searchsorted(starts, p, side="right") - 1
            return ids, self._index.take(p).astype(np.int64)

    def batch_at(self, rows: np.ndarray | Sequence[int], q_weight: float = 0.0) -> TrainBatch:
        """The training batch of absolute position `rows`, in their order.

        The same values as `game.records.training_samples(record, indices, q_weight)` through
        `game.encoding.encode` and `legal_masks`: histories (earlier slots zero before the game's
        first position), visit fractions, the result mixed with the root value where one was
        searched. The policy weight is 0 on fast searches' rows, 1 on the others (None when
        every row is a full search).
        """
        if not 0.0 <= q_weight <= 1.0:
            raise ValueError(f"q_weight must be in [0, 1], got {q_weight}")
        with self._exclusive():
            p = self._checked(rows)
            n = len(p)
            packed = self._packed(p)
            lens = self._visit_len.take(p).astype(np.int64)
            owner = np.repeat(np.arange(n), lens)  # the draw each gathered visit entry is for
            shift = self._visit_start.take(p) - (np.cumsum(lens) - lens)
            entries = np.arange(len(owner)) + shift[owner]  # absolute visit rows, draw by draw
            pi = np.zeros((n, self._num_actions), np.float32)
            pi[owner, self._actions.take(entries)] = self._fractions.take(entries)
            root_wdl = self._root_wdl.take(p)
            full = self._full.take(p)
            for i in np.flatnonzero([int(r) in self._fresh for r in p]) if self._fresh else ():
                actions, fractions, fresh_wdl, _ = self._fresh[int(p[i])]
                pi[i] = 0.0
                pi[i, actions] = fractions
                root_wdl[i] = fresh_wdl
                full[i] = True  # a full search's target now
            wdl = value_targets(self._result.take(p), root_wdl, q_weight)
            weight = None if full.all() else full.astype(np.float32)
            plies_left, plies_exact = self._plies_left.take(p), self._plies_exact.take(p)
        return TrainBatch(
            planes=encoding.encode(packed, self.board_size),
            mask=encoding.legal_masks(packed, self.board_size),
            target_pi=pi,
            target_wdl=wdl,
            policy_weight=weight,
            moves_left=plies_left,
            moves_left_exact=plies_exact,
        )

    def histories(self, rows: np.ndarray | Sequence[int]) -> np.ndarray:
        """Packed histories (n, HISTORY, PACKED_WORDS) of absolute position `rows`."""
        with self._exclusive():
            return self._packed(self._checked(rows))

    def exclude(self, rows: np.ndarray | Sequence[int]) -> None:
        """Marks positions `rows` never to be trained on (a bad stored history); callers drop
        them from their draws (`excluded`)."""
        with self._exclusive():
            self._excluded.update(self._checked(rows).tolist())

    def excluded(self, rows: np.ndarray | Sequence[int]) -> np.ndarray:
        """Whether each of `rows` was excluded (bool (n,))."""
        with self._exclusive():
            p = self._checked(rows)
            if not self._excluded:
                return np.zeros(len(p), np.bool_)
            return np.array([r in self._excluded for r in p.tolist()], np.bool_)

    def reanalysed(self, rows: np.ndarray | Sequence[int]) -> np.ndarray:
        """Whether each position's target comes from a reanalysis (bool (n,))."""
        with self._exclusive():
            p = self._checked(rows)
            return np.array([r in self._fresh for r in p.tolist()], np.bool_)

    def target_versions(self, rows: np.ndarray | Sequence[int]) -> np.ndarray:
        """The weights version each position's policy target comes from (int64 (n,)): its
        reanalysis' when it was reanalysed, else its record's network_version."""
        with self._exclusive():
            p = self._checked(rows)
            out = self._version.take(p).astype(np.int64)
            for i, r in enumerate(p.tolist()):
                if r in self._fresh:
                    out[i] = self._fresh[r][3]
            return out

    def set_targets(
        self,
        rows: np.ndarray | Sequence[int],
        pi: np.ndarray,
        root_wdl: np.ndarray,
        version: int,
    ) -> int:
        """Keeps new targets of positions `rows` from a search with weights `version`: policy
        `pi` (n, A) (probabilities over the legal actions) and root value `root_wdl` (n, 3).
        A row whose target is not finite, does not sum to 1, or puts mass on an illegal action
        is refused and counted in `reanalysis_rejected` (its stored target stays). Returns the
        number kept."""
        pi = np.asarray(pi, np.float32)
        root_wdl = np.asarray(root_wdl, np.float32)
        with self._exclusive():
            p = self._checked(rows)
            if pi.shape != (len(p), self._num_actions) or root_wdl.shape != (len(p), NUM_WDL):
                raise ValueError(
                    f"set_targets: pi {pi.shape} and root_wdl {root_wdl.shape} must be "
                    f"({len(p)}, {self._num_actions}) and ({len(p)}, {NUM_WDL})"
                )
            legal = encoding.legal_masks(self._packed(p), self.board_size)
            ok = (
                np.isfinite(pi).all(axis=1)
                & (pi >= 0).all(axis=1)
                & (np.abs(pi.sum(axis=1) - 1.0) < 1e-3)
                & ~(pi * ~legal > 0).any(axis=1)
                & np.isfinite(root_wdl).all(axis=1)
                & (root_wdl >= 0).all(axis=1)
                & (np.abs(root_wdl.sum(axis=1) - 1.0) < 1e-3)
            )
            self.reanalysis_rejected += int((~ok).sum())
            for i in np.flatnonzero(ok):
                actions = np.flatnonzero(pi[i] > 0).astype(np.uint8)
                self._fresh[int(p[i])] = (
                    actions,
                    pi[i, actions],
                    root_wdl[i].copy(),
                    int(version),
                )
            return int(ok.sum())

    def _packed(self, p: np.ndarray) -> np.ndarray:
        index = self._index.take(p)
        packed = np.zeros((len(p), HISTORY, PACKED_WORDS), np.uint32)
        for k in range(HISTORY):
            ok = index >= k
            packed[ok, k] = self._positions.take(p[ok] - k)
        return packed

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("ReplayMirror is used from two threads at once; it has one owner")
        try:
            yield
        finally:
            self._busy.release()

    def _columns(self) -> list[Column]:
        return [v for v in vars(self).values() if isinstance(v, Column)]

    def _per_position(self) -> tuple[Column, ...]:
        return (
            self._positions,
            self._index,
            self._visit_start,
            self._visit_len,
            self._result,
            self._root_wdl,
            self._full,
            self._plies_left,
            self._plies_exact,
            self._version,
        )

    def _clear(self, first_id: int) -> None:
        for column in self._columns():
            column.reset(0)
        self._game_start.reset(first_id)
        self._game_length.reset(first_id)
        self._fresh.clear()
        self._excluded.clear()

    def _checked(self, rows: np.ndarray | Sequence[int]) -> np.ndarray:
        p = np.asarray(rows, dtype=np.int64).reshape(-1)
        lo, hi = self._positions.lo, self._positions.hi
        if p.size and (p.min() < lo or p.max() >= hi):
            raise IndexError(f"position rows must be in [{lo}, {hi}), got {p.min()}..{p.max()}")
        return p

    def _rewritten(self, first: int, last: int, lengths: np.ndarray) -> bool:
        """True when the window read cannot follow from the one held: the window's ids went
        backwards, or a game held and still in the window has another length now."""
        held_lo, held_hi = self._game_start.lo, self._game_start.hi
        if first < held_lo or last < held_hi - 1:
            return True
        if first >= held_hi:
            return False
        held = self._game_length.view()[first - held_lo :]
        return not np.array_equal(held, lengths[: held_hi - first])

    def _drop_games_below(self, first: int) -> None:
        games = self._game_start
        if first >= games.hi:  # every game held left the window (or none was held)
            for column in self._columns():
                column.drop_below(column.hi)
            self._fresh.clear()
            self._excluded.clear()
            self._game_start.reset(first)
            self._game_length.reset(first)
            return
        if first <= games.lo:
            return
        pos_row = games.at(first)
        visit_row = self._visit_start.at(pos_row) if pos_row < self._positions.hi else None
        games.drop_below(first)
        self._game_length.drop_below(first)
        for column in self._per_position():
            column.drop_below(pos_row)
        full = self._full_rows
        full.drop_below(full.lo + int(np.searchsorted(full.view(), pos_row)))
        if visit_row is None:
            visit_row = self._actions.hi
        self._actions.drop_below(visit_row)
        self._fractions.drop_below(visit_row)
        self._fresh = {r: v for r, v in self._fresh.items() if r >= self._positions.lo}
        self._excluded = {r for r in self._excluded if r >= self._positions.lo}

    def _decode(self, game_id: int, data: bytes, listed: int) -> GameRecord | None:
        """The record, or None (counted, logged) when it is malformed or does not fit."""
        try:
            record = GameRecord.from_bytes(data)
            if record.board_size != self.board_size:
                raise ValueError(
                    f"record for a {record.board_size}x{record.board_size} board, "
                    f"expected {self.board_size}"
                )
            if record.num_decisions != listed:
                raise ValueError(
                    f"record holds {record.num_decisions} decisions, the store lists {listed}"
                )
            return record
        except ValueError as e:
            self._malformed += 1
            if self._malformed == 1 or self._malformed % MALFORMED_LOG_EVERY == 0:
                logger.warning(
                    "skipped malformed replay record (game %d): %s [%d skipped so far]",
                    game_id,
                    e,
                    self._malformed,
                )
            return None

    def _append_games(self, ids: list[int], listed: np.ndarray, data: dict[int, bytes]) -> None:
        """Decodes and appends games `ids` (consecutive, from the next row); absent ones are
        games evicted since the window was read: they hold no positions and leave at the next
        refresh."""
        starts = np.empty(len(ids), np.int64)
        row = self._positions.hi
        decoded: list[GameRecord] = []
        for k, (game_id, n) in enumerate(zip(ids, listed.tolist(), strict=True)):
            starts[k] = row
            record = data.get(game_id)
            if record is None:
                continue
            game = self._decode(game_id, record, n)
            if game is not None:
                decoded.append(game)
                row += game.num_decisions
        if decoded:
            self._append_positions(decoded)
        self._game_start.append(starts)
        self._game_length.append(listed)

    def _append_positions(self, games: list[GameRecord]) -> None:
        first_row = self._positions.hi
        lengths = np.array([g.num_decisions for g in games], np.int64)
        positions = np.concatenate([g.positions for g in games])
        first_of_game = np.repeat(np.cumsum(lengths) - lengths, lengths)
        visit_len = np.concatenate([np.diff(g.visit_offsets.astype(np.int64)) for g in games])
        local_start = np.cumsum(visit_len) - visit_len
        counts = np.concatenate([g.visit_counts for g in games])
        # A position's total in int64, then float32: exact, as training_samples' float32 sum is
        # (integers below 2^24: at most 128 actions of at most 65535 visits), so equal quotients.
        totals = np.add.reduceat(counts.astype(np.int64), local_start).astype(np.float32)
        result = np.repeat(np.array([int(g.result) for g in games], np.int64), lengths)
        code = mover_outcome(result, positions[:, 3])
        self._visit_start.append(self._actions.hi + local_start)
        self._visit_len.append(visit_len.astype(np.int32))
        self._actions.append(np.concatenate([g.visit_actions for g in games]))
        self._fractions.append(counts.astype(np.float32) / np.repeat(totals, visit_len))
        self._index.append((np.arange(len(positions)) - first_of_game).astype(np.int32))
        self._result.append(code.astype(np.uint8))
        self._root_wdl.append(np.concatenate([g.root_wdl for g in games]).astype(np.float32))
        full = np.concatenate([g.full_search for g in games])
        self._full.append(full)
        self._full_rows.append(first_row + np.flatnonzero(full))
        plies_left, plies_exact = moves_left_targets(games)
        self._plies_left.append(plies_left)
        self._plies_exact.append(plies_exact)
        versions = np.array([g.network_version for g in games], np.int64)
        self._version.append(np.repeat(versions, lengths))
        self._positions.append(positions)
