"""Metrics: one logger for the terminal, a CSV file, PNG plots and Weights & Biases.

Keys are namespaced (``selfplay/positions_per_s``, ``learner/loss_policy``, ``eval/elo``). The
CSV is in long form (``time_s, step, key, value``) so new keys never rewrite old rows and a
resumed run appends to the same file. Plots are redrawn from the CSV, so they always show the
whole run, resumes included.

W&B (offline unless configured): every row carries ``learner/step``, the step metric that
``define_metric`` sets for every key, so charts share one x axis across resumes;
``learner/wall_s`` (the seconds the run has run, its resumes summed, as the learner's rows give
it; else seconds since this logger started) and ``replay/positions_added`` are the alternatives
a chart can pick. A new evaluation is logged once, on its own row, at the step of
the candidate's weights (``eval/step``), with ``eval/wall_s`` and ``eval/positions`` beside it.
:meth:`MetricsLogger.log_model` stores networks as model artifacts (aliases ``latest``, ``best``,
``weights-v<N>``) and :meth:`MetricsLogger.log_table` a CSV as a ``wandb.Table``.
"""

from __future__ import annotations

import csv
import logging
import math
import os
import sys
import time
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from checkerzero import metric_names as M
from checkerzero.run_files import (
    ELO_BY_STEP_PNG,
    LOSS_PNG,
    METRICS_CSV,
    REPLAY_PNG,
    THROUGHPUT_PNG,
)
from checkerzero.store.replay import redact_url
from game.files import open_regular_text

logger = logging.getLogger(__name__)

STEP_METRIC = M.STEP  # W&B's x axis for every chart (define_metric)
WALL_METRIC = M.WALL_S  # an alternative x axis: the run's seconds, resumes summed
EVAL_PREFIX = M.EVAL_PREFIX
EVAL_STEP = M.EVAL_STEP  # the training step of the evaluated candidate's weights
# Plots drawn into the run directory: file name -> the metric keys it shows. Every name is
# distinct from the evaluator's own plots under eval/ (checkerzero.run_files).
ELO_PLOT = ELO_BY_STEP_PNG  # each rating once, at its weights' training step
PLOTS = {
    LOSS_PNG: (
        M.LOSS_POLICY,
        M.LOSS_VALUE,
        M.LOSS_TOTAL,
        M.LOSS_MOVES_LEFT,  # only with the moves-left head
    ),
    ELO_PLOT: (M.EVAL_ELO,),
    THROUGHPUT_PNG: (M.SELFPLAY_POSITIONS_PER_S, M.SAMPLES_PER_S),
    REPLAY_PNG: (M.REPLAY_WINDOW_POSITIONS, M.REPLAY_POSITIONS_ADDED),
}
# Each plot's axes: (x axis, y label); x is "step" (the training step) or "minutes" (the run's
# own minutes, learner/wall_s where the row has it).
PLOT_AXES = {
    LOSS_PNG: ("step", "loss per position (nats)"),
    ELO_PLOT: ("step", "Elo (random = 0), 95% interval"),
    THROUGHPUT_PNG: ("minutes", "per second"),
    REPLAY_PNG: ("minutes", "positions"),
}


