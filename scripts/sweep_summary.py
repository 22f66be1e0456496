"""The table of a sweep made by scripts/sweep.sh, as Markdown for docs/tuning.md.

    python scripts/sweep_summary.py runs/sweep-control runs/sweep-lr0.1 ... [--plot sweep.png]

For each run directory (or its copy under docs/results/, with overrides.yaml and learner.log): its
overrides (from Hydra's record), the self-play games, positions and training steps it reached
(summary.json, written by the learner at its end), and its final match against minimax depth 4
(final_match.json, written by the sweep), and for a run rated on a ladder table when its in-run
curve reached minimax:4 (minutes on the run's own clock, with a 95% interval:
evaluation.ladder.report.reach_time). Where some arm also has a match against minimax:6
(final_match_minimax6.json, written by scripts/search_ab.sh; match_minimax6.json in the copies
under docs/results/) the table gains that match and when the curve reached minimax:6. Runs made
before those files existed are read from the learner's last log line and the match's printed
summary instead. A run that has not finished its match is listed with what it has. `--plot` draws
the arms side by side: each final match's Elo with its 95% interval (when some arm has a match),
and the in-run curves (the evaluator's ladder Elo and the training loss) against minutes. A run
rated on the shipped table (`evaluation=rated`) draws its curve.csv with each candidate's interval
shaded and minimax:4's rating on the table as a line, on the clock of the "reaches" column; one
rated on its own in-run rungs, dashed: the two scales differ (the in-run rungs put minimax:4 some
250 Elo lower than the table does).
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import yaml

from checkerzero.metric_names import EVAL_ELO, LOSS_TOTAL
from checkerzero.metrics import read_metrics
from checkerzero.run_files import CURVE_CSV, EVAL_DIR
from evaluation.ladder.report import CurvePoint, reach_time, read_curve_csv
from evaluation.ladder.table import read_table, table_path

LOSS_SMOOTHING = 12  # log lines (10 s apart) averaged in the loss curve: one noisy batch each
FINISHED = re.compile(r"run finished: (\{.*\})")
MATCH = re.compile(
    r"(\d+) games, \+(\d+) =(\d+) -(\d+) .*score ([\d.]+)%, "
    r"Elo ([+-]?\d+) \[([+-]?\d+), ([+-]?\d+)\]"
)


def _first(*paths: Path) -> Path | None:
    """The first of `paths` that exists: a run directory, or its copy under docs/results/."""
    return next((p for p in paths if p.exists()), None)


def summarize(run_dir: Path) -> dict[str, str]:
    row = {
        "run": run_dir.name.removeprefix("sweep-"),
        "overrides": "",
        "games": "",
        "positions": "",
        "steps": "",
        "vs minimax:4": "(no match yet)",
        "reaches minimax:4": "",
        "vs minimax:6": "",
        "reaches minimax:6": "",
    }
    overrides = _first(run_dir / ".hydra" / "overrides.yaml", run_dir / "overrides.yaml")
    if overrides:
        kept = [
            o
            for o in yaml.safe_load(overrides.read_text()) or []
            if not o.startswith(("run_dir=", "learner.time_limit_min=", "cluster.address="))
        ]
        row["overrides"] = " ".join(kept) or "(defaults)"
    if done := _learner_summary(run_dir):
        row.update(
            games=f"{done['games']:,}",
            positions=f"{done['positions']:,}",
            steps=f"{done['step']:,}",
        )
    if match := _match_figures(run_dir):
        row["vs minimax:4"] = _match_text(match)
        row["_elo"] = match[5:]
    row["reaches minimax:4"] = _reach_text(run_dir, "minimax:4")
    six = _first(run_dir / "final_match_minimax6.json", run_dir / "match_minimax6.json")
    if six is not None:
        row["vs minimax:6"] = _match_text(_json_figures(six))
    if row["vs minimax:6"]:  # the crossing is asked of the arms that were matched there
        row["reaches minimax:6"] = _reach_text(run_dir, "minimax:6")
    return row


def _match_text(match: tuple) -> str:
    n, w, d, loss, score, elo, lo, hi = match
    return (
        f"{100 * score:.1f}% (+{w} ={d} -{loss}; Elo {elo:+.0f} [{lo:+.0f}, {hi:+.0f}]; {n} games)"
    )


def _reach_text(run_dir: Path, rung: str) -> str:
    """When the run's in-run curve reached `rung`, in minutes of its own clock with a 95%
    interval (evaluation.ladder.report.reach_time); only for a run rated on a table, the only
    scale a rung's rating is fixed on."""
    table = ladder_table(run_dir)
    if table is None:
        return "(own rungs)" if _config(run_dir) is not None else ""
    curve = _first(run_dir / EVAL_DIR / CURVE_CSV, run_dir / CURVE_CSV)
    if curve is None:
        return ""
    reach = reach_time(read_curve_csv(curve), read_table(table).ratings[rung])
    if reach is None:
        return ""

    def minutes(seconds: float) -> str:
        return f"{seconds / 60:.1f}" if math.isfinite(seconds) else "not in the run"

    if not math.isfinite(reach.at):
        return "not in the run"
    return f"{minutes(reach.at)} min [{minutes(reach.lower)}, {minutes(reach.upper)}]"


