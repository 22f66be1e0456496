"""The image (docker/Dockerfile) as a cluster runs it: a Redis, a head and two workers, each its
own container on host networking, through a smoke run with self-play actors on every node.

Slow (it builds an image). It needs a docker daemon and a base image made from Debian packages
(`docker/make-debian-base.sh`; only PyPI and Debian are reachable where it runs, so the official
Python image cannot be pulled); it is skipped, saying why, when either is missing. The build
context is a copy of this checkout's files (tracked and untracked, not ignored) plus, when this
machine has them, a local CPU PyTorch wheel and its extra certificate authorities.

Environment: CHECKERZERO_TEST_BASE_IMAGE (default checkerzero-base:bookworm),
CHECKERZERO_TEST_WHEELS (a folder of wheels offered to the build, default /opt/wheels).
Containers are removed by name whatever happens; nothing else on the machine is touched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMAGE_UID = 10001  # docker/Dockerfile's USER
BASE_IMAGE = os.environ.get("CHECKERZERO_TEST_BASE_IMAGE", "checkerzero-base:bookworm")
WHEELS = Path(os.environ.get("CHECKERZERO_TEST_WHEELS", "/opt/wheels"))
CA_DIR = Path("/usr/local/share/ca-certificates")
BUILD_TIMEOUT_S = 3600  # a cold build on 2 busy cores: apt, the C++ core, PyTorch and Ray
RUN_TIMEOUT_S = 600
# pytest-timeout's limit (pyproject.toml: 900 s) counts a test's fixture setup too, and the first
# test here builds the image in its setup, for up to BUILD_TIMEOUT_S: each test of this module
# gets the build's limit plus the cluster run's, and 900 s more for the docker commands around
# them (each up to 120 s: starting the containers, their logs, removing them).
MODULE_TIMEOUT_S = BUILD_TIMEOUT_S + RUN_TIMEOUT_S + 900
pytestmark = [pytest.mark.slow, pytest.mark.timeout(MODULE_TIMEOUT_S)]
WORKERS = 2
# The smoke preset, run long enough for the workers to join: the pool places actors on each
# node as it arrives. One actor per node, tiny games.
HEAD_OVERRIDES = (
    "preset=smoke",
    "learner.max_steps=0",
    "learner.time_limit_min=2",
    "selfplay.games_in_parallel=2",
    "mcts.simulations=8",
    "game.max_plies=60",
    "logging.wandb.mode=disabled",
    "replay.url=${oc.env:CHECKERZERO_REDIS_URL}",  # the smoke preset replaces the cluster one
)


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    env = os.environ | {"DOCKER_BUILDKIT": "0"}  # the classic builder: no buildx plugin needed
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=check, env=env
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_ip() -> str:
    """The machine's non-loopback address (what Ray uses for its nodes on host networking)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("10.255.255.255", 1))  # no packet is sent; it picks the outgoing interface
        return s.getsockname()[0]


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> str:
    if shutil.which("docker") is None or docker("info", check=False).returncode != 0:
        pytest.skip("no docker daemon answers `docker info`")
    if docker("image", "inspect", BASE_IMAGE, check=False).returncode != 0:
        pytest.skip(f"base image {BASE_IMAGE} missing: make it with docker/make-debian-base.sh")
    context = tmp_path_factory.mktemp("context")
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        if (ROOT / name).is_file():
            (context / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, context / name)
    args = ["--build-arg", f"BASE_IMAGE={BASE_IMAGE}"]
    cpu_wheels = sorted(WHEELS.glob("torch-*+cpu-cp311-*.whl")) if WHEELS.is_dir() else []
    if cpu_wheels:
        shutil.copy2(cpu_wheels[-1], context / "docker" / "wheels")
        version = cpu_wheels[-1].name.split("-")[1]
        args += ["--build-arg", "TORCH_INDEX=none"]
        args += ["--build-arg", f"TORCH_REQUIREMENT=torch=={version}"]
    for cert in CA_DIR.glob("*.crt") if CA_DIR.is_dir() else []:
        shutil.copy2(cert, context / "docker" / "ca-certificates")
    tag = "checkerzero:test-images"
    build = docker(
        *("build", "-f", "docker/Dockerfile", "--target", "head", "-t", tag, *args, str(context)),
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    return tag


@pytest.fixture
def containers() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        docker("rm", "-f", "-v", name, check=False)


def test_image_has_the_installed_package_and_no_source(image):
    probe = docker(
        *("run", "--rm", image, "python", "-c"),
        "import game, game._core, checkerzero.config as c, ray, sys, os; "
        "print(game.__file__, c.config_path(), ray.__version__, sys.version.split()[0]); "
        "print(sorted(os.listdir('.')))",
    )
    first, listing = probe.stdout.strip().splitlines()
    game_file, conf, ray_version, _python = first.split()
    assert game_file.startswith("/opt/venv/") and conf == "pkg://checkerzero.conf"
    assert ray_version == "2.60.0"
    assert listing == "[]"  # the working directory holds no source tree to shadow the package
    redis = docker("run", "--rm", image, "sh", "-c", "command -v redis-server")
    assert redis.stdout.strip()


def test_head_and_two_workers_run_a_smoke_run_with_actors_on_every_node(
    image, containers, tmp_path
):
    tag = uuid.uuid4().hex[:8]
    secret = tmp_path / "redis_password"
    secret.write_text(uuid.uuid4().hex + "\n")
    secret.chmod(0o644)  # read inside the container by its own user
    token = tmp_path / "ray_token"  # Ray's token authentication: the head and workers share it
    token.write_text(uuid.uuid4().hex)
    token.chmod(0o644)
    runs = tmp_path / "runs"
    runs.mkdir()
    os.chown(runs, IMAGE_UID, IMAGE_UID)  # the containers run as the image's unprivileged user
    ray_auth = ("-e", "RAY_AUTH_TOKEN_FILE=/run/secrets/ray_token")
    ray_auth += ("-v", f"{token}:/run/secrets/ray_token:ro")
    redis_port, ray_port = free_port(), free_port()
    ip = host_ip()
    host = ("--network", "host")

    def run(name: str, *args: str) -> None:
        containers.append(f"cz-{name}-{tag}")
        docker("run", "-d", "--name", containers[-1], *host, *args)

    run(
        "redis",
        *("-e", "REDIS_PASSWORD_FILE=/run/secrets/redis_password"),
        *("-e", f"REDIS_PORT={redis_port}", "-e", f"REDIS_BIND={ip}", "-e", "REDIS_DATA_DIR=/data"),
        *("-v", f"{secret}:/run/secrets/redis_password:ro", image, "redis"),
    )
    ports = [free_port() for _ in range(WORKERS + 1)]  # one dashboard agent per node and host
    run(
        "head",
        *("-e", f"RAY_PORT={ray_port}", "-e", f"CHECKERZERO_REDIS_URL=redis://{ip}:{redis_port}/0"),
        *("-e", "REDIS_PASSWORD_FILE=/run/secrets/redis_password", "--shm-size=512m"),
        *ray_auth,
        # Two CPUs: one kept for the learner, one for an actor.
        *("-e", f"RAY_START_ARGS=--num-cpus=2 --dashboard-agent-listen-port={ports[0]}"),
        *("-v", f"{runs}:/var/lib/checkerzero/runs"),  # the run directory, read here after
        *("-v", f"{secret}:/run/secrets/redis_password:ro", image, "head", *HEAD_OVERRIDES),
    )
    for i in range(WORKERS):
        run(
            f"worker{i}",
            # A worker that starts before the head answers exits; Docker starts it again (as
            # compose's restart policy does) and the pool gives it actors when it joins.
            *("-e", f"RAY_HEAD={ip}:{ray_port}", "--shm-size=512m", "--restart=on-failure"),
            *("-e", f"RAY_START_ARGS=--num-cpus=1 --dashboard-agent-listen-port={ports[i + 1]}"),
            *ray_auth,
            *(image, "worker"),
        )
    head = containers[1]
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while docker("inspect", "-f", "{{.State.Running}}", head).stdout.strip() == "true":
        assert time.monotonic() < deadline, "the head's run did not finish in time"
        time.sleep(2)
    logs = docker("logs", head)
    output = logs.stdout + logs.stderr
    state = docker("inspect", "-f", "{{.State.ExitCode}}", head).stdout.strip()
    assert state == "0", output[-6000:]
    summary = json.loads((runs / "cluster" / "summary.json").read_text())
    assert summary["games"] >= WORKERS + 1
    counts = [
        (int(a), int(n)) for a, n in re.findall(r"(\d+) self-play actors? on (\d+) node", output)
    ]
    assert (WORKERS + 1, WORKERS + 1) in counts, (counts, output[-6000:])
    assert summary["selfplay"]["nodes_with_games"] == WORKERS + 1, (summary, output[-6000:])
    assert secret.read_text().strip() not in output  # the password is never printed
    assert token.read_text().strip() not in output  # nor Ray's token
