"""The distributed loop end to end: `python -m learner` as a user runs it, in real processes.

Each test starts the command line in its own session (`start_new_session=True`) and, whatever
happens, kills that session's processes and any redis-server left on its run directory: `ray stop`
would kill every Ray on the machine, so it is never used. Ray is started locally
(`cluster.address=local`) so a test never joins a cluster that happens to run on this machine.

1. The smoke preset completes: actors, a private Redis, training steps, published weights, a
   checkpoint, metrics, plots, the resolved config and the git revision; Redis stopped after.
2. The same with the weights average and the moves-left head on (slow): the head's loss is
   logged, and the network the run hands out is the average its training state keeps.
3. Redis unreachable at start: a non-zero exit and one line naming the URL, after bounded retries.
4. The learner SIGKILLed mid-run leaves nothing running: its private redis-server (which
   flushes its append-only file) and its local Ray's processes end with it. Started again on the
   same run directory (with no other override than a new step limit) it resumes from its
   checkpoint with its saved config (the step continues), the replay window survives (the
   append-only file) and weights versions keep growing; the run's original config record is
   untouched.
5. The private redis-server SIGKILLed mid-run: the learner restarts it from its append-only file
   (one log line), the actors carry on and the run completes with every game it had; when the
   restart fails, the run stops at once with one error line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import redis
import torch
import yaml
from safetensors.torch import load as safetensors_load

from checkerzero.metrics import read_metrics
from checkerzero.network.checkpoint import load_checkpoint, read_checkpoint_meta
from checkerzero.run_files import LIVE_FILE
from checkerzero.store.live import read_live_file
from checkerzero.store.redis_server import EmbeddedRedis, find_redis_server
from evaluation.players.make import make_player
from game import Position
from game.pdn import read_pdn

ROOT = Path(__file__).resolve().parents[1]
# One tiny configuration for every run here: the smoke preset (1-block net, 20 steps), one actor
# playing 4 games at once with 8 simulations a move, and a local Ray.
SMOKE = (
    "preset=smoke",
    "cluster.address=local",
    "cluster.num_cpus=2",
    "selfplay.actors=1",
    "selfplay.games_in_parallel=4",
    "mcts.simulations=8",
)
RUN_TIMEOUT_S = 240  # a smoke run takes ~20 s here; 2 shared cores can make it several times that
POLL_S = 0.2
STATE = re.compile(r"^state_(\d{8})\.safetensors$")
FINISHED = re.compile(r"run finished after \d+ min \d\d s")
ORPHAN_TIMEOUT_S = 15.0  # a killed learner's Redis and Ray end within a few seconds (3 s here)


# A progress line on the terminal: time, then the run's elapsed time and rates.
PROGRESS = re.compile(r"\d\d:\d\d:\d\d \d+[hm]\d\d[ms]  pos ")


def learner_command(run_dir: Path, *overrides: str, resume: bool = False) -> list[str]:
    """A new smoke run, or (resume) the run in `run_dir` with its saved config and `overrides`."""
    given = () if resume else SMOKE
    flags = [o for o in overrides if o.startswith("-")]  # Hydra's flags (-m) go first
    overrides = tuple(o for o in overrides if not o.startswith("-"))
    return [sys.executable, "-m", "learner", *flags, *given, f"run_dir={run_dir}", *overrides]


def summary_of(run_dir: Path, output: str) -> dict:
    """The run's summary.json, once the log said, as text, that the run finished."""
    assert FINISHED.search(output), f"no 'run finished' lines in the output:\n{output[-3000:]}"
    return json.loads((run_dir / "summary.json").read_text())


def redis_processes(run_dir: Path) -> list[psutil.Process]:
    """redis-server processes serving `run_dir` (working in its redis/ folder: the `dir` of
    its redis.conf; the server rewrites its command line, so that cannot tell)."""
    data_dir = str((run_dir / "redis").resolve())
    found = []
    for proc in psutil.process_iter(["name"]):
        with contextlib.suppress(psutil.Error):
            if "redis-server" in (proc.info["name"] or "") and proc.cwd() == data_dir:
                found.append(proc)
    return found


def session_processes(sid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(proc.pid) == sid:
                found.append(proc)
    return found


def kill_all(procs: list[psutil.Process]) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=10)


