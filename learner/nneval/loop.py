"""`python -m learner preset=nneval`: the fast player's evaluation trained in generations.

Each generation ``g``:

1. self-play: the alpha-beta actors (``actors.ab_pool``, one per core on every node) play
   ``ab+nn`` with the best evaluation so far until ``nneval.positions`` new labelled positions
   are stored; they stream through Redis (``checkerzero.store.positions``, deduplicated
   run-wide) into ``<data_dir>/gen-<g>/`` Parquet shards (``learner.nneval.shards``);
2. training: a quantisation-aware model on the last ``train.window`` generations' shards
   (``learner.nneval.fit``), warm-started from the best, quantised and written as a checked
   evaluation file whose metadata names the run, generation and parent;
3. gate: the candidate against the best (``learner.nneval.gating``); promoted on accept; then
   the check from unseen openings and a rating on the rated ladder (``learner.nneval.rating``);
4. record: ``<lineage_dir>/gen-<g>.{json,safetensors}`` (``learner.nneval.lineage``), the
   loss and Elo curves (CSV and PNG in the run folder, W&B).

Resume: a generation without a record is resumed: its shards on disk are kept, its Redis
backlog drained, a shard written but not yet trimmed counted once (``shards.recover``); a
generation whose shards are gone (another machine) is played again from its recorded seed and
parent; a recorded generation without a ladder rating (rated before there was one, or with
``ladder.pairs`` 0) is rated first. This process is the `learner.run.Run` of the MCTS loop with
another training body: the same Redis, Ray, preflight and signal handling.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from actors.ab_pool import ABActorPool
from checkerzero.metrics import MetricsLogger
from checkerzero.store.positions import PositionStream
from evaluation.ladder.table import NAMED_TABLES, LadderTable, read_table, table_path
from game import nneval
from learner.nneval.fit import FitSettings, fit
from learner.nneval.gating import check_generation, gate_generation, unseen_openings
from learner.nneval.lineage import Lineage, sha256, weights_digest
from learner.nneval.model import NNEvalModel
from learner.nneval.rating import ladder_estimate, rate_on_ladder
from learner.nneval.shards import (
    add_selfplay_seconds,
    bytes_per_position,
    claim_folder,
    count_rows,
    drain,
    generation_dir,
    iter_rows,
    recover,
    selfplay_seconds,
    shard_files,
)
from learner.run import Run
from learner.run_services import ensure_egdb

logger = logging.getLogger(__name__)

PROGRESS_S = 60.0  # seconds between the self-play phase's progress lines
LOSS_CSV = "nneval_loss.csv"  # one row per epoch of every generation's training
ELO_CSV = "nneval_elo.csv"  # one row per generation: positions, gate, chained Elo
ELO_PNG = "nneval_elo.png"  # the best's chained Elo against generation ...
ELO_POSITIONS_PNG = "nneval_elo_positions.png"  # ... and against millions of positions
LOSS_PNG = "nneval_loss.png"
LADDER_CSV = "nneval_ladder.csv"  # one row per rated generation: its rating on the ladder's scale
LADDER_PNG = "nneval_ladder.png"  # ... against millions of positions, the rungs beside it
POLL_S = 0.2  # how often the self-play phase checks the store and the pool


def initial_file(cfg: DictConfig) -> Callable[[Path], None]:
    """Writes generation 0's parent: the shipped file (8x8) or a seeded random network."""
    nc = cfg.nneval

    def make(path: Path) -> None:
        size = int(cfg.game.size)
        if nc.initial == "shipped":
            if size != 8:
                raise ValueError("nneval.initial=shipped needs an 8x8 board; use random")
            path.write_bytes(nneval.DEFAULT_PATH.read_bytes())
            return
        torch.manual_seed(int(cfg.seed))
        t = nc.train
        model = NNEvalModel(size, int(t.hidden), int(t.dense1), int(t.dense2))
        model.clip_to_format()
        net = nneval.quantise(
            model.float_weights(),
            size=size,
            output_scale=int(t.output_scale),
            metadata={"trained_on": f"nothing: random, seed {int(cfg.seed)}"},
        )
        nneval.save(net, path)

    return make


def generation_seed(cfg: DictConfig, g: int) -> int:
    return int(cfg.seed) * 1_000 + g


def generation_target(cfg: DictConfig, lineage: Lineage, g: int) -> int:
    """The positions generation ``g`` stores: what its record says it stored when it has one
    (played again on another disk, it stops where it stopped), else ``nneval.positions``."""
    records = lineage.records()
    if g < len(records):
        return int(records[g]["positions"])
    return int(cfg.nneval.positions)