def _learner_summary(run_dir: Path) -> dict | None:
    """The learner's end state: summary.json, else the last `run finished` log line."""
    if (path := run_dir / "summary.json").exists():
        return json.loads(path.read_text())
    done = None
    if log := _first(run_dir / "__main__.log", run_dir / "learner.log"):
        for line in log.read_text().splitlines():
            if m := FINISHED.search(line):
                done = ast.literal_eval(m.group(1))  # a dict of literals; never eval
    return done


def _match_figures(run_dir: Path) -> tuple | None:
    """(games, W, D, L, score, Elo, lower, upper) of the final match: final_match.json, else
    the summary line of final_match.log."""
    if (path := run_dir / "final_match.json").exists():
        return _json_figures(path)
    log = run_dir / "final_match.log"
    if log.exists() and (m := MATCH.search(log.read_text())):
        n, w, d, loss, score, elo, lo, hi = m.groups()
        return (int(n), int(w), int(d), int(loss), float(score) / 100, int(elo), int(lo), int(hi))
    return None


def _json_figures(path: Path) -> tuple:
    """(games, W, D, L, score, Elo, lower, upper) of a match's JSON (evaluation.match --json)."""
    f = json.loads(path.read_text())
    # null stands for an infinite value (a 0% or 100% score), as the match prints it
    infinite = {"elo": math.copysign(math.inf, f["score"] - 0.5)}
    infinite |= {"elo_lower": -math.inf, "elo_upper": math.inf}
    bounds = [infinite[k] if f[k] is None else f[k] for k in infinite]
    return (f["games"], f["wins"], f["draws"], f["losses"], f["score"], *bounds)


def _config(run_dir: Path) -> dict | None:
    """The run's resolved config (Hydra's record, or its copy under docs/results/)."""
    config = _first(run_dir / ".hydra" / "config.yaml", run_dir / "config.yaml")
    return None if config is None else yaml.safe_load(config.read_text()) or {}


def ladder_table(run_dir: Path) -> Path | None:
    """The ladder table the run's evaluator rated candidates on; None: its own in-run rungs."""
    evaluation = (_config(run_dir) or {}).get("evaluation") or {}
    return table_path(evaluation.get("ladder_table"))


def _curve(run_dir: Path) -> list[CurvePoint]:
    """The in-run curve's candidates that carry the run's clock (eval/curve.csv, or its copy
    under docs/results/); none for a run made before the curve file existed."""
    path = _first(run_dir / EVAL_DIR / CURVE_CSV, run_dir / CURVE_CSV)
    return [] if path is None else [p for p in read_curve_csv(path) if p.wall_s is not None]


