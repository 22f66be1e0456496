"""The run's self-play games as PDN (``games/selfplay.pdn``): the newest games not written
yet, each once, appended as the run goes, its record id as the ``Round`` tag."""

from __future__ import annotations

import logging
import re
import socket
import time
from collections.abc import Sequence
from pathlib import Path

from checkerzero.run_files import SELFPLAY_PDN
from checkerzero.store.replay import ReplayStore
from game.openings import Opening
from game.pdn import write_pdn
from game.record_pdn import record_to_pdn
from game.records import GameRecord

logger = logging.getLogger(__name__)

GAME_ID_TAG = re.compile(r'^\[Round "(\d+)"\]', re.MULTILINE)  # a game's record id in the file


class SelfPlayPdn:
    """Appends games from the replay store to the run's PDN file, at most ``count`` a call
    (``logging.pdn_sample_games``; 0: none), starting each from its opening's moves."""

    def __init__(self, run_dir: Path, deck: Sequence[Opening], count: int) -> None:
        self.run_dir = run_dir
        self.path = run_dir / SELFPLAY_PDN
        self.deck = deck
        self.count = count
        self.written: int | None = None  # newest record id in the file (read lazily)

    def append_new(self, store: ReplayStore) -> int:
        """Appends the newest games not written yet (at most ``count``); returns how many."""
        count = self.count
        if count <= 0:
            return 0
        path = self.path
        if self.written is None:  # a resumed run goes on after the games it wrote
            text = path.read_text(errors="replace") if path.is_file() else ""
            self.written = max((int(x) for x in GAME_ID_TAG.findall(text)), default=0)
        newest = store.stats().games_added
        first = max(self.written + 1, newest - count + 1, 1)
        tags = {
            "Event": f"checkerzero self-play ({self.run_dir.name})",
            "Site": socket.gethostname(),
            "Date": time.strftime("%Y.%m.%d"),
        }
        games = []
        for game_id in range(first, newest + 1):
            data = store.get(game_id)
            if data is None:
                continue  # already out of the replay window
            try:
                record = GameRecord.from_bytes(data)
                games.append(
                    record_to_pdn(record, openings=self.deck, tags=tags | {"Round": str(game_id)})
                )
            except ValueError as e:  # a malformed record: counted by the mirror; the file skips it
                logger.debug("PDN file skips game %d: %s", game_id, e)
        self.written = max(self.written, newest)
        if games:
            path.parent.mkdir(exist_ok=True)
            with path.open("a") as f:
                if f.tell() > 0:
                    f.write("\n")
                f.write(write_pdn(games))
        return len(games)
