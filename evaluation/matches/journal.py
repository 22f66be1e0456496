"""A match's journal: every finished game pair, one JSON line each, so that an interrupted match
(a long timed one, a machine that goes away) goes on where it stopped instead of from the start.

The first line says which match the journal belongs to (the players, the number of games, the
deck, the seed, the settings that change the games); a journal of another match is refused,
never mixed in. A last line cut short by a kill mid-write is dropped (that pair is played again);
any other line that is not a game pair is an error naming the line. Plain JSON: nothing is
unpickled.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evaluation.matches.records import PairRecord

logger = logging.getLogger(__name__)

KIND = "checkerzero match journal"
VERSION = 1


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
        if not self.path.exists() or self.path.stat().st_size == 0:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._rewrite([])
            return []
        text = self.path.read_text(encoding="utf-8")
        lines = text.split("\n")
        complete = text.endswith("\n")
        if complete:
            lines.pop()  # the empty string after the last newline
        where = f"match journal {self.path}"
        try:
            header = json.loads(lines[0])
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}, line 1: not a journal header ({e})") from None
        if not isinstance(header, dict) or header.get("kind") != KIND:
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
                pairs.append(PairRecord.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError) as e:
                if last and not complete:  # cut short by a kill mid-write: play it again
                    logger.warning("%s: dropped its last line, cut short (%s)", where, e)
                    self._rewrite(pairs)
                    break
                raise ValueError(f"{where}, line {number}: not a game pair ({e})") from None
        else:
            if not complete:  # a whole last line without its newline: finish it
                with self.path.open("a", encoding="utf-8") as f:
                    f.write("\n")
        return pairs

    def add(self, pair: PairRecord) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(pair.to_dict(), allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _rewrite(self, pairs: Sequence[PairRecord]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        lines = [self.header, *(p.to_dict() for p in pairs)]
        tmp.write_text("".join(json.dumps(d, allow_nan=False) + "\n" for d in lines), "utf-8")
        os.replace(tmp, self.path)