@contextlib.contextmanager
def learner_process(
    run_dir: Path, log: Path, *overrides: str, resume: bool = False
) -> Iterator[tuple[subprocess.Popen, list[psutil.Process]]]:
    """`python -m learner` in a session of its own, output to `log`; everything killed after.

    The list it yields collects processes the test saw in the run (children of a killed
    learner are re-parented and would escape a later search by parentage).
    """
    seen: list[psutil.Process] = []
    with log.open("w") as out:
        proc = subprocess.Popen(
            learner_command(run_dir, *overrides, resume=resume),
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc, seen
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        kill_all(seen + session_processes(proc.pid) + redis_processes(run_dir))


def wait_for(predicate, timeout_s: float, what: str, proc: subprocess.Popen, log: Path):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if proc.poll() is not None:
            pytest.fail(f"the learner exited ({proc.returncode}) before {what}:\n{tail(log)}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}:\n{tail(log)}")
        time.sleep(POLL_S)


def tail(log: Path, chars: int = 4000) -> str:
    return log.read_text(errors="replace")[-chars:]


def saved_steps(run_dir: Path) -> list[int]:
    ckpt = run_dir / "checkpoints"
    if not ckpt.is_dir():
        return []
    return sorted(int(m.group(1)) for p in ckpt.iterdir() if (m := STATE.match(p.name)))


def private_redis(run_dir: Path) -> redis.Redis:
    """A client for the run's private redis-server (port from its redis.conf, its password)."""
    conf = (run_dir / "redis" / "redis.conf").read_text()
    port = int(re.search(r'^port "(\d+)"$', conf, re.MULTILINE).group(1))
    password = (run_dir / "redis" / "password").read_text().strip()
    return redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=10)


def port_answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_the_progress_line_counts_what_it_waits_for(config, caplog):
    """The run's progress line, from fixed counts: first the positions it waits for before
    training (replay.min_positions), then those self-play must add once training has used its
    share (replay.sample_ratio)."""
    from checkerzero.store.replay import ReplayStats, SampleRatio
    from learner.run import Run

    cfg = config("preset=smoke")  # min_positions 64, sample_ratio 50, batch_size 32
    ratio = SampleRatio(cfg.replay.sample_ratio, min_positions=cfg.replay.min_positions)
    row = {
        "selfplay/games_per_s": 0.5,
        "selfplay/positions_per_s": 18.5,
        "learner/steps_per_s": 0.0,
    }

    def line(positions: int, samples: int) -> str:
        counters = SimpleNamespace(step=samples // 32, version=1, samples=samples)
        stats = ReplayStats(positions, 1, 1, positions)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=Run.__module__):
            Run._progress(
                SimpleNamespace(cfg=cfg), SimpleNamespace(counters=counters), stats, row, 2.0, ratio
            )
        return caplog.text

    assert "waiting for data 37/64" in line(37, 0)
    assert "waiting" not in line(64, 0)
    # 3,200 samples drawn from 64 positions at 50 each: the next 32 need a 65th position.
    assert line(64, 3200).rstrip().endswith("waiting for self-play")


