"""What the evaluator reads from the composed config, checked before any game."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evaluation.ladder.rungs import ladder_player
from evaluation.ladder.table import LadderTable, read_table, table_path, weights_text
from evaluation.matches.gate import GATE_SPRT_KEYS, sprt_from_config
from evaluation.players.alphabeta import minimax_options
from evaluation.players.defaults import play_settings
from game.openings import KINDS as OPENING_KINDS


@dataclass(frozen=True)
class EvalSettings:
    """What the evaluator reads from the composed config (groups evaluation, game, mcts, replay)."""

    namespace: str
    size: int
    max_plies: int
    every_versions: int
    ladder: tuple[str, ...]
    ladder_pairs: int
    rung_pairs: int
    fix_ladder: bool
    openings: str
    extend_openings: int
    seed: int
    poll_s: float
    device: str
    torch_threads: int
    write_pdn: bool
    # Gate candidates against the best (actors play the promoted weights). Off: AlphaZero's
    # scheme, actors play the newest weights and the evaluator only rates candidates.
    gating: bool = True
    mcts: dict[str, Any] = field(default_factory=dict)  # network players' search settings
    gate: dict[str, Any] = field(default_factory=dict)  # the SPRT's settings
    elo: dict[str, Any] = field(default_factory=dict)  # fit_ratings' settings
    player_options: dict[str, Any] = field(default_factory=dict)  # minimax weights, tt_mb, egdb
    egdb: dict[str, Any] = field(default_factory=dict)  # the egdb group (conf/egdb)
    connect_retries: int = 6
    connect_backoff_s: float = 0.5
    # A rated ladder (evaluation.ladder_table): rungs fixed at its ratings, no rung games, and
    # each candidate's games placed next to its estimate (EvaluatorWorker.play_rated).
    ladder_table: str | None = None
    table: LadderTable | None = None
    candidate_games: int = 32  # games per candidate against the rated rungs
    probe_games: int = 4  # of which first against the rung nearest the previous candidate
    neighbour_rungs: int = 1  # then against this many rungs below and above its estimate
    every_min: float = 0.0  # minutes from one rating's start to the next's at the soonest
    early_games: int = 32  # games per candidate published in the run's first early_min minutes
    early_min: float = 0.0
    early_every_min: float = 0.0  # every_min for the versions of the first early_min minutes
    warm_start: bool = False  # learner.init_weights is set: a step-0 network is worth a rating

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> EvalSettings:
        """From a composed config (DictConfig or plain dicts); ValueError naming a bad key."""

        def group(name: str) -> Mapping[str, Any]:
            node = cfg.get(name) if hasattr(cfg, "get") else None
            if node is None:
                raise ValueError(f"config group {name!r} is missing")
            return node

        ev, game, replay = group("evaluation"), group("game"), group("replay")

        def get(key: str) -> Any:
            if key not in ev:
                raise ValueError(f"config key evaluation.{key} is missing")
            return ev[key]

        mcts = dict(group("mcts"))
        mcts.update(
            simulations=int(get("simulations")), leaves_per_game=int(get("leaves_per_game"))
        )
        options = minimax_options(ev.get("baseline"))
        egdb = dict(cfg.get("egdb") or {})
        setting = ev.get("ladder_table")
        path = table_path(setting)
        table = read_table(path) if path is not None and path.is_file() else None
        if path is not None and table is None:
            raise ValueError(
                f"evaluation.ladder_table={setting!r}: no ladder table at {path}; make one with "
                f"`python -m evaluation.rate_ladder --out {path}`, or set "
                "evaluation.ladder_table=null"
            )
        if egdb:  # the database of minimax+db rungs and of adjudication
            options.update(egdb_dir=str(egdb["dir"]), egdb_pieces=int(egdb["pieces"]))
        s = cls(
            namespace=str(replay["namespace"]),
            size=int(game["size"]),
            max_plies=int(game["max_plies"]),
            every_versions=int(get("every_versions")),
            ladder=tuple(str(x) for x in get("ladder")),
            ladder_pairs=int(get("ladder_pairs")),
            rung_pairs=int(get("rung_pairs")),
            fix_ladder=bool(get("fix_ladder")),
            openings=str(get("openings")),
            extend_openings=int(get("extend_openings")),
            seed=int(get("seed")),
            poll_s=float(get("poll_s")),
            device=str(get("device")),
            torch_threads=int(get("torch_threads")),
            write_pdn=bool(get("write_pdn")),
            gating=bool(ev.get("gating", True)),
            mcts=play_settings(mcts),
            gate={k: v for k, v in dict(get("gate")).items() if k in GATE_SPRT_KEYS},
            elo=dict(get("elo")),
            player_options=options,
            egdb=egdb,
            connect_retries=int(replay.get("connect_retries", 6)),
            connect_backoff_s=float(replay.get("connect_backoff_s", 0.5)),
            ladder_table=None if setting is None else str(setting),
            table=table,
            candidate_games=int(ev.get("candidate_games", 32)),
            probe_games=int(ev.get("probe_games", 4)),
            neighbour_rungs=int(ev.get("neighbour_rungs", 1)),
            every_min=float(ev.get("every_min", 0.0)),
            early_games=int(ev.get("early_games", ev.get("candidate_games", 32))),
            early_min=float(ev.get("early_min", 0.0)),
            early_every_min=float(ev.get("early_every_min", ev.get("every_min", 0.0))),
            warm_start=bool((cfg.get("learner") or {}).get("init_weights")),
        )
        s.check(ev, table, setting)
        return s

    def check(self, ev: Mapping[str, Any], table: LadderTable | None, setting: Any) -> None:
        """ValueError naming the first bad value of the ``evaluation`` group ``ev`` (ranges, the
        gate's SPRT settings, the rated ``table`` of ``setting``, the Elo anchor on the ladder)."""
        checks = (
            ("every_versions", self.every_versions >= 1, "must be >= 1"),
            ("simulations", self.mcts["simulations"] >= 1, "must be >= 1"),
            ("ladder_pairs", self.ladder_pairs >= 0, "must be >= 0"),
            ("rung_pairs", self.rung_pairs >= 0, "must be >= 0"),
            ("poll_s", self.poll_s > 0, "must be > 0"),
            ("extend_openings", self.extend_openings >= 0, "must be >= 0"),
            ("torch_threads", self.torch_threads >= 1, "must be >= 1"),
            ("openings", self.openings in OPENING_KINDS, f"must be one of {OPENING_KINDS}"),
            (
                "candidate_games",
                self.candidate_games >= 2 and self.candidate_games % 2 == 0,
                "must be an even number >= 2 (colour-reversed pairs)",
            ),
            (
                "probe_games",
                0 <= self.probe_games <= self.candidate_games and self.probe_games % 2 == 0,
                "must be even, >= 0 and at most candidate_games",
            ),
            ("neighbour_rungs", self.neighbour_rungs >= 1, "must be >= 1"),
            ("every_min", self.every_min >= 0, "must be >= 0"),
            (
                "early_games",
                self.early_games >= 2 and self.early_games % 2 == 0,
                "must be an even number >= 2 (colour-reversed pairs)",
            ),
            ("early_min", self.early_min >= 0, "must be >= 0"),
            ("early_every_min", self.early_every_min >= 0, "must be >= 0"),
        )
        for key, ok, why in checks:
            if not ok:
                raise ValueError(f"bad config value evaluation.{key}={ev.get(key)!r}: {why}")
        sprt_from_config(self.gate)  # validates the gate's settings now
        if table is not None:
            self.check_table(table, setting)
        anchor = str(self.elo.get("anchor_player", "random"))
        if self.ladder and anchor not in {
            ladder_player(x, **self.player_options).name for x in self.ladder
        }:
            raise ValueError(
                f"evaluation.ladder {list(self.ladder)} must include the Elo anchor "
                f"evaluation.elo.anchor_player={anchor!r}, or no rating is tied to it"
            )

    def check_table(self, table: LadderTable, setting: Any) -> None:
        """A table fits this config: every ladder rung rated in it, the same minimax weights,
        the 8x8 board; ValueError naming the mismatch."""
        where = f"evaluation.ladder_table={setting!r}"
        if self.size != 8:
            raise ValueError(f"{where}: the rated ladder is for 8x8; game.size is {self.size}")
        names = [ladder_player(x, **self.player_options).name for x in self.ladder]
        missing = [n for n in names if n not in table]
        if missing:
            raise ValueError(
                f"{where}: evaluation.ladder rungs {missing} are not in the table (it rates "
                f"{[r.player for r in table.rows]}); to rate other rungs in-run, use "
                "evaluation=default"
            )
        ours = weights_text(self.player_options.get("weights"))
        if table.meta.get("weights", ours) != ours:
            raise ValueError(
                f"{where}: the table was rated with minimax weights {table.meta['weights']}, "
                f"but evaluation.baseline.weights are {ours}; rate the ladder again"
            )