def plot(
    run_dirs: list[Path], rows: list[dict], out: Path, rungs: tuple[str, ...] = ("minimax:4",)
) -> None:
    # Over 80 lines: one figure's panels drawn in turn, plotting calls, no logic.
    """The arms side by side: the final matches (a panel only when some arm has one), the
    in-run Elo against minutes, and the training loss. A run rated on a table draws its curve
    from eval/curve.csv on the run's own clock, with each candidate's 95% interval shaded and
    each of `rungs`' ratings on that table as a line: the curve's crossing of one is the table's
    "reaches" column. Other runs draw the ratings their metrics logged, dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matched = [row for row in rows if "_elo" in row]
    fig, axes = plt.subplots(1, 3 if matched else 2, figsize=(16 if matched else 11, 4.5), dpi=100)
    ax_elo, ax_loss = axes[-2:]
    if matched:
        ax_match = axes[0]
        for i, row in enumerate(rows):
            if "_elo" in row and all(math.isfinite(x) for x in row["_elo"]):
                elo, lo, hi = row["_elo"]
                ax_match.errorbar([elo], [i], xerr=[[elo - lo], [hi - elo]], fmt="o", capsize=4)
        ax_match.set_yticks(range(len(rows)), [r["run"] for r in rows])
        ax_match.invert_yaxis()
        ax_match.axvline(0, color="grey", lw=0.8)
        ax_match.set_xlabel("Elo vs minimax:4 (final match, 95% interval)")
        ax_match.grid(alpha=0.3)
    rung_lines = set()
    for run_dir, row in zip(run_dirs, rows, strict=True):
        series = read_metrics(run_dir / "metrics.csv")
        t0 = min((points[0][1] for points in series.values()), default=0.0)
        table = ladder_table(run_dir)
        curve = _curve(run_dir) if table is not None else []
        if curve:
            minutes = [p.wall_s / 60 for p in curve]
            (line,) = ax_elo.plot(
                minutes, [p.elo for p in curve], label=f"{row['run']} (table)", marker="o", ms=3
            )
            lower, upper = [p.lower for p in curve], [p.upper for p in curve]
            ax_elo.fill_between(minutes, lower, upper, color=line.get_color(), alpha=0.15)
            ratings = read_table(table).ratings
            rung_lines |= {(rung, ratings[rung]) for rung in rungs}
        else:
            elo = series.get(EVAL_ELO, [])
            # the logger repeats the last rating every line: keep the first line of each new one
            rated = [p for i, p in enumerate(elo) if i == 0 or p[2] != elo[i - 1][2]]
            on_table = table is not None
            ax_elo.plot(
                [(t - t0) / 60 for _, t, _ in rated],
                [v for _, _, v in rated],
                label=f"{row['run']} ({'table' if on_table else 'own rungs'})",
                linestyle="-" if on_table else "--",
                marker="o",
                ms=3,
            )
        loss = series.get(LOSS_TOTAL, [])
        if len(loss) >= LOSS_SMOOTHING:
            smooth = np.convolve(
                [v for _, _, v in loss], np.ones(LOSS_SMOOTHING) / LOSS_SMOOTHING, mode="valid"
            )
            minutes = [(t - t0) / 60 for _, t, _ in loss[LOSS_SMOOTHING - 1 :]]
            ax_loss.plot(minutes, smooth, label=row["run"])
    for rung, rating in sorted(rung_lines):
        ax_elo.axhline(rating, color="grey", lw=0.8, ls=":")
        ax_elo.annotate(
            f"{rung} {rating:+.0f}",
            (0, rating),
            xytext=(2, 2),
            textcoords="offset points",
            fontsize=8,
            color="grey",
        )
    title = (
        "in-run Elo (random = 0; shaded: 95% interval)"
        if rung_lines
        else ("in-run Elo (random = 0): solid on the table, dashed own rungs")
    )
    ax_elo.set_title(title, fontsize=10)
    ax_loss.set_title(f"training loss (policy + value; mean of {LOSS_SMOOTHING} log lines)")
    for ax in (ax_elo, ax_loss):
        ax.set_xlabel("minutes")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # a run without metrics draws no loss
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories of the sweep")
    parser.add_argument("--plot", type=Path, help="also draw the arms into this PNG")
    args = parser.parse_args(argv)
    missing = [str(r) for r in args.runs if not r.is_dir()]
    if missing:
        parser.error(f"not a run directory: {', '.join(missing)}")
    rows = [summarize(r) for r in args.runs]
    # every column but those only some sweeps fill (a rung's crossing needs a run rated on a
    # table; minimax:6 an arm matched there), shown when some arm has them
    optional = ("reaches minimax:4", "vs minimax:6", "reaches minimax:6")
    columns = [
        c
        for c in rows[0]
        if not c.startswith("_") and (c not in optional or any(r[c] for r in rows))
    ]
    print("| " + " | ".join(columns) + " |")
    print("| " + " | ".join("---" for _ in columns) + " |")
    for row in rows:
        print("| " + " | ".join(row[c] for c in columns) + " |")
    if args.plot:
        six = any(r["vs minimax:6"] for r in rows)
        plot(
            args.runs, rows, args.plot, rungs=("minimax:4", "minimax:6") if six else ("minimax:4",)
        )
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