def test_smoke_run_completes_end_to_end(tmp_path):
    run_dir = tmp_path / "run"
    log = tmp_path / "learner.log"
    # One weights file kept (the newest), to see retention at work.
    with learner_process(run_dir, log, "learner.keep_weights=1") as (proc, _):
        rc = proc.wait(timeout=RUN_TIMEOUT_S)
    output = log.read_text(errors="replace")
    assert rc == 0, output[-4000:]

    summary = summary_of(run_dir, output)
    assert summary["step"] == 20  # preset smoke: learner.max_steps=20
    assert summary["version"] >= 2  # v1 at start, then one per 10 steps: a learned version
    assert summary["games"] >= 1 and summary["positions"] >= 64  # replay.min_positions=64
    assert summary["elapsed_s"] > 0 and summary["losses"]["total"] > 0
    assert summary["run_s"] >= summary["elapsed_s"]  # the trainer's clock starts before the loop
    assert summary["elo"] is None  # the smoke preset runs no evaluator
    assert re.search(r"1 self-play actors on 1 node\(s\)", output)

    # The terminal: no line per checkpoint file, the end as text. (Whether a progress line came
    # while the run waited for its first 64 positions depends on the machine's speed: the line
    # itself is test_the_progress_line_counts_what_it_waits_for.)
    assert "saved checkpoint" not in output and "saved training state" not in output
    assert "plays with weights version" not in output and "loaded weights version" not in output
    assert "run finished: {" not in output
    # The learner's own lines, short: every progress line fits 120 characters with its time;
    # the actors' lines (the network backend of each) and Ray's are in the run's learner.log.
    progress = [x for x in output.splitlines() if PROGRESS.match(x)]
    assert progress and all(len(x) <= 120 for x in progress), progress
    assert "pid=" not in output and "Started a local Ray" not in output
    kept = (run_dir / "learner.log").read_text(errors="replace")
    assert re.search(r"\(SelfPlayActor pid=\d+\) .*NetworkInference on cpu", kept)
    # How to play the network on the page.
    spec = "run/checkpoints/latest.safetensors:sims=200"
    assert f"play it on the page: python -m play --runs {tmp_path} --player {spec}" in output

    # The checkpoint holds the final step and the last published version; summary.json names
    # the network file a match takes, not the training state.
    assert saved_steps(run_dir)[-1] == 20
    meta = read_checkpoint_meta(run_dir / "checkpoints" / "latest.safetensors")
    assert (meta.step, meta.version) == (20, summary["version"])
    assert summary["model"] == str(run_dir / "checkpoints" / "latest.safetensors")
    make_player(summary["model"])  # what `python -m evaluation.match` builds from it
    weights = sorted(p.name for p in (run_dir / "checkpoints" / "weights").iterdir())
    assert weights == ["step_00000020.safetensors"]

    # Metrics: rows of losses and self-play counters; plots drawn from them.
    csv_text = (run_dir / "metrics.csv").read_text()
    assert csv_text.startswith("time_s,step,key,value")
    final_loss = [line for line in csv_text.splitlines() if ",learner/loss_total," in line]
    assert final_loss and final_loss[-1].split(",")[1] == "20"
    assert float(final_loss[-1].split(",")[3]) > 0
    assert ",selfplay/games," in csv_text
    # Throughput: the rates of the run's last stretch too, so a short run is not flat zero.
    rates = read_metrics(run_dir / "metrics.csv")
    assert max(v for _, _, v in rates["selfplay/positions_per_s"]) > 0
    assert max(v for _, _, v in rates["learner/samples_per_s"]) > 0
    clock = [v for _, _, v in rates["learner/wall_s"]]  # the run's own seconds, never back
    assert clock == sorted(clock) and 0 < clock[-1] <= summary["run_s"] + 0.1
    for plot in ("loss.png", "throughput.png", "replay.png"):
        assert (run_dir / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", plot

    # The resolved config (with the command line's overrides) and the code's revision.
    resolved = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())
    assert resolved["mcts"]["simulations"] == 8
    assert resolved["run_dir"] == str(run_dir)
    assert re.fullmatch(
        r"([0-9a-f]{40}(-dirty)?|unknown)\n", (run_dir / "git_revision.txt").read_text()
    )

    # The self-play games: one file, each game once, from the initial position through the
    # ballot's moves, played by a version the actor followed from the weights channel.
    assert sorted(p.name for p in (run_dir / "games").iterdir()) == ["live.json", "selfplay.pdn"]
    games = read_pdn((run_dir / "games" / "selfplay.pdn").read_text())
    rounds = [int(g.tags["Round"]) for g in games]
    assert games and rounds == sorted(set(rounds)) and all(g.moves for g in games)
    assert all(not g.fen and g.tags["GameType"] == "21" and g.tags["Date"] for g in games)
    assert all(re.fullmatch(r"checkerzero v\d+", g.tags["Black"]) for g in games)
    # The game slot 0 of the actor was playing last, copied for the play server: it replays.
    live = read_live_file(run_dir / LIVE_FILE)
    assert live["actor"] == 0 and live["version"] >= 1 and live["opening"]
    position = Position.from_fen(live["fen"])
    for move in live["moves"]:
        position.play(move)

    # The private redis-server was started, then stopped: its port is closed, its process gone.
    match = re.search(r"redis-server \S+ pid (\d+) on redis://127\.0\.0\.1:(\d+)/0", output)
    assert match, output[-4000:]
    pid, port = int(match.group(1)), int(match.group(2))
    assert "stopped the private redis-server" in output
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not port_answers(port)
    assert redis_processes(run_dir) == []


