"""A real play server for tests: folders with a run and networks, and the server as a process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from checkerzero.metrics import MetricsLogger
from checkerzero.run_files import LIVE_FILE
from checkerzero.store.live import encode, make_live
from game import Position
from game.pdn import game_from_position, write_pdn

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "game" / "data" / "laptop-60min.safetensors"
STARTUP_S = 120  # a cold start imports torch and reads the opening deck on a busy machine
RATINGS = """player,elo,lower,upper,games,points,anchored
random,0.0,0.0,0.0,40,3,True
minimax:2,610.0,560.0,660.0,40,20,False
v5,700.5,640.0,760.0,8,5,False
"""


def make_folders(root: Path) -> tuple[Path, Path, Path]:
    """runs/ with one stopped run, models/ with networks (and traps), and a file outside both."""
    runs, models = root / "runs", root / "models"
    run = runs / "2026-01-01_00-00-00"
    (run / "checkpoints").mkdir(parents=True)
    (run / "games").mkdir()
    (run / "eval").mkdir()
    (models / "sub").mkdir(parents=True)
    log = MetricsLogger(run, wandb_cfg=None, run_name="test")
    log.log({"selfplay/games": 10, "selfplay/positions_per_s": 50.0}, 0)
    log.log({"learner/weights_version": 5, "learner/loss_total": 2.5, "selfplay/games": 40}, 100)
    log.log({"eval/elo": 700.5, "eval/elo_lower": 640.0, "eval/elo_upper": 760.0}, 100)
    log.log({"eval/version": 5}, 100)
    log._csv_file.close()  # no plots: the run folder holds exactly what a test expects
    (run / "eval" / "ratings.csv").write_text(RATINGS)
    hour_ago = time.time() - 3600
    os.utime(run / "metrics.csv", (hour_ago, hour_ago))  # a run that stopped an hour ago
    live = MetricsLogger(runs / "2026-01-02_00-00-00", wandb_cfg=None, run_name="live")
    live.log({"selfplay/games": 3}, 7)  # written just now: a running run
    live._csv_file.close()
    done = runs / "2025-12-31_00-00-00"
    done.mkdir()
    (done / "summary.json").write_text('{"steps": 9, "weights_version": 1}\n')  # has ended
    (runs / "not-a-run").mkdir()  # no metrics.csv, no summary.json: not listed
    pos = Position()
    moves = ["11-15", "23-19", "8-11", "22-17"]
    game = game_from_position(pos, moves, "*", {"Event": "checkerzero self-play"})
    newest = game_from_position(pos, moves[:2], "*", {"Event": "checkerzero self-play"})
    (run / "games" / "selfplay.pdn").write_text(write_pdn([game, newest]))
    shutil.copy(SHIPPED, run / "checkpoints" / "latest.safetensors")
    shutil.copy(SHIPPED, models / "net.safetensors")
    shutil.copy(SHIPPED, root / "secret.safetensors")  # outside every root
    (root / "secret.pdn").write_text(write_pdn([game]))
    os.symlink(root / "secret.safetensors", models / "escape.safetensors")
    os.symlink(root / "secret.pdn", run / "games" / "escape.pdn")
    # A pickle wearing the checkpoint suffix: must be refused by the safetensors loader.
    (models / "pickled.safetensors").write_bytes(b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00.")
    (models / "net.pt").write_bytes(b"not loaded")
    # Live self-play games: one in the stopped run from moments ago (a server that shows games
    # up to a day old serves it), a two-day-old one in the running run, a link out of the run.
    live = make_live(
        actor=3,
        version=5,
        opening="ACF 1",
        fen=pos.fen(),
        moves=moves,
        opening_plies=3,
        updated=time.time(),
    )
    (run / LIVE_FILE).write_bytes(encode(live))
    stale = runs / "2026-01-02_00-00-00" / LIVE_FILE
    stale.parent.mkdir()
    stale.write_bytes(encode(live | {"updated": time.time() - 2 * 86400}))
    (done / "games").mkdir()
    (root / "secret.json").write_bytes(encode(live))
    os.symlink(root / "secret.json", done / LIVE_FILE)
    return runs, models, root / "secret.safetensors"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``python -m play`` as a subprocess on a free loopback port."""

    def __init__(self, runs: Path, models: Path, log: Path, *overrides: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "play", "--port", str(self.port), "--runs", str(runs)]
        args += ["--models", str(models), "--player", "net.safetensors:sims=16"]
        args += ["--network", "net.safetensors:sims=16"]
        args += ["--log-level", "warning"]
        for item in ("torch_threads=1", *overrides):
            args += ["--set", item]
        self.log_path = log
        self._log = log.open("w")
        self.proc = subprocess.Popen(args, cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + STARTUP_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited: {log.read_text()[-2000:]}")
            try:
                self.get("/api/status")
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the server did not answer") from None
                time.sleep(0.2)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                status, raw, kind = r.status, r.read(), r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            status, raw, kind = e.code, e.read(), e.headers.get("Content-Type", "")
        return status, json.loads(raw) if "json" in kind else raw.decode()

    def get(self, path: str) -> Any:
        status, body = self.request("GET", path)
        assert status == 200, (path, status, body)
        return body

    def post(self, path: str, body: Any) -> Any:
        status, answer = self.request("POST", path, body)
        assert status == 200, (path, status, answer)
        return answer

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` with its size and modification time (links not followed)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return out
