"""What the evaluator's parts share: its settings, its Redis records, the weights channel, its
files in the run directory, the openings, the endgame database and the stop flag.

:class:`EvalContext` is built once by the worker (evaluation.evaluator.worker) and handed to each
part (the candidates, the gate, the ladder, the ratings), which reads it and keeps its own state;
no part reaches into another's.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkerzero.run_files import DECISIONS_FILE, EVAL_DIR
from checkerzero.store.weights import WeightsChannel
from evaluation.evaluator.records import EvalState
from evaluation.evaluator.settings import EvalSettings
from evaluation.matches.records import MatchResult
from game.egdb.build import database_from_config
from game.openings import Opening, extend_openings, load_openings
from game.pdn import write_pdn


@dataclass(frozen=True)
class EvalFiles:
    """The evaluator's files under ``<run_dir>/EVAL_DIR``; nothing is written when ``enabled``
    is false (``evaluation.write_pdn``)."""

    folder: Path
    enabled: bool

    def ready(self) -> bool:
        """Whether files are written; makes the folder when they are."""
        if self.enabled:
            self.folder.mkdir(parents=True, exist_ok=True)
        return self.enabled

    def write_games(self, name: str, games: MatchResult, mode: str = "a") -> None:
        if self.ready():
            with (self.folder / name).open(mode) as f:
                f.write(write_pdn(games.pdn_games()))

    def append_decision(self, line: str) -> None:
        if self.ready():
            with (self.folder / DECISIONS_FILE).open("a") as f:
                f.write(line + "\n")


@dataclass
class EvalContext:
    settings: EvalSettings
    client: Any
    channel: WeightsChannel
    state: EvalState
    files: EvalFiles
    openings: Sequence[Opening]
    gate_openings: Sequence[Opening]  # the deck, extended where the gate needs more openings
    egdb: Any  # the endgame database that adjudicates games, or None
    stop_flag: threading.Event = field(default_factory=threading.Event)

    @property
    def ns(self) -> str:
        return self.settings.namespace

    def stopping(self) -> bool:
        return self.stop_flag.is_set()

    @classmethod
    def create(cls, settings: EvalSettings, client: Any, run_dir: str | Path) -> EvalContext:
        openings = load_openings(settings.openings, settings.size, seed=settings.seed)
        extra = (
            extend_openings(openings, settings.extend_openings, seed=settings.seed)
            if settings.extend_openings
            else []
        )
        # Matches end as soon as a game reaches the endgame database (built first if missing).
        egdb = (
            database_from_config(settings.egdb, settings.size)
            if settings.egdb.get("adjudicate_matches", False)
            else None
        )
        return cls(
            settings=settings,
            client=client,
            channel=WeightsChannel(client, namespace=settings.namespace),
            state=EvalState(client, settings.namespace),
            files=EvalFiles(Path(run_dir) / EVAL_DIR, settings.write_pdn),
            openings=openings,
            gate_openings=openings + extra,
            egdb=egdb,
        )