@pytest.mark.slow  # about 50 s on the 2-core machine, beside the plain smoke run above
def test_smoke_run_with_the_weights_average_and_the_moves_left_head(tmp_path):
    run_dir = tmp_path / "run"
    log = tmp_path / "learner.log"
    overrides = ("learner.ema_decay=0.99", "model.moves_left_head=true")
    with learner_process(run_dir, log, *overrides) as (proc, _):
        rc = proc.wait(timeout=RUN_TIMEOUT_S)
    output = log.read_text(errors="replace")
    assert rc == 0, output[-4000:]
    summary = summary_of(run_dir, output)
    assert summary["step"] == 20 and summary["version"] >= 2

    # The head was trained: its loss and error in plies are in the metrics at every row.
    rows = read_metrics(run_dir / "metrics.csv")
    losses = [v for _, _, v in rows["learner/loss_moves_left"]]
    assert losses and all(v > 0 and v == v for v in losses)
    assert all(v >= 0 for _, _, v in rows.get("learner/moves_left_mae_plies", []))

    # The network the run hands out (latest.safetensors, the weights channel's bytes) is the
    # average kept in the training state, with the head, and not the raw weights.
    model, meta = load_checkpoint(run_dir / "checkpoints" / "latest.safetensors")
    assert meta.step == 20 and meta.config.moves_left_head
    state = safetensors_load((run_dir / "checkpoints" / "state_00000020.safetensors").read_bytes())
    handed_out = model.state_dict()
    assert all(torch.equal(t, state[f"ema/{k}"]) for k, t in handed_out.items())
    assert not all(torch.equal(t, state[f"model/{k}"]) for k, t in handed_out.items())
    assert any(k.startswith("moves_left_head.") for k in handed_out)


def test_unreachable_redis_fails_with_a_clear_error(tmp_path):
    with socket.socket() as sock:  # a port that was just free: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    done = subprocess.run(
        learner_command(
            tmp_path / "run",
            f"replay.url={url}",
            "replay.connect_retries=1",
            "replay.connect_backoff_s=0.05",
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        start_new_session=True,
    )
    assert done.returncode == 1
    # One line on stderr naming the URL and the attempts (then the client's reason); no traceback.
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: replay store {url} unreachable after 2 attempts: ")
    assert "refused" in lines[0].lower()
    assert "Traceback" not in done.stdout + done.stderr
    assert f"replay store {url} unreachable" in done.stdout  # the retry was logged
    assert not (tmp_path / "run" / "checkpoints").exists()  # nothing started


def test_killed_learner_resumes_from_its_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    # No step limit (time limit as a safety net), a checkpoint every 5 steps.
    endless = (
        "learner.max_steps=0",
        "learner.time_limit_min=4",
        "learner.checkpoint_every_steps=5",
    )
    with learner_process(run_dir, first_log, *endless) as (proc, seen):
        wait_for(
            lambda: [s for s in saved_steps(run_dir) if s >= 10],
            RUN_TIMEOUT_S,
            "a checkpoint at step 10 or later",
            proc,
            first_log,
        )
        learner = psutil.Process(proc.pid)
        left = learner.children(recursive=True)  # Redis, Ray's daemons, agents and workers
        seen += left
        assert redis_processes(run_dir) and any(p.name().startswith("ray::") for p in left)
        learner.kill()  # SIGKILL: no checkpoint on the way out
        proc.wait(timeout=30)
        killed_at = saved_steps(run_dir)[-1]
        # Nothing it started outlives it: its redis-server and every Ray process go.
        _, alive = psutil.wait_procs(left, timeout=ORPHAN_TIMEOUT_S)
        assert [p.name() for p in alive if p.is_running()] == []
        assert redis_processes(run_dir) == []
        # The store as the killed run left it, read from its append-only file.
        with EmbeddedRedis(run_dir) as srv:
            client = redis.Redis(host="127.0.0.1", port=srv.port, password=srv.password)
            try:
                before = {k.decode(): int(v) for k, v in client.hgetall("{cz}:meta").items()}
                version_before = int(client.get("cz:weights:latest"))
            finally:
                client.close()
        assert before["positions_added"] >= 64 and before["games_added"] >= 1

        # Only the directory and a new step limit: the rest (the smoke network above all) is
        # the run's saved config, not the laptop default the command line would compose.
        resumed_to = killed_at + 10
        with learner_process(
            run_dir, second_log, f"learner.max_steps={resumed_to}", resume=True
        ) as (proc, _):
            rc = proc.wait(timeout=RUN_TIMEOUT_S)
    output = second_log.read_text(errors="replace")
    assert rc == 0, output[-4000:]
    assert "left running" not in output  # the killed run's server had ended with it
    match = re.search(
        r"resumed from \S+state_(\d{8})\.safetensors \(step (\d+), weights version", output
    )
    assert match, output[-4000:]
    assert int(match.group(1)) == int(match.group(2)) == killed_at > 0
    summary = summary_of(run_dir, output)
    assert summary["resumed"] is True
    # The run's clock goes on from the saved state's: the killed run's time up to it counts.
    assert summary["run_s"] > summary["elapsed_s"] > 0
    assert summary["step"] == resumed_to  # training continued from the saved step, not from 0
    assert summary["positions"] >= before["positions_added"]  # no game of the window was lost
    assert summary["games"] >= before["games_added"]
    assert summary["version"] > version_before  # weights versions only grow
    assert saved_steps(run_dir)[-1] == resumed_to
    assert redis_processes(run_dir) == []
    assert yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text())[: len(SMOKE)] == (
        list(SMOKE)
    )
    assert len(list((run_dir / ".hydra").glob("resume-*/config.yaml"))) == 1


