"""Start-up checks that depend on where a run starts: W&B key, CUDA build, a replay store every
machine of the cluster reaches. Each fails with one line before anything is spawned."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from checkerzero.cluster.preflight import (
    PreflightError,
    check_cluster,
    check_environment,
    is_loopback_url,
    wandb_key_available,
)
from checkerzero.config import SOURCE_CONF
from checkerzero.metrics import redact_urls

ROOT = Path(__file__).resolve().parents[1]


def composed(*overrides: str):
    with initialize_config_dir(config_dir=str(SOURCE_CONF), version_base="1.3"):
        return compose(config_name="config", overrides=["run_dir=/tmp/x", *overrides])


def node(ip: str, cpus: float = 2, gpus: float = 0, alive: bool = True) -> dict:
    resources = {"CPU": cpus} | ({"GPU": gpus} if gpus else {})
    return {"NodeManagerAddress": ip, "Alive": alive, "Resources": resources}


def no_netrc(tmp_path: Path) -> dict[str, str]:
    return {"NETRC": str(tmp_path / "absent-netrc")}


def test_wandb_online_without_a_key_fails_naming_the_way_out(tmp_path):
    cfg = composed("logging.wandb.mode=online")
    with pytest.raises(PreflightError, match=r"logging\.wandb\.mode=online.*WANDB_API_KEY"):
        check_environment(cfg, no_netrc(tmp_path))
    check_environment(cfg, no_netrc(tmp_path) | {"WANDB_API_KEY": "k" * 40})
    check_environment(composed("logging.wandb.mode=offline"), no_netrc(tmp_path))


def test_wandb_key_from_netrc_counts(tmp_path):
    netrc = tmp_path / "netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password abc123\n")
    netrc.chmod(0o600)
    assert wandb_key_available({"NETRC": str(netrc)})
    other = {"NETRC": str(netrc), "WANDB_BASE_URL": "https://wandb.example.org"}
    assert not wandb_key_available(other)  # a key for another host is not a key for this one
    assert not wandb_key_available(no_netrc(tmp_path))


@pytest.mark.skipif(torch.version.cuda is not None, reason="this PyTorch is a CUDA build")
def test_cuda_learner_on_a_cpu_only_build_fails(tmp_path):
    with pytest.raises(PreflightError, match=r"learner\.device=cuda.*CPU-only build"):
        check_environment(composed("learner.device=cuda", "preset=smoke"), no_netrc(tmp_path))
    check_environment(composed("learner.device=auto", "preset=smoke"), no_netrc(tmp_path))


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("redis://127.0.0.1:6379/0", True),
        ("redis://127.0.0.2:6379/0", True),
        ("redis://localhost:6379/0", True),
        ("redis://:secret@[::1]:6379/0", True),
        ("unix:///tmp/redis.sock", True),
        ("redis://10.1.2.3:6379/0", False),
        ("redis://:secret@192.168.1.20/0", False),
        ("redis://redis.invalid:6379/0", False),  # unresolvable: the connection reports it
    ],
)
def test_loopback_urls_are_recognised(url, loopback):
    assert is_loopback_url(url) is loopback


def test_a_multi_machine_cluster_refuses_a_loopback_replay_store():
    cfg = composed("preset=cluster", "logging.wandb.mode=disabled")
    two_machines = [node("10.0.0.1"), node("10.0.0.2"), node("10.0.0.3", alive=False)]
    with pytest.raises(PreflightError, match=r"spans 2 machines.*private redis-server"):
        check_cluster(cfg, None, two_machines)
    with pytest.raises(PreflightError, match=r"CHECKERZERO_REDIS_URL"):
        check_cluster(cfg, "redis://localhost:6379/0", two_machines)
    check_cluster(cfg, "redis://10.0.0.1:6379/0", two_machines)
    # Several Ray nodes on one machine (a simulated cluster, containers on host networking)
    # reach its loopback; a dead node elsewhere does not count.
    one_machine = [node("10.0.0.1"), node("10.0.0.1"), node("10.0.0.9", alive=False)]
    check_cluster(cfg, None, one_machine)


def test_cuda_selfplay_needs_a_gpu_somewhere():
    cfg = composed("selfplay.device=cuda")
    with pytest.raises(PreflightError, match=r"selfplay\.device=cuda.*no node"):
        check_cluster(cfg, None, [node("10.0.0.1")])
    check_cluster(cfg, None, [node("10.0.0.1"), node("10.0.0.1", gpus=1)])


def test_a_cuda_evaluator_needs_a_gpu_somewhere():
    cfg = composed("evaluation.device=cuda")
    with pytest.raises(PreflightError, match=r"evaluation\.device=cuda.*no node"):
        check_cluster(cfg, None, [node("10.0.0.1")])
    check_cluster(cfg, None, [node("10.0.0.1", gpus=1)])
    check_cluster(composed("evaluation.device=cuda", "evaluation.enabled=false"), None, [])


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("selfplay.device=tpu", "selfplay.device"),
        ("selfplay.gpus_per_actor=0", "gpus_per_actor"),
        ("evaluation.device=tpu", "evaluation.device"),
        ("evaluation.gpus=1.5", "evaluation.gpus"),
    ],
)
def test_bad_selfplay_device_keys_fail_naming_the_key(tmp_path, override, key):
    with pytest.raises(PreflightError, match=key):
        check_environment(composed(override, "preset=smoke"), no_netrc(tmp_path))


def test_wandb_config_never_holds_a_redis_password():
    config = {
        "replay": {"url": "redis://user:s3cret@redis.example:6379/0", "namespace": "cz"},
        "ladder": ["minimax:1", "redis://:other-secret@host/1"],
        "seed": 3,
    }
    shown = redact_urls(config)
    assert "s3cret" not in repr(shown) and "other-secret" not in repr(shown)
    assert shown["replay"]["url"] == "redis://user:***@redis.example:6379/0"
    assert shown["ladder"] == ["minimax:1", "redis://:***@host/1"]
    assert shown["seed"] == 3 and shown["replay"]["namespace"] == "cz"


def test_cluster_preset_without_a_wandb_key_stops_before_anything_starts(tmp_path):
    """`python -m learner preset=cluster` with W&B online and no key: one line, exit 2, no run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env |= {"HOME": str(tmp_path), "NETRC": str(tmp_path / "absent-netrc")}
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "learner", "preset=cluster", f"run_dir={run_dir}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: logging.wandb.mode=online")
    assert not (run_dir / "checkpoints").exists() and not (run_dir / "redis").exists()