class MetricsLogger:
    def __init__(
        self,
        run_dir: Path,
        *,
        wandb_cfg: Mapping[str, Any] | None,
        run_name: str,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._csv_path = self.run_dir / METRICS_CSV
        new = not self._csv_path.exists()
        self._csv_file = self._csv_path.open("a", newline="")
        self._csv = csv.writer(self._csv_file)
        if new:
            self._csv.writerow(["time_s", "step", "key", "value"])
        self._t0 = time.time()
        self._run_name = run_name
        self._wandb = _init_wandb(wandb_cfg, self.run_dir, run_name, config)
        self._log_models = bool((wandb_cfg or {}).get("log_models", True))
        self._eval_logged: tuple[float, float] | None = None  # (version, elo) last sent to W&B
        self._files_logged: dict[str, tuple[int, int]] = {}  # path -> (mtime_ns, size) sent

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        now = round(time.time(), 3)
        for key, value in metrics.items():
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            self._csv.writerow([now, step, key, float(value)])
        self._csv_file.flush()
        if self._wandb is not None:
            self._log_wandb(metrics, step, now)

    def _log_wandb(self, metrics: Mapping[str, float], step: int, now: float) -> None:
        """The row at ``step``; the evaluator's metrics on a row of their own at the candidate's
        step, once per evaluation (they repeat on every row of metrics.csv)."""
        row = {k: v for k, v in metrics.items() if not k.startswith(EVAL_PREFIX)}
        wall = row.get(WALL_METRIC, now - self._t0)  # a row without it: since this logger began
        self._wandb.log(row | {STEP_METRIC: step, WALL_METRIC: round(wall, 3)})
        evaluation = {k: v for k, v in metrics.items() if k.startswith(EVAL_PREFIX)}
        key = (evaluation.get(M.EVAL_VERSION, math.nan), evaluation.get(M.EVAL_ELO, math.nan))
        if M.EVAL_VERSION not in evaluation or key == self._eval_logged:
            return
        self._eval_logged = key
        self._wandb.log(evaluation | {STEP_METRIC: int(evaluation.get(EVAL_STEP, step))})

    def _changed(self, path: Path) -> bool:
        """True (and remembered) when ``path`` exists and differs from what was last sent."""
        try:
            st = path.stat()
        except OSError:
            return False
        stamp = (st.st_mtime_ns, st.st_size)
        if self._files_logged.get(str(path)) == stamp:
            return False
        self._files_logged[str(path)] = stamp
        return True

    def log_model(
        self,
        path: Path,
        *,
        version: int,
        aliases: list[str],
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """A network file as a W&B model artifact (``network-<run>``) with ``aliases`` plus
        ``weights-v<version>`` (W&B numbers each artifact's own versions v0, v1, ...: a plain
        ``v<N>`` alias would collide with those). Sent again only when the file changed;
        True when sent. Never raises: W&B must not stop a run."""
        if self._wandb is None or not self._log_models or not self._changed(Path(path)):
            return False
        try:
            import wandb

            artifact = wandb.Artifact(
                _artifact_name(f"network-{self._run_name}"),
                type="model",
                metadata={"version": version, **(metadata or {})},
            )
            artifact.add_file(str(path), name="model.safetensors")
            self._wandb.log_artifact(artifact, aliases=[*aliases, f"weights-v{version}"])
            return True
        except Exception as exc:
            logger.warning("W&B: could not log the network %s (%s)", path, exc)
            return False

    def log_table(self, key: str, csv_path: Path) -> bool:
        """A CSV file (a header row, then values) as a ``wandb.Table`` under ``key``, when it
        changed since last sent; True when sent. Numbers become numbers, empty cells None."""
        if self._wandb is None or not self._changed(Path(csv_path)):
            return False
        try:
            import wandb

            with open(csv_path, newline="") as f:
                rows = list(csv.reader(f))
            if not rows:
                return False
            table = wandb.Table(columns=rows[0], data=[[_cell(c) for c in r] for r in rows[1:]])
            self._wandb.log({key: table})
            return True
        except Exception as exc:
            logger.warning("W&B: could not log the table %s (%s)", csv_path, exc)
            return False

    def plot(self) -> list[Path]:
        """Redraws the PNG plots from the CSV; returns the files written."""
        return plot_metrics(self._csv_path, self.run_dir)

    def close(self) -> None:
        try:
            self.plot()
        finally:
            self._csv_file.close()
            if self._wandb is not None:
                self._wandb.finish()
                self._wandb = None


def _init_wandb(
    cfg: Mapping[str, Any] | None, run_dir: Path, name: str, config: Mapping[str, Any] | None
) -> Any:
    mode = (cfg or {}).get("mode", "disabled")
    if mode == "disabled":
        return None
    try:
        import wandb
    except ImportError:
        logger.warning("wandb is not installed; metrics go to CSV and PNG only")
        return None
    os.environ.setdefault("WANDB_SILENT", "true")
    # W&B records the command line (sys.argv) with the run: a URL typed there with its password
    # is masked for the time W&B reads it.
    argv = sys.argv
    sys.argv = redact_urls(list(argv))
    try:
        run = wandb.init(
            project=cfg.get("project"),
            entity=cfg.get("entity"),
            mode=mode,
            dir=str(run_dir),
            name=name,
            id=name,
            resume="allow",
            config=redact_urls(dict(config or {})),
        )
        run.define_metric(STEP_METRIC)
        for group in ("learner", "selfplay", "replay", "eval"):
            run.define_metric(f"{group}/*", step_metric=STEP_METRIC)
        run.define_metric(M.EVAL_ELO, step_metric=STEP_METRIC, summary="max,last")
        return run
    except Exception as exc:  # W&B must never stop a training run
        logger.warning("W&B init failed (%s); metrics go to CSV and PNG only", exc)
        return None
    finally:
        sys.argv = argv


def _artifact_name(text: str) -> str:
    """W&B artifact names allow letters, digits, '-', '_' and '.'."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def _cell(text: str) -> Any:
    if text == "":
        return None
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in text else number


def redact_urls(value: Any) -> Any:
    """`value` (nested dicts and lists) with the password of every URL in it masked: a Redis URL
    with credentials never reaches W&B's config."""
    if isinstance(value, Mapping):
        return {k: redact_urls(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_urls(v) for v in value]
    if isinstance(value, str) and "://" in value:
        key, sep, rest = value.partition("=")  # a command-line override: key=URL
        if sep and "://" in rest and "://" not in key:
            return key + sep + redact_url(rest)
        return redact_url(value)
    return value


def read_metrics(
    csv_path: Path, max_bytes: int | None = None
) -> dict[str, list[tuple[int, float, float]]]:
    """key -> [(step, time_s, value)] from a metrics CSV (none when it is absent). A path that
    is not a regular file, or one over ``max_bytes``, is a ``game.files.FileRefused``."""
    series: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    if not Path(csv_path).exists():
        return series
    cap = sys.maxsize if max_bytes is None else max_bytes
    with open_regular_text(csv_path, cap, "metrics file", errors="replace") as f:
        for row in csv.DictReader(f):
            try:
                series[row["key"]].append(
                    (int(row["step"]), float(row["time_s"]), float(row["value"]))
                )
            except (KeyError, ValueError):
                continue  # a row cut short by a kill
    return series


def plot_metrics(csv_path: Path, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = read_metrics(csv_path)
    written = []
    for name, keys in PLOTS.items():
        fig = draw_plot(name, keys, series)
        if fig is None:
            continue
        path = Path(out_dir) / name
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def draw_plot(
    name: str, keys: tuple[str, ...], series: Mapping[str, list[tuple[int, float, float]]]
) -> Any:
    """The matplotlib figure of one plot (None when none of its keys has a value): the losses
    by training step, each Elo rating once at its weights' step (:func:`elo_points`), the
    rates and the replay's counts by the run's minutes."""
    import matplotlib.pyplot as plt

    present = [k for k in keys if series.get(k)]
    if not present:
        return None
    x_kind, y_label = PLOT_AXES.get(name, ("minutes", "value"))
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    if name == ELO_PLOT:
        points = elo_points(series)
        if not points:
            plt.close(fig)
            return None
        ax.errorbar(
            [p[1] for p in points],
            [p[2] for p in points],
            yerr=[[p[2] - p[3] for p in points], [p[4] - p[2] for p in points]],
            fmt="o",
            capsize=3,
            label="rated versions",
        )
    else:
        minutes = run_minutes(series)
        for key in present:
            points = series[key]
            xs = [p[0] for p in points] if x_kind == "step" else [minutes(p[1]) for p in points]
            # A series of one point: a line would not show it.
            ax.plot(xs, [p[2] for p in points], label=key, marker="o" if len(points) == 1 else None)
    ax.set_xlabel("training step" if x_kind == "step" else "minutes since the run started")
    ax.set_ylabel(y_label)
    ax.set_xlim(left=0)
    ax.set_title(name.removesuffix(".png"))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def run_minutes(series: Mapping[str, list[tuple[int, float, float]]]) -> Any:
    """``minutes(time_s)``: the run's own minutes at a row's time (its learner/wall_s, which
    sums resumes), else minutes since the first row; never negative."""
    wall = {t: v for _, t, v in series.get(WALL_METRIC, [])}
    t0 = min((p[1] for points in series.values() for p in points), default=0.0)

    def minutes(t: float) -> float:
        seconds = wall.get(t)
        return max(seconds if seconds is not None else t - t0, 0.0) / 60

    return minutes


def elo_points(
    series: Mapping[str, list[tuple[int, float, float]]],
) -> list[tuple[int, float, float, float, float]]:
    """Each rated version once: (version, its weights' training step, Elo, lower, upper), by
    version. metrics.csv repeats the newest rating on every row until the next one; a version
    is placed at the step its weights were published at (eval/step), the row's step where
    that is missing, and keeps its newest fit."""
    by_time: dict[float, dict[str, float]] = defaultdict(dict)
    row_step: dict[float, int] = {}
    for key in (M.EVAL_VERSION, M.EVAL_ELO, M.EVAL_ELO_LOWER, M.EVAL_ELO_UPPER, EVAL_STEP):
        for step, t, value in series.get(key, []):
            by_time[t][key] = value
            row_step[t] = step
    rated: dict[int, tuple[int, float, float, float, float]] = {}
    for t in sorted(by_time):
        row = by_time[t]
        if M.EVAL_VERSION not in row or M.EVAL_ELO not in row:
            continue
        version, elo = int(row[M.EVAL_VERSION]), row[M.EVAL_ELO]
        step = int(row.get(EVAL_STEP, row_step[t]))
        lower, upper = row.get(M.EVAL_ELO_LOWER, elo), row.get(M.EVAL_ELO_UPPER, elo)
        lower, upper = (b if math.isfinite(b) else elo for b in (lower, upper))
        rated[version] = (version, step, elo, lower, upper)
    return [rated[v] for v in sorted(rated)]