def store_counters(run_dir: Path) -> dict[str, int]:
    client = private_redis(run_dir)
    try:
        return {k.decode(): int(v) for k, v in client.hgetall("{cz}:meta").items()}
    finally:
        client.close()


def kill_redis_while_training(
    run_dir: Path, proc: subprocess.Popen, log: Path, binary: Path | None = None
) -> dict:
    """Waits for a checkpoint at step 5 or later, then (after deleting `binary`, so that no new
    server can start) SIGKILLs the run's redis-server; returns the store's counters just
    before and the killed server's pid."""
    wait_for(
        lambda: [s for s in saved_steps(run_dir) if s >= 5],
        RUN_TIMEOUT_S,
        "a checkpoint at step 5 or later",
        proc,
        log,
    )
    if binary is not None:
        binary.unlink()  # the running server keeps its image
    (server,) = redis_processes(run_dir)
    before = store_counters(run_dir)
    server.kill()
    server.wait(timeout=30)
    return {"counters": before, "pid": server.pid}


def test_a_run_whose_redis_dies_restarts_it_and_goes_on(tmp_path):
    run_dir = tmp_path / "run"
    log = tmp_path / "learner.log"
    # Steps enough that the run is still training when its Redis is killed after step 5.
    with learner_process(run_dir, log, "learner.max_steps=40") as (proc, _):
        killed = kill_redis_while_training(run_dir, proc, log)
        rc = proc.wait(timeout=RUN_TIMEOUT_S)
    output = log.read_text(errors="replace")
    assert rc == 0, output[-4000:]
    port = private_port(run_dir)
    died = [line for line in output.splitlines() if "redis-server" in line and "died" in line]
    assert len(died) == 1, output[-4000:]
    assert re.search(
        rf"the private redis-server \(pid {killed['pid']}\) died \(killed by SIGKILL\); "
        rf"restarted it on redis://127\.0\.0\.1:{port}/0 from its append-only file",
        died[0],
    )
    assert "unreachable" not in output and "Traceback" not in output
    summary = summary_of(run_dir, output)
    assert summary["step"] == 40  # training went on to the end
    before = killed["counters"]
    assert summary["positions"] >= before["positions_added"] > 0  # the window came back
    assert summary["games"] >= before["games_added"] > 0
    assert redis_processes(run_dir) == []


