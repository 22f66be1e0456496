"""Memory soak: the resident memory of every process of a `python -m learner` run over time.

Runs `python -m learner` (its own session, so every process it starts can be found and stopped)
with the given overrides and a small replay window, so that the window fills early and the rest
of the run shows whether memory stays flat once it is full. Every `--interval` seconds it records
the resident set size (RSS) of each process of the run: the learner, its private redis-server,
Ray's gcs_server, raylet and agents, and each Ray worker (the self-play actors). Writes to the
run directory:

    memory.csv   time_s, elapsed_s, pid, role, rss_mb (one row per process per sample, plus a
                 "total" row: the whole run's RSS)
    memory.png   RSS per process against time, the moment the window filled marked

and prints a table per process: RSS at the first sample, when the window filled, the maximum,
the last sample, and the growth from window-full to the last sample.

The learner stops itself after `--minutes` (`learner.time_limit_min`), saving a checkpoint and
stopping its actors and Redis; whatever is still alive a grace period later is killed.

    nice -n 10 python scripts/memory_soak.py --minutes 30 --run-dir runs/soak
    python scripts/memory_soak.py --run-dir runs/soak --report   # the table again
    python scripts/memory_soak.py --minutes 5 --window 2000 -- mcts.simulations=32
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import psutil
import yaml

from checkerzero import metric_names as M
from checkerzero.run_files import CHECKPOINT_DIR, METRICS_CSV

REPO_ROOT = Path(__file__).resolve().parents[1]
MB = 1024 * 1024
STOP_GRACE_S = 120.0  # after the time limit: the final checkpoint, actors' stop, Redis SHUTDOWN
DEFAULT_OVERRIDES = (
    "selfplay.actors=1",  # one actor: the soak measures memory, not throughput
    "cluster.address=local",  # never join a cluster that happens to run on this machine
    "logging.wandb.mode=disabled",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="length of the run")
    p.add_argument("--interval", type=float, default=30.0, help="seconds between samples")
    p.add_argument("--run-dir", type=Path, required=True, help="the run directory (new)")
    p.add_argument("--window", type=int, default=4000, help="replay.window_positions")
    p.add_argument(
        "--min-positions", type=int, default=1000, help="replay.min_positions (<= the window)"
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="only redraw the plot and print the table of a finished soak in --run-dir",
    )
    p.add_argument("overrides", nargs="*", help="more Hydra overrides for python -m learner")
    return p.parse_args(argv)


def role_of(proc: psutil.Process, learner_pid: int) -> str:
    """A readable role: learner, redis-server, gcs_server, raylet, ray::<Actor or IDLE>, ..."""
    if proc.pid == learner_pid:
        return "learner"
    name = proc.name()
    cmdline = proc.cmdline()
    if name.startswith("redis-server"):
        return "redis-server"
    if cmdline and cmdline[0].startswith("ray::"):
        return cmdline[0].split(".")[0]  # ray::SelfPlayActor.run -> ray::SelfPlayActor
    if name in ("gcs_server", "raylet"):
        return name
    script = next((Path(a).stem for a in cmdline[1:] if a.endswith(".py")), None)
    return f"ray {script}" if script else name


def run_processes(learner: psutil.Process) -> list[psutil.Process]:
    """The learner and every process it started (its redis-server runs in a session of its own,
    Ray's workers in process groups of their own, all below the learner)."""
    procs = [learner]
    with contextlib.suppress(psutil.Error):
        procs += learner.children(recursive=True)
    return procs


def window_full_time(run_dir: Path, window: int) -> float | None:
    """Epoch time of the first metrics row with replay/positions_added >= the window, if any."""
    path = run_dir / METRICS_CSV
    if not path.exists():
        return None
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["key"] == M.REPLAY_POSITIONS_ADDED and float(row["value"]) >= window:
                return float(row["time_s"])
    return None


def sample(learner: psutil.Process, t0: float, writer: csv.writer) -> None:
    now = time.time()
    total = 0.0
    for proc in run_processes(learner):
        try:
            rss = proc.memory_info().rss / MB
            role = role_of(proc, learner.pid)
        except psutil.Error:
            continue  # it exited between the listing and the reading
        total += rss
        writer.writerow([f"{now:.1f}", f"{now - t0:.1f}", proc.pid, role, f"{rss:.1f}"])
    writer.writerow([f"{now:.1f}", f"{now - t0:.1f}", 0, "total", f"{total:.1f}"])


def load_samples(path: Path) -> dict[tuple[str, int], list[tuple[float, float, float]]]:
    """(role, pid) -> [(time_s, elapsed_s, rss_mb)] in time order."""
    series: dict[tuple[str, int], list[tuple[float, float, float]]] = defaultdict(list)
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            series[(row["role"], int(row["pid"]))].append(
                (float(row["time_s"]), float(row["elapsed_s"]), float(row["rss_mb"]))
            )
    return series


def table(series, full_at: float | None) -> str:
    """Per process: RSS first, at window-full, max, last; growth from window-full to the last
    sample, and over the second half of the time after window-full (a leak keeps growing there;
    allocators and caches that warm up do not)."""
    lines = [
        f"{'process':<28} {'samples':>7} {'first':>8} {'at full':>8} {'max':>8} {'last':>8} "
        f"{'full->last':>10} {'2nd half':>9}   (RSS, MB)"
    ]
    order = sorted(series, key=lambda k: (k[0] == "total", k[0], k[1]))
    for role, pid in order:
        points = series[(role, pid)]
        rss = [p[2] for p in points]
        after = [p for p in points if full_at is not None and p[0] >= full_at]
        at_full = after[0][2] if after else None
        growth = half = "-"
        if after:
            growth = f"{rss[-1] - at_full:+.1f}"
            middle = (after[0][0] + after[-1][0]) / 2
            half = f"{rss[-1] - next(p[2] for p in after if p[0] >= middle):+.1f}"
        label = role if role == "total" else f"{role} ({pid})"
        lines.append(
            f"{label:<28} {len(rss):>7} {rss[0]:>8.1f} "
            f"{(f'{at_full:.1f}' if at_full is not None else '-'):>8} {max(rss):>8.1f} "
            f"{rss[-1]:>8.1f} {growth:>10} {half:>9}"
        )
    return "\n".join(lines)


def plot(series, full_at: float | None, t0: float, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    bottom.set_prop_cycle(color=plt.get_cmap("tab20").colors)  # a dozen processes or more
    for (role, pid), points in sorted(series.items()):
        minutes = [p[1] / 60 for p in points]
        rss = [p[2] for p in points]
        if role == "total":
            top.plot(minutes, rss, color="black", label="total")
        else:
            bottom.plot(minutes, rss, label=f"{role} ({pid})")
    for ax in (top, bottom):
        if full_at is not None:
            ax.axvline((full_at - t0) / 60, color="grey", linestyle="--", label="window full")
        ax.set_ylabel("RSS (MB)")
        ax.grid(alpha=0.3)
    top.set_title("resident memory of the run's processes")
    top.legend(loc="lower right", fontsize="small")
    bottom.legend(loc="upper left", fontsize="x-small", ncol=2)
    bottom.set_xlabel("minutes since start")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def report(run_dir: Path, window: int, t0: float | None = None) -> None:
    """The plot and the table from a soak's memory.csv (and the run's metrics for window-full)."""
    csv_path = run_dir / "memory.csv"
    resolved = run_dir / ".hydra" / "config.yaml"
    if resolved.exists():
        window = int(yaml.safe_load(resolved.read_text())["replay"]["window_positions"])
    series = load_samples(csv_path)
    if t0 is None:
        t0 = min(p[0] - p[1] for points in series.values() for p in points)
    full_at = window_full_time(run_dir, window)
    plot(series, full_at, t0, run_dir / "memory.png")
    when = f"{(full_at - t0) / 60:.1f} min" if full_at is not None else "never"
    print(f"replay window ({window} positions) full at: {when}")
    print(table(series, full_at))
    print(f"wrote {csv_path} and {run_dir / 'memory.png'}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    run_dir = args.run_dir.resolve()
    if args.report:
        report(run_dir, args.window)
        return
    if (run_dir / CHECKPOINT_DIR).exists():
        raise SystemExit(f"{run_dir} holds a run already: a soak starts a new one")
    if args.min_positions > args.window:
        raise SystemExit("--min-positions must not exceed --window (training would never start)")
    run_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "learner",
        *DEFAULT_OVERRIDES,
        f"replay.window_positions={args.window}",
        f"replay.min_positions={args.min_positions}",
        f"learner.time_limit_min={args.minutes}",
        f"run_dir={run_dir}",
        *args.overrides,
    ]
    print(" ".join(command), flush=True)
    log_path = run_dir / "soak_learner.log"
    csv_path = run_dir / "memory.csv"
    t0 = time.time()
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    learner = psutil.Process(proc.pid)
    deadline = time.monotonic() + 60 * args.minutes + STOP_GRACE_S
    seen: set[psutil.Process] = set()
    try:
        with csv_path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["time_s", "elapsed_s", "pid", "role", "rss_mb"])
            while proc.poll() is None and time.monotonic() < deadline:
                seen.update(run_processes(learner))
                sample(learner, t0, writer)
                f.flush()
                elapsed = time.time() - t0
                print(f"[{elapsed / 60:5.1f} min] sampled {len(seen)} processes so far", flush=True)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=args.interval)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the learner saves a checkpoint and stops
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_GRACE_S)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        leftovers = [p for p in seen if p.is_running()]
        for p in leftovers:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(leftovers, timeout=10)
    print(f"learner exited with status {proc.returncode}; log {log_path}")
    report(run_dir, args.window, t0)


if __name__ == "__main__":
    main()