def open_generation(
    stream: PositionStream, folder: Path, g: int, target: int, version: int
) -> None:
    """Opens generation ``g`` in the store after trimming what a killed learner had already
    written; a store that does not know it yet starts its counters from the shards on disk
    (their positions, and game numbers after theirs, so no game is played twice)."""
    recover(stream, folder)
    paths = shard_files(folder)
    next_game = 0
    for rows in iter_rows(paths):
        if len(rows):
            next_game = max(next_game, int(rows["game"].max()) + 1)
    stream.begin(g, target, version, on_disk=count_rows(paths), next_game=next_game)


class SelfPlayProgress:
    """A line every ``every_s`` while a generation's self-play runs: positions kept of the
    target, their rate since the last line, games, duplicates dropped and the ETA."""

    def __init__(self, g: int, target: int, start: Any, every_s: float = PROGRESS_S) -> None:
        self.g, self.target, self.every_s = g, target, every_s
        self.t = time.monotonic()
        self.positions, self.games, self.duplicates = start.positions, start.games, start.duplicates

    def report(self, state: Any) -> None:
        now = time.monotonic()
        if now - self.t < self.every_s:
            return
        rate = (state.positions - self.positions) / (now - self.t)
        games = (state.games - self.games) / (now - self.t)
        new = state.positions - self.positions
        dup = state.duplicates - self.duplicates
        left = max(self.target - state.positions, 0)
        eta = time.strftime("%H:%M:%S", time.gmtime(left / rate)) if rate > 0 else "?"
        logger.info(
            "generation %d self-play: %s/%s positions (%.1f%%), %s positions/s, %.1f games/s, "
            "%.1f%% duplicates dropped, ETA %s",
            self.g,
            f"{state.positions:,}",
            f"{self.target:,}",
            100.0 * state.positions / max(self.target, 1),
            f"{rate:,.0f}",
            games,
            100.0 * dup / max(dup + new, 1),
            eta,
        )
        self.t, self.positions = now, state.positions
        self.games, self.duplicates = state.games, state.duplicates


def selfplay_phase(
    stream: PositionStream,
    folder: Path,
    g: int,
    target: int,
    version: int,
    *,
    shard_items: int,
    tick: Callable[[], None] = lambda: None,
    stop: threading.Event | None = None,
) -> int:
    """Runs generation ``g``'s self-play until ``target`` positions are on disk (or ``stop``);
    returns the positions on disk. The actors (started by the caller; ``tick`` keeps them
    going) play while the generation is open."""
    stop = stop or threading.Event()
    open_generation(stream, folder, g, target, version)
    progress = SelfPlayProgress(g, target, stream.state())
    while not stop.is_set():
        tick()
        state = stream.state()
        progress.report(state)
        if stream.backlog() >= shard_items:
            drain(stream, folder, shard_items)
        if state.positions >= target:
            break
        stop.wait(POLL_S)
    stream.close()
    while stream.backlog():
        drain(stream, folder, shard_items)
    return count_rows(shard_files(folder))


