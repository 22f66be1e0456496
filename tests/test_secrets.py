"""Secrets given as files (NAME_FILE), the way every deploy path hands them over, and a password
typed into a Redis URL on the command line: none reaches W&B."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from checkerzero.cluster.preflight import PreflightError, check_environment
from checkerzero.config import compose
from checkerzero.metrics import MetricsLogger
from checkerzero.secrets import SecretError, export_wandb_key, read_secret


def test_a_secret_file_wins_over_the_variable_and_loses_its_newline(tmp_path):
    path = tmp_path / "pw"
    path.write_text("from-file\n")
    env = {"REDIS_PASSWORD": "from-env", "REDIS_PASSWORD_FILE": str(path)}
    assert read_secret("REDIS_PASSWORD", env) == "from-file"
    assert read_secret("REDIS_PASSWORD", {"REDIS_PASSWORD": "from-env"}) == "from-env"
    assert read_secret("REDIS_PASSWORD", {}) is None


@pytest.mark.parametrize(
    "content, message",
    [(None, "No such file"), ("", "is empty"), ("\n", "is empty"), ("x" * 5000, "not a secret")],
)
def test_a_bad_secret_file_is_one_line_naming_it(tmp_path, content, message):
    path = tmp_path / "pw"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SecretError, match=message) as err:
        read_secret("REDIS_PASSWORD", {"REDIS_PASSWORD_FILE": str(path)})
    assert f"REDIS_PASSWORD_FILE={path}" in str(err.value) and "\n" not in str(err.value)


def test_a_bad_password_file_stops_the_run_before_anything_starts(tmp_path):
    cfg = compose(["preset=smoke"])
    env = {"REDIS_PASSWORD_FILE": str(tmp_path / "missing")}
    with pytest.raises(PreflightError, match="REDIS_PASSWORD_FILE"):
        check_environment(cfg, env)


def test_the_wandb_key_file_is_handed_to_wandb(tmp_path):
    key = tmp_path / "key"
    key.write_text("k" * 40 + "\n")
    env = {"WANDB_API_KEY_FILE": str(key)}
    export_wandb_key(env)
    assert env["WANDB_API_KEY"] == "k" * 40
    empty = tmp_path / "empty"
    empty.touch()
    env = {"WANDB_API_KEY_FILE": str(empty)}  # compose's file when logging offline
    export_wandb_key(env)
    assert "WANDB_API_KEY" not in env
    online = compose(["preset=smoke", "logging.wandb.mode=online"])
    with pytest.raises(PreflightError, match="WANDB_API_KEY"):
        check_environment(online, env | {"NETRC": str(tmp_path / "no-netrc")})


def test_a_password_on_the_command_line_never_reaches_wandb(tmp_path, monkeypatch):
    for var in ("WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    argv = [
        "learner",
        "replay.url='redis://10.0.0.5:6379/0?password=s3cretQ'",
        "logging.wandb.url=redis://:s3cretU@10.0.0.5/1",
    ]
    monkeypatch.setattr(sys, "argv", list(argv))
    config = {"replay": {"url": "redis://u:s3cretC@h/0", "other": "redis://h/0?password=s3cretD"}}
    run_dir = tmp_path / "run"
    log = MetricsLogger(
        run_dir, wandb_cfg={"mode": "offline", "project": "t"}, run_name="r1", config=config
    )
    assert log._wandb is not None, "W&B did not start offline"
    log.log({"learner/loss_total": 1.0}, step=1)
    log.close()
    assert sys.argv == argv  # the command line itself is left as it was
    written = b"".join(p.read_bytes() for p in Path(run_dir).rglob("*") if p.is_file())
    assert b"redis://10.0.0.5:6379/0?password=***" in written  # the URL, masked
    for secret in (b"s3cretQ", b"s3cretU", b"s3cretC", b"s3cretD"):
        assert secret not in written, secret