def test_a_run_whose_redis_cannot_be_restarted_stops_with_one_line(tmp_path):
    run_dir = tmp_path / "run"
    log = tmp_path / "learner.log"
    binary = tmp_path / "redis-server"
    shutil.copy(find_redis_server(), binary)
    endless = ("learner.max_steps=0", "learner.time_limit_min=4", f"replay.redis_server={binary}")
    with learner_process(run_dir, log, *endless) as (proc, _):
        killed = kill_redis_while_training(run_dir, proc, log, binary)
        rc = proc.wait(timeout=RUN_TIMEOUT_S)
    output = log.read_text(errors="replace")
    assert rc == 1, output[-4000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: the private redis-server on port {private_port(run_dir)} died (killed by "
        f"SIGKILL) and could not be restarted: redis-server from the binary argument "
        f"({binary}) is not an executable file"
    ], output[-4000:]
    assert killed["counters"]["games_added"] > 0
    assert "Traceback" not in output and "skipped" not in output
    assert not FINISHED.search(output)
    assert saved_steps(run_dir)[-1] >= 5  # the training state was saved on the way out


def private_port(run_dir: Path) -> int:
    conf = (run_dir / "redis" / "redis.conf").read_text()
    return int(re.search(r'^port "(\d+)"$', conf, re.MULTILINE).group(1))


@pytest.mark.slow
def test_a_sweep_runs_each_job_in_its_own_run_directory(tmp_path):
    """`-m` with two values: two whole runs, one after the other in one process, each from
    step 0 in <run_dir>/<job>/ with its own config record, Redis and summary."""
    root = tmp_path / "sweep"
    log = tmp_path / "sweep.log"
    with learner_process(root, log, "-m", "mcts.simulations=4,8") as (proc, _):
        rc = proc.wait(timeout=2 * RUN_TIMEOUT_S)
    output = log.read_text(errors="replace")
    assert rc == 0, output[-4000:]
    assert "resumed from" not in output
    for job, sims in (("0", 4), ("1", 8)):
        run_dir = root / job
        saved = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())
        assert saved["mcts"]["simulations"] == sims and saved["run_dir"] == str(run_dir)
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["resumed"] is False and summary["step"] == 20
        assert summary["model"] == str(run_dir / "checkpoints" / "latest.safetensors")
        assert redis_processes(run_dir) == []
    assert sorted(p.name for p in root.iterdir()) == ["0", "1", "multirun.yaml"]


@pytest.mark.slow  # 66 s on this 2-core machine with another run beside it
def test_smoke_run_with_playout_cap_and_forced_playouts(tmp_path):
    """Both self-play methods on (playout cap randomization with fast searches drawn for no
    loss at all, forced playouts with policy target pruning): the run completes, and about a
    quarter of the positions stored were searched fully."""
    run_dir = tmp_path / "run"
    log = tmp_path / "learner.log"
    switches = (
        "selfplay.playout_cap.enabled=true",
        "selfplay.playout_cap.fast_simulations=2",
        "mcts.forced_playouts_k=2",
        "replay.fast_positions_train_value=false",
    )
    with learner_process(run_dir, log, *switches) as (proc, _):
        rc = proc.wait(timeout=RUN_TIMEOUT_S)
    output = log.read_text(errors="replace")
    assert rc == 0, output[-4000:]
    summary = summary_of(run_dir, output)
    assert summary["step"] == 20 and summary["version"] >= 2
    assert summary["losses"]["policy"] > 0 and summary["losses"]["value"] > 0
    resolved = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())
    assert resolved["selfplay"]["playout_cap"]["enabled"] is True
    assert resolved["mcts"]["forced_playouts_k"] == 2
    shares = [v for _, _, v in read_metrics(run_dir / "metrics.csv")["selfplay/full_search_share"]]
    assert shares and 0.05 < sum(shares) / len(shares) < 0.5  # full_share 0.25 per decision
    assert redis_processes(run_dir) == []


def test_smoke_run_with_gumbel_search_and_reanalysis(tmp_path):
    """Gumbel self-play and reanalysis together: the run completes, its targets' age is
    logged, and part of the trained targets came from reanalysis by newer weights."""
    run_dir = tmp_path / "run"
    log = tmp_path / "learner.log"
    switches = (
        "mcts.root_policy=gumbel",
        "learner.reanalysis.enabled=true",
        "learner.reanalysis.simulations=8",
    )
    with learner_process(run_dir, log, *switches) as (proc, _):
        rc = proc.wait(timeout=RUN_TIMEOUT_S)
    output = log.read_text(errors="replace")
    assert rc == 0, output[-4000:]
    summary = summary_of(run_dir, output)
    assert summary["step"] == 20 and summary["version"] >= 2
    metrics = read_metrics(run_dir / "metrics.csv")
    shares = [v for _, _, v in metrics["replay/reanalysed"]]
    assert shares and max(shares) > 0.1  # a quarter of each batch is searched again
    assert all(v >= 0 for _, _, v in metrics["replay/target_age"])
    assert [v for _, _, v in metrics["replay/reanalysis_skipped"]][-1] == 0
    assert redis_processes(run_dir) == []