class NNEvalRun(Run):
    """The generations loop inside the MCTS run's services (Redis, Ray, preflight)."""

    def _train(self, url, password, store, channel, client) -> dict[str, Any]:
        cfg, nc = self.cfg, self.cfg.nneval
        size = int(cfg.game.size)
        lineage = Lineage(nc.lineage_dir)
        lineage.ensure_initial(initial_file(cfg))
        stream = PositionStream(
            client,
            cfg.replay.namespace,
            bits_log2=int(nc.dedup.bits_log2),
            probes=int(nc.dedup.probes),
        )
        logger.info("deduplication filter: %.1f MiB in Redis", stream.filter_bytes / (1 << 20))
        self._rebuild_filter(stream, lineage)
        metrics = MetricsLogger(
            self.run_dir,
            wandb_cfg=cfg.logging.wandb,
            run_name=self.run_dir.name,
            config=OmegaConf.to_container(cfg, resolve=True),
        )
        if nc.selfplay.egdb:
            ensure_egdb(OmegaConf.merge(cfg, {"egdb": {"adjudicate_selfplay": True}}))
        # The actors live only while a generation plays: training and the gate get the cores.
        self._new_pool = lambda: ABActorPool(cfg, url, password, client)
        summary: dict[str, Any] = {"generations": []}
        try:
            self._rate_unrated(lineage, size)
            first = lineage.next_generation()
            for g in range(first, int(nc.generations)):
                if self._stop.is_set():
                    break
                rec = self._generation(g, lineage, stream, metrics, size)
                if rec is None:
                    break
                summary["generations"].append(rec)
        except KeyboardInterrupt:
            logger.info("interrupted")
        finally:
            metrics.close()
        return summary

    def _ladder_table(self, size: int) -> LadderTable | None:
        """The rated table generations are rated on; None when ``ladder.pairs`` is 0 or the
        board has no table (the shipped ones rate 8x8 players)."""
        ladder = self.cfg.nneval.ladder
        path = table_path(ladder.table)
        if int(ladder.pairs) <= 0 or path is None or (path in NAMED_TABLES.values() and size != 8):
            return None
        return read_table(path)

    def _rate(self, candidate: bytes, lineage: Lineage, g: int, size: int) -> dict[str, Any] | None:
        table = self._ladder_table(size)
        if table is None:
            return None
        nc = self.cfg.nneval
        estimate = ladder_estimate(lineage.records()[:g], table)
        return rate_on_ladder(
            candidate, nc.gate, int(nc.ladder.pairs), table, self.cfg.evaluation.elo, estimate, size
        )

    def _rate_unrated(self, lineage: Lineage, size: int) -> None:
        """Recorded generations without a ladder rating get one (their records rewritten)."""
        for rec in lineage.records():
            if rec.get("ladder") or self._stop.is_set() or self._ladder_table(size) is None:
                continue
            g = int(rec["generation"])
            candidate = lineage.candidate_path(g).read_bytes()
            logger.info("generation %d has no ladder rating: rating it", g)
            rec["ladder"] = self._rate(candidate, lineage, g, size)
            lineage.write(g, rec, candidate)
        self._write_ladder_curve(lineage)

    def _rebuild_filter(self, stream: PositionStream, lineage: Lineage) -> None:
        """A store without the filter (a fresh Redis) learns the positions already on disk."""
        if stream.has_filter():
            return
        n = 0
        for g in range(lineage.next_generation() + 1):
            for rows in iter_rows(shard_files(generation_dir(self.cfg.nneval.data_dir, g))):
                stream.remember(rows)
                n += len(rows)
        if n:
            logger.info("deduplication filter rebuilt from %d positions on disk", n)

    def _data(self, g: int, lineage: Lineage, stream: PositionStream) -> tuple[Path, int, float]:
        """Generation ``g``'s shards, played now if missing or short (resume, another disk), and
        the seconds of self-play this sitting spent on them."""
        nc = self.cfg.nneval
        parent = lineage.best_before(g)
        parent_bytes = parent.read_bytes()
        folder = generation_dir(nc.data_dir, g)
        seed = generation_seed(self.cfg, g)
        claim_folder(
            folder,
            {
                "generation": g,
                "seed": seed,
                "parent_sha256": weights_digest(parent),
                "parent_file": parent.name,
                "selfplay": OmegaConf.to_container(nc.selfplay, resolve=True),
            },
        )
        target = generation_target(self.cfg, lineage, g)
        have = count_rows(shard_files(folder))
        if have >= target:
            return folder, have, 0.0
        version = g  # the evaluation version actors fetch for this generation
        stream.publish_eval(version, parent_bytes)
        # Actors seed their games from (run seed, generation, game number): the generation's
        # seed is the run seed's; record it so a later session plays the same games.
        started = time.monotonic()
        pool = self._new_pool()
        try:
            pool.start()
            n = selfplay_phase(
                stream,
                folder,
                g,
                target,
                version,
                shard_items=int(nc.shard_games),
                tick=pool.check,
                stop=self._stop,
            )
        finally:
            pool.stop(30.0)
        played_s = time.monotonic() - started
        total_s = add_selfplay_seconds(folder, played_s)
        logger.info(
            "generation %d: %d positions on disk in %.0f s of self-play (%.0f s this sitting; "
            "%.1f bytes each)",
            g,
            n,
            total_s,
            played_s,
            bytes_per_position(shard_files(folder)),
        )
        return folder, n, played_s

    def _generation(
        self,
        g: int,
        lineage: Lineage,
        stream: PositionStream,
        metrics: MetricsLogger,
        size: int,
    ) -> dict[str, Any] | None:
        cfg, nc = self.cfg, self.cfg.nneval
        started = time.monotonic()
        folder, positions, played_s = self._data(g, lineage, stream)
        if self._stop.is_set() or positions < int(nc.positions):
            return None
        window = [
            generation_dir(nc.data_dir, h)
            for h in range(max(0, g - int(nc.train.window) + 1), g + 1)
        ]
        for h, wfolder in zip(range(max(0, g - int(nc.train.window) + 1), g), window, strict=False):
            if count_rows(shard_files(wfolder)) < generation_target(cfg, lineage, h):
                self._data(h, lineage, stream)  # lost with another machine: played again
        paths = [p for f in window for p in shard_files(f)]
        parent_path = lineage.best_before(g)
        parent = nneval.load(parent_path)
        settings = FitSettings.from_config(nc.train, seed=generation_seed(cfg, g))
        torch.set_num_threads(int(nc.train.threads))
        model, history = fit(paths, settings, size, parent)
        self._log_loss(g, history, metrics)
        meta = {
            "trained_on": f"generation {g}: {count_rows(paths)} self-play positions",
            "run": self.run_dir.name,
            "generation": str(g),
            "parent_sha256": weights_digest(parent_path),
            "held_out_loss": f"{history[-1]['val_loss']:.4f}",
        }
        net = nneval.quantise(
            model.float_weights(), size=size, output_scale=settings.output_scale, metadata=meta
        )
        cand_path = self.run_dir / "nneval" / f"gen-{g:03d}.safetensors"
        nneval.save(net, cand_path)
        candidate = cand_path.read_bytes()
        nneval.load(cand_path)  # the checked artefact, as the actors and players will read it
        decision, stats = gate_generation(
            candidate,
            parent_path.read_bytes(),
            nc.gate,
            size,
            generation_seed(cfg, g),
            pdn=lineage.gate_pdn_path(g),
        )
        promoted = decision.decision == "accept"
        check = None
        if int(nc.check.pairs) > 0:
            openings = unseen_openings(
                stream.stored,
                size,
                count=int(nc.check.pairs),
                plies=int(nc.check.plies),
                seed=generation_seed(cfg, g),
            )
            check = check_generation(candidate, parent_path.read_bytes(), openings, nc.check, size)
        ladder = self._rate(candidate, lineage, g, size)
        best_elo = lineage.best_elo_before(g) + (stats["elo"] if promoted else 0.0)
        total = lineage.positions_before(g) + positions
        record = {
            "generation": g,
            "seed": generation_seed(cfg, g),
            "parent_file": parent_path.name,
            "parent_sha256": meta["parent_sha256"],
            "candidate_sha256": sha256(candidate),
            "positions": positions,
            "positions_total": total,
            "bytes_per_position": round(bytes_per_position(shard_files(folder)), 2),
            # Self-play over every sitting, and this sitting's training, gate and rating.
            "selfplay_s": selfplay_seconds(folder),
            "wall_s": round(selfplay_seconds(folder) + time.monotonic() - started - played_s, 1),
            "val_loss": history[-1]["val_loss"],
            "gate": {
                "decision": decision.decision,
                "wins": decision.wins,
                "draws": decision.draws,
                "losses": decision.losses,
                "llr": decision.llr,
                "truncated": decision.truncated,
            }
            | stats,
            "promoted": promoted,
            "check": check,
            "ladder": ladder,
            "best_elo": best_elo,
            "settings": {
                k: OmegaConf.to_container(nc[k], resolve=True)
                for k in ("selfplay", "train", "gate", "check", "ladder")
            }
            | {"positions": int(nc.positions)},
            "run": self.run_dir.name,
        }
        lineage.write(g, record, candidate)
        self._log_elo(record, metrics)
        self._write_ladder_curve(lineage)
        logger.info(
            "generation %d: %s (Elo %+.0f [%+.0f, %+.0f]); best now %+.0f",
            g,
            "promoted" if promoted else "rejected",
            stats["elo"],
            stats["elo_lower"],
            stats["elo_upper"],
            best_elo,
        )
        return record

    def _log_loss(self, g: int, history: list[dict[str, float]], metrics: MetricsLogger) -> None:
        path = self.run_dir / LOSS_CSV
        new = not path.exists()
        with path.open("a") as f:
            if new:
                f.write("generation,epoch,step,lambda,train_loss,val_loss,val_loss_constant\n")
            for h in history:
                f.write(
                    f"{g},{int(h['epoch'])},{int(h['step'])},{h['lambda']:.4f},"
                    f"{h['train_loss']:.5f},{h['val_loss']:.5f},{h['val_loss_constant']:.5f}\n"
                )
                metrics.log(
                    {
                        "nneval/train_loss": h["train_loss"],
                        "nneval/val_loss": h["val_loss"],
                        "nneval/lambda": h["lambda"],
                    },
                    g * 1000 + int(h["epoch"]),
                )
        _plot(path, self.run_dir / LOSS_PNG, "train_loss", "val_loss", "epoch (all generations)")

    def _log_elo(self, rec: dict[str, Any], metrics: MetricsLogger) -> None:
        path = self.run_dir / ELO_CSV
        new = not path.exists()
        with path.open("a") as f:
            if new:
                f.write("generation,positions_millions,best_elo,gate_elo,lower,upper,promoted\n")
            gate = rec["gate"]
            f.write(
                f"{rec['generation']},{rec['positions_total'] / 1e6:.4f},{rec['best_elo']:.1f},"
                f"{gate['elo']:.1f},{gate['elo_lower']:.1f},{gate['elo_upper']:.1f},"
                f"{int(rec['promoted'])}\n"
            )
        ladder = {"eval/ladder_elo": rec["ladder"]["elo"]} if rec.get("ladder") else {}
        metrics.log(
            ladder
            | {
                "eval/elo": rec["best_elo"],
                "eval/generation": float(rec["generation"]),
                "eval/positions_millions": rec["positions_total"] / 1e6,
            },
            int(rec["generation"]),
        )
        _plot(path, self.run_dir / ELO_PNG, "best_elo", None, "generation")
        _plot(path, self.run_dir / ELO_POSITIONS_PNG, "best_elo", None, "positions_millions")

    def _write_ladder_curve(self, lineage: Lineage) -> None:
        write_ladder_curve(lineage.records(), (self.run_dir, lineage.folder))


