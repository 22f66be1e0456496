"""The project as a user installs it: `pip install .` (not editable) into a fresh virtual
environment, run from outside the checkout, completes a smoke run, and a benchmark script runs
against it with no peer implementation installed.

This catches what an editable install hides: a source tree that shadows the installed package
(`No module named 'game._core'`), files missing from the wheel, and Hydra's configs not found once
`conf/` is no longer beside the code (`pkg://checkerzero.conf`). To stay fast the fresh environment
borrows this environment's dependencies through a path entry (its own site-packages come first,
and the borrowed directory's editable-install hook is not run), and the wheel is built without
isolation in a build folder of its own that later runs reuse.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD_DIR = ROOT / "build" / "install-test" / "{wheel_tag}"  # scikit-build-core fills the tag
INSTALL_TIMEOUT_S = 600  # a cold build of the C++ core on 2 busy cores
RUN_TIMEOUT_S = 300  # a smoke run takes ~20 s here; shared cores can make it several times that
SMOKE = (
    "preset=smoke",
    "cluster.address=local",
    "cluster.num_cpus=2",
    "selfplay.actors=1",
    "selfplay.games_in_parallel=4",
    "mcts.simulations=8",
)


def clean_env() -> dict[str, str]:
    """The environment without anything that points Python at the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def test_non_editable_install_runs_a_smoke_run_from_outside_the_checkout(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "checkerzero-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(python), "install", "-q"),
            *("--no-deps", "--no-build-isolation", "-C", f"build-dir={BUILD_DIR}", str(ROOT)),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=INSTALL_TIMEOUT_S,
    )
    assert install.returncode == 0, install.stderr[-3000:]

    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import game, game._core, checkerzero.conf, checkerzero.config as c; "
            "print(game.__file__); print(c.config_path())",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    game_file, conf_path = probe.stdout.split()
    assert Path(game_file).is_relative_to(site), f"game imported from {game_file}, not {site}"
    assert conf_path == "pkg://checkerzero.conf"

    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [str(python), "-m", "learner", *SMOKE, f"run_dir={run_dir}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=RUN_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["step"] == 20 and summary["version"] >= 2
    assert summary["games"] >= 1 and summary["positions"] >= 64  # actors played in the venv
    assert Path(summary["model"]).is_file() and Path(summary["training_state"]).is_file()
    assert (run_dir / ".hydra" / "config.yaml").is_file()
    live = json.loads((run_dir / "games" / "live.json").read_text())  # an actor's game
    assert live["actor"] == 0 and len(live["moves"]) >= live["opening_plies"]

    # A benchmark script runs against the installed wheel with no peer implementation: each
    # peer says it is not installed, and our own figures are still measured.
    engine = ROOT / "benchmarks" / "engine.py"
    no_peers = (
        "import runpy, sys; "
        "sys.modules.update(dict.fromkeys(('pyspiel', 'open_spiel', 'draughts'))); "
        f"sys.path.insert(0, {str(engine.parent)!r}); sys.argv = [{str(engine)!r}, *sys.argv[1:]]; "
        f"runpy.run_path({str(engine)!r}, run_name='__main__')"
    )
    bench = subprocess.run(
        [str(python), "-c", no_peers, "--depth", "5", "--peer-depth", "3", "--plies", "500"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=RUN_TIMEOUT_S,
    )
    assert bench.returncode == 0, bench.stderr[-3000:]
    assert "OpenSpiel: peer not installed" in bench.stdout
    assert "py-draughts: peer not installed" in bench.stdout
    assert re.search(r"checkerzero \(C\+\+ core\)\s+perft\( 5\) =\s+7,361", bench.stdout), (
        bench.stdout
    )
