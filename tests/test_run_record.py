"""The run directory's config record: resume with the saved config, sweeps, early rejection.

The command-line tests run the real `python -m learner` (Hydra and all); where a test needs only
what happens before the loop starts, the loop itself (`learner.start.run`) is swapped for a line
that prints the config it was given, so no Redis or Ray is started.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from hydra import compose as hydra_compose
from hydra import initialize_config_dir

from checkerzero.config import SOURCE_CONF, ConfigError, validate
from learner.run_record import RESUMABLE, prepare, resumable, write_record

ROOT = Path(__file__).resolve().parents[1]
# `python -m learner` with the training loop (learner.start, which brings torch and Ray) replaced
# by a module whose run() prints one line naming what it would run.
DRIVER = (
    "import sys, types; fake = types.ModuleType('learner.start'); "
    "fake.run = lambda cfg: print('RUN', cfg.run_dir, cfg.model.channels, "
    "cfg.learner.max_steps, cfg.mcts.simulations, flush=True); "
    "sys.modules['learner.start'] = fake; "
    "from learner.__main__ import main; main()"
)


def composed(*overrides: str):
    """The command line's composition; values are checked by `prepare` (or by the test)."""
    with initialize_config_dir(config_dir=str(SOURCE_CONF), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def new_run(run_dir: Path, *overrides: str) -> None:
    overrides = (*overrides, f"run_dir={run_dir}")
    write_record(prepare(composed(*overrides), overrides))


def learner(*args: str, driver: bool = True) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", DRIVER] if driver else [sys.executable, "-m", "learner"]
    return subprocess.run([*command, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_resume_runs_with_the_saved_config_not_the_current_defaults(tmp_path):
    run_dir = tmp_path / "run"
    new_run(run_dir, "preset=smoke", "model.channels=8")
    record = run_dir / ".hydra"
    original = {p.name: p.read_bytes() for p in record.iterdir()}
    assert yaml.safe_load(original["overrides.yaml"]) == [
        "preset=smoke",
        "model.channels=8",
        f"run_dir={run_dir}",
    ]

    # Resumed with no overrides but the directory and a new step limit: the smoke network
    # (8 channels, not the default 32), the smoke batch, the new limit.
    overrides = (f"run_dir={run_dir}", "learner.max_steps=7")
    prepared = prepare(composed(*overrides), overrides)
    assert prepared.resumed
    assert prepared.cfg.model.channels == 8 and prepared.cfg.model.blocks == 1
    assert prepared.cfg.learner.batch_size == 32
    assert prepared.cfg.learner.max_steps == 7
    assert prepared.cfg.run_dir == str(run_dir)

    # Its record goes beside the original, which stays byte for byte.
    written = write_record(prepared)
    assert written.parent == record and written.name.startswith("resume-")
    assert yaml.safe_load((written / "config.yaml").read_text())["learner"]["max_steps"] == 7
    assert yaml.safe_load((written / "overrides.yaml").read_text()) == list(overrides)
    assert {p.name: p.read_bytes() for p in record.iterdir() if p.is_file()} == original


def test_keys_added_since_the_run_started_take_todays_defaults(tmp_path):
    run_dir = tmp_path / "run"
    new_run(run_dir, "preset=smoke")
    saved = run_dir / ".hydra" / "config.yaml"
    old = yaml.safe_load(saved.read_text())
    del old["learner"]["keep_weights"]  # as a run started before the key existed
    saved.write_text(yaml.safe_dump(old))
    overrides = (f"run_dir={run_dir}",)
    prepared = prepare(composed(*overrides), overrides)
    assert prepared.filled == ("learner.keep_weights",)
    assert prepared.cfg.learner.keep_weights == 20 and prepared.cfg.learner.batch_size == 32


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("model.channels=64", "model.channels"),
        ("preset=laptop", "preset"),
        ("replay.sample_ratio=2.0", "replay.sample_ratio"),
        ("seed=3", "seed"),
    ],
)
def test_resume_refuses_to_change_the_experiment(tmp_path, override, key):
    run_dir = tmp_path / "run"
    new_run(run_dir, "preset=smoke")
    overrides = (f"run_dir={run_dir}", override)
    with pytest.raises(ConfigError, match=rf"cannot change {key} when resuming"):
        prepare(composed(*overrides), overrides)


def test_resume_accepts_the_runs_own_overrides_repeated(tmp_path):
    run_dir = tmp_path / "run"
    new_run(run_dir, "preset=smoke", "mcts.simulations=8")
    # The original command again (a sweep re-run), and a saved value written another way.
    overrides = ("preset=smoke", "mcts.simulations=8", f"run_dir={run_dir}", "seed=0")
    prepared = prepare(composed(*overrides), overrides)
    assert prepared.resumed and prepared.cfg.mcts.simulations == 8


def test_resumable_keys_are_explicit():
    assert resumable("learner.time_limit_min") and resumable("logging.progress_every_s")
    assert resumable("selfplay.actors") and resumable("cluster.address")
    assert not resumable("model.channels") and not resumable("learner.batch_size")
    assert not resumable("logging") and "learner.max_steps" in RESUMABLE


def test_sweep_gives_each_job_its_own_run_directory_and_resumes_them(tmp_path):
    root = tmp_path / "sweep"
    done = learner("-m", "preset=smoke", f"run_dir={root}", "mcts.simulations=5,6")
    assert done.returncode == 0, done.stderr
    runs = sorted(line.split()[1:] for line in done.stdout.splitlines() if line.startswith("RUN"))
    assert runs == [[str(root / "0"), "16", "20", "5"], [str(root / "1"), "16", "20", "6"]]
    for job, sims in (("0", 5), ("1", 6)):
        saved = yaml.safe_load((root / job / ".hydra" / "config.yaml").read_text())
        assert saved["mcts"]["simulations"] == sims and saved["run_dir"] == str(root / job)
    assert (root / "multirun.yaml").is_file()

    # The same sweep again, with a longer limit: each job resumes its own directory (what the
    # command line's job 1 is given, checked without starting Hydra's launcher again).
    overrides = ("preset=smoke", f"run_dir={root}", "mcts.simulations=6", "learner.max_steps=30")
    prepared = prepare(composed(*overrides), overrides, job_num=1)
    assert prepared.resumed and prepared.run_dir == root / "1"
    assert (prepared.cfg.mcts.simulations, prepared.cfg.learner.max_steps) == (6, 30)
    # A sweep value that differs from the job's saved one is a change of the experiment.
    overrides = ("preset=smoke", f"run_dir={root}", "mcts.simulations=7")
    with pytest.raises(ConfigError, match=r"cannot change mcts\.simulations"):
        prepare(composed(*overrides), overrides, job_num=1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch has CUDA")
def test_a_device_this_torch_lacks_is_rejected_before_anything_starts(tmp_path):
    for key, spec in (("learner.device", "cuda"), ("evaluation.device", "cuda:0")):
        with pytest.raises(ConfigError, match=rf"{key}='{spec}'.*no CUDA device"):
            validate(composed(f"{key}={spec}", "run_dir=/tmp/x"))
    validate(composed("learner.device=cpu", "evaluation.device=auto", "run_dir=/tmp/x"))
    with pytest.raises(ConfigError, match=r"learner\.device='cpu:1'"):
        validate(composed("learner.device=cpu:1", "run_dir=/tmp/x"))

    # The real command line: exit 2, one line naming the key, and no run directory at all.
    run_dir = tmp_path / "run"
    done = learner("preset=smoke", f"run_dir={run_dir}", "learner.device=cuda", driver=False)
    assert done.returncode == 2
    assert done.stderr.startswith("error: bad config value learner.device='cuda'")
    assert not run_dir.exists() and list(tmp_path.iterdir()) == []


def test_help_says_what_the_program_is():
    done = learner("--help", driver=False)
    assert done.returncode == 0
    assert done.stdout.startswith("python -m learner: trains a checkers network by self-play")
    assert (
        "run_dir=runs/<run>" in done.stdout
        and "preset: cluster, gpu, laptop, nneval, smoke" in (done.stdout)
    )
    assert "powered by Hydra" not in done.stdout and "__main__" not in done.stdout


def test_no_redis_password_reaches_the_run_record(tmp_path, monkeypatch):
    # From the environment (the cluster preset's way): recorded as the interpolation, so a
    # resume reads the environment again.
    monkeypatch.setenv("CHECKERZERO_REDIS_URL", "redis://:s3cret@10.0.0.5:6379/0")
    env_run = tmp_path / "env"
    new_run(env_run, "preset=cluster")
    text = (env_run / ".hydra" / "config.yaml").read_text()
    assert "s3cret" not in text
    assert "${oc.env:CHECKERZERO_REDIS_URL" in text
    overrides = (f"run_dir={env_run}",)
    prepared = prepare(composed(*overrides), overrides)
    assert prepared.cfg.replay.url == "redis://:s3cret@10.0.0.5:6379/0"

    # On the command line: masked in the config and in the overrides record.
    cli_run = tmp_path / "cli"
    new_run(cli_run, "replay.url=redis://:s3cret@127.0.0.1:6390/0")
    for name in ("config.yaml", "overrides.yaml"):
        recorded = (cli_run / ".hydra" / name).read_text()
        assert "s3cret" not in recorded and "redis://:***@127.0.0.1:6390/0" in recorded


@pytest.mark.parametrize(
    "url",
    [
        "redis://:s3cret@127.0.0.1:6390/0",
        "redis://user:s3cret@127.0.0.1:6390/0",
        "'redis://127.0.0.1:6390/0?password=s3cret'",  # redis-py reads ?password= too
        "'redis://127.0.0.1:6390/0?db=0&password=s3cret&socket_timeout=5'",
    ],
)
def test_the_command_line_record_masks_a_redis_password(tmp_path, url):
    run_dir = tmp_path / "run"
    out = learner(f"run_dir={run_dir}", f"replay.url={url}")
    assert out.returncode == 0, out.stderr
    files = [p for p in (run_dir / ".hydra").iterdir() if p.is_file()]
    assert {p.name for p in files} == {"config.yaml", "overrides.yaml", "hydra.yaml"}
    for path in files:
        assert "s3cret" not in path.read_text(), path.name
        assert "***" in path.read_text(), path.name  # the URL is there, masked
        assert path.stat().st_mode & 0o777 == 0o600, path.name  # the run's owner's alone
    assert "s3cret" not in out.stdout + out.stderr


def test_an_empty_run_dir_is_refused_and_nothing_lands_in_the_current_folder(tmp_path):
    """`run_dir=` is Path(""), the current folder: refused before anything is written."""
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, "run_dir="],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: run_dir: '' names no folder; name one (the default is runs/<time>)"
    ]
    assert "RUN" not in done.stdout and list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError, match="names no folder"):
        prepare(composed("run_dir=  "), ["run_dir=  "])


def test_a_folder_that_is_not_a_run_is_not_taken_for_a_new_one(tmp_path):
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "thesis.tex").write_text("mine\n")
    done = learner(f"run_dir={folder}")
    assert done.returncode == 2 and "RUN" not in done.stdout
    assert f"run_dir: {folder} is a folder with other files in it, not a run" in done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["thesis.tex"]
    empty = tmp_path / "empty"
    empty.mkdir()  # an empty folder made for the run is fine
    done = learner(f"run_dir={empty}")
    assert done.returncode == 0 and f"RUN {empty}" in done.stdout, done.stderr
