"""A match's journal: every finished game pair, one JSON line each, so that an interrupted match
(a long timed one, a machine that goes away) goes on where it stopped instead of from the start.

The first line says which match the journal belongs to (the players, the number of games, the
deck, the seed, the settings that change the games); a journal of another match is refused,
never mixed in. A last line cut short by a kill mid-write is dropped (that pair is played again);
any other line that is not a game pair is an error naming the line. Plain JSON: nothing is
unpickled.

A journal is a regular file or absent: a link, a FIFO or a device (``/dev/null``) in its place is
refused by name, never opened for writing nor replaced, and so is a file that is not a journal.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evaluation.matches.records import PairRecord
from game.files import open_regular_fd, regular_or_absent
from game.json_header import parse_object

logger = logging.getLogger(__name__)

KIND = "checkerzero match journal"
VERSION = 1
# A 312-game match's journal is about 0.7 MB: this is far past any real one, and bounds what
# reading a wrong file costs.
MAX_JOURNAL_BYTES = 256 << 20


class MatchJournal:
    """Appends each finished pair of the match ``header`` describes to ``path``.

    ``open`` reads the pairs already there (or starts the file); ``add`` appends one pair and
    flushes it to disk before returning.
    """

    def __init__(self, path: Path, header: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.header = {"kind": KIND, "version": VERSION} | dict(header)

    def open(self) -> list[PairRecord]:
        """The pairs the journal holds; a new journal is started with its header line."""
        where = f"match journal {self.path}"
        st = regular_or_absent(self.path, where)
        if st is None or st.st_size == 0:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._rewrite([])
            return []
        if st.st_size > MAX_JOURNAL_BYTES:
            raise ValueError(f"{where}: {st.st_size:,} bytes, not a journal (a journal is smaller)")
        with os.fdopen(open_regular_fd(self.path, os.O_RDONLY, where), "rb") as f:
            data = f.read(MAX_JOURNAL_BYTES + 1)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{where}: not text (byte {e.start}), not a journal") from None
        lines = text.split("\n")
        complete = text.endswith("\n")
        if complete:
            lines.pop()  # the empty string after the last newline
        try:
            header = parse_object(lines[0], "its JSON")
        except ValueError as e:
            raise ValueError(f"{where}, line 1: not a journal header ({e})") from None
        if header.get("kind") != KIND:
            raise ValueError(f"{where}, line 1: not a checkerzero match journal")
        if header != self.header:
            differ = sorted(
                k for k in header.keys() | self.header.keys() if header.get(k) != self.header.get(k)
            )
            said = ", ".join(
                f"{k}: {header.get(k)!r} there, {self.header.get(k)!r} here" for k in differ
            )
            raise ValueError(
                f"{where} is the journal of another match ({said}); remove it or name "
                "another journal"
            )
        pairs: list[PairRecord] = []
        for number, line in enumerate(lines[1:], start=2):
            last = number == len(lines)
            try:
                pairs.append(PairRecord.from_dict(parse_object(line, "its JSON")))
            except (ValueError, KeyError, TypeError) as e:
                if last and not complete:  # cut short by a kill mid-write: play it again
                    logger.warning("%s: dropped its last line, cut short (%s)", where, e)
                    self._rewrite(pairs)
                    break
                raise ValueError(f"{where}, line {number}: not a game pair ({e})") from None
        else:
            if not complete:  # a whole last line without its newline: finish it
                self._append("\n")
        return pairs

    def add(self, pair: PairRecord) -> None:
        self._append(json.dumps(pair.to_dict(), allow_nan=False) + "\n")

    def _append(self, text: str) -> None:
        fd = open_regular_fd(self.path, os.O_WRONLY | os.O_APPEND, f"match journal {self.path}")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    def _rewrite(self, pairs: Sequence[PairRecord]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        where = f"match journal {self.path}"
        regular_or_absent(self.path, where)  # never replace a device, FIFO or link
        regular_or_absent(tmp, f"{where}: its temporary file {tmp}")
        lines = [self.header, *(p.to_dict() for p in pairs)]
        fd = open_regular_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, f"{where}: {tmp}")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(d, allow_nan=False) + "\n" for d in lines))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
