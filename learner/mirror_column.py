"""A growable column of the replay mirror: a NumPy array indexed by absolute row.

`learner.mirror.ReplayMirror` keeps every per-game, per-position and per-visit array of the
window as a `Column`, so dropping the oldest games never rewrites an offset.
"""

from __future__ import annotations

import numpy as np

MIN_ROWS = 256  # capacity a column starts with and never shrinks below (a few KB)


class Column:
    """A growable array indexed by absolute row; rows below `lo` have been dropped.

    Row r lives at `data[r - origin]`. Appends go to the tail. When the tail has no room, or the
    dropped prefix outgrows the live rows, the live rows move to the front, into a fresh array
    when the current one is under 2x or over 4x what they need: memory stays within a small
    factor of the live rows, and each row is copied O(1) times on average.
    """

    def __init__(self, dtype: type, width: int | None = None):
        self._shape = () if width is None else (width,)
        self.data = np.empty((MIN_ROWS, *self._shape), dtype)
        self.origin = self.lo = self.hi = 0

    def reset(self, row: int) -> None:
        """Drop everything; the next append starts at `row`."""
        self.data = np.empty((MIN_ROWS, *self._shape), self.data.dtype)
        self.origin = self.lo = self.hi = row

    @property
    def size(self) -> int:
        return self.hi - self.lo

    def view(self) -> np.ndarray:
        """The live rows lo..hi-1 (a view, valid until the next append or drop)."""
        return self.data[self.lo - self.origin : self.hi - self.origin]

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The values of absolute `rows` (all live; not checked here)."""
        return np.take(self.data, rows - self.origin, axis=0)

    def at(self, row: int) -> int:
        return int(self.data[row - self.origin])

    def append(self, values: np.ndarray) -> None:
        n = len(values)
        if self.hi - self.origin + n > len(self.data):
            self._move(self.size + n)
        at = self.hi - self.origin
        self.data[at : at + n] = values
        self.hi += n

    def drop_below(self, row: int) -> None:
        if not self.lo <= row <= self.hi:
            raise ValueError(f"cannot drop below row {row}: live rows are {self.lo}..{self.hi}")
        self.lo = row
        if self.lo - self.origin > self.size:  # the dropped prefix is over half the used rows
            self._move(self.size)

    def _move(self, need: int) -> None:
        """Live rows to the front of an array with room for `need` rows and as many again."""
        live = self.view()
        target = max(MIN_ROWS, 2 * need)
        if target <= len(self.data) <= 2 * target:
            self.data[: len(live)] = live  # NumPy copies overlapping ranges correctly
        else:
            fresh = np.empty((target, *self._shape), self.data.dtype)
            fresh[: len(live)] = live
            self.data = fresh
        self.origin = self.lo