def write_ladder_curve(records: list[dict[str, Any]], folders: Any) -> None:
    """``nneval_ladder.csv`` and ``.png`` in each of ``folders``, from every rated record: each
    candidate's rating on the ladder's scale, with its interval, against millions of positions
    stored (promoted candidates filled)."""
    rated = [r for r in records if r.get("ladder")]
    if not rated:
        return
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["generation", "positions_millions", "ladder_elo", "lower", "upper", "promoted", "settings"]
    )
    for r in rated:
        lad = r["ladder"]
        writer.writerow(
            [
                r["generation"],
                f"{r['positions_total'] / 1e6:.4f}",
                f"{lad['elo']:.1f}",
                f"{lad['lower']:.1f}",
                f"{lad['upper']:.1f}",
                int(r["promoted"]),
                lad.get("settings", ""),
            ]
        )
    for folder in folders:
        (Path(folder) / LADDER_CSV).write_text(out.getvalue())
        _plot_ladder(rated, Path(folder) / LADDER_PNG)


def _plot_ladder(records: list[dict[str, Any]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for promoted, marker in ((True, "o"), (False, "x")):
        rs = [r for r in records if bool(r["promoted"]) == promoted]
        if not rs:
            continue
        x = [r["positions_total"] / 1e6 for r in rs]
        y = [r["ladder"]["elo"] for r in rs]
        err = [
            [r["ladder"]["elo"] - r["ladder"]["lower"] for r in rs],
            [r["ladder"]["upper"] - r["ladder"]["elo"] for r in rs],
        ]
        label = "promoted" if promoted else "not promoted"
        ax.errorbar(x, y, yerr=err, fmt=marker, capsize=3, label=label)
    rungs = {k: v["rating"] for r in records for k, v in r["ladder"]["rungs"].items()}
    for name, elo in rungs.items():
        ax.axhline(elo, color="grey", lw=0.6, ls="--")
        label = name.split(":game/")[0]  # the rung's spec without its file's folder
        ax.annotate(label, (0.01, elo), xycoords=("axes fraction", "data"), fontsize=7, va="bottom")
    ax.set_xlabel("millions of positions stored")
    ax.set_ylabel("rating on the ladder's scale")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def _plot(csv_path: Path, png: Path, y1: str, y2: str | None, xlabel: str) -> None:
    """A PNG of one or two columns of a CSV against the column ``xlabel`` (else the row
    number), with matplotlib and no display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = np.genfromtxt(csv_path, delimiter=",", names=True, ndmin=1)
    x = data[xlabel] if xlabel in (data.dtype.names or ()) else np.arange(len(data))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(x, data[y1], marker="o", label=y1)
    if y2:
        ax.plot(x, data[y2], marker="o", label=y2)
    ax.set_xlabel(xlabel)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def run_generations(cfg: DictConfig) -> dict[str, Any]:
    """The body of `python -m learner preset=nneval` (learner.run dispatches here)."""
    summary = NNEvalRun(cfg).main()
    (Path(cfg.run_dir) / "nneval_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary
