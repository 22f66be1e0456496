"""A deployed cluster's Ray refuses a client without its token.

The image's entry point (docker/entrypoint.sh) starts or joins Ray only with token authentication,
the token read from a file: these tests run that script for real, with a real `ray start --head`
on this machine, and connect real clients to it, one without the token and one with it. Each test
shuts down only the Ray it started (never `ray stop`, which would end every Ray on the machine).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
START_TIMEOUT_S = 90  # a head starts in 3-9 s here; a loaded CI machine is slower
CLIENT_TIMEOUT_S = 120

# A client: connects to the head, runs one task, prints what happened. Only its environment
# differs between the two cases (with the token file, without any token).
CLIENT = """
import sys, ray
try:
    ray.init(address=sys.argv[1], log_to_driver=False)
    print("RESULT", ray.get(ray.remote(lambda: 6 * 7).remote(), timeout=60))
except Exception as err:  # what a stranger gets: the type names the refusal
    print("REFUSED", type(err).__name__, str(err).splitlines()[0][:200])
    sys.exit(3)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bare_env(home: Path) -> dict[str, str]:
    """This process's environment without any Ray token or auth setting, HOME elsewhere (so
    ~/.ray/auth_token, Ray's default token file, is not found), the venv's tools first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["HOME"] = str(home)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    return env


def entrypoint(args: list[str], env: dict[str, str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        ["sh", str(ENTRYPOINT), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "ray_token"
    path.write_text(os.urandom(16).hex())
    path.chmod(0o600)
    return path


@pytest.fixture
def head(tmp_path: Path, token_file: Path) -> Iterator[tuple[str, Path]]:
    """A Ray head started by the image's entry point (`ray-head`), with its token file; yields
    (address, token file) and ends only this head's processes."""
    home = tmp_path / "home-head"
    home.mkdir()
    # Ray's socket paths must fit AF_UNIX's 107 bytes: a short folder, not pytest's tmp_path.
    temp_dir = Path(tempfile.mkdtemp(prefix="czray-", dir="/tmp"))
    port = free_port()
    env = bare_env(home)
    env.update(
        RAY_AUTH_TOKEN_FILE=str(token_file),
        RAY_PORT=str(port),
        RAY_START_ARGS=f"--num-cpus=1 --temp-dir={temp_dir} --node-ip-address=127.0.0.1",
    )
    proc = entrypoint(["ray-head"], env, start_new_session=True)
    address = f"127.0.0.1:{port}"
    ours: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (temp_dir / "ray_current_cluster").exists():
            if proc.poll() is not None:
                pytest.fail(f"the head did not start:\n{proc.stdout.read()}")
            if time.monotonic() > deadline:
                pytest.fail("the head did not start in time")
            time.sleep(0.5)
        yield address, token_file
    finally:
        ours = started_by(proc)  # before the stop: then each is still the head's descendant
        stop_session(proc)
        end_processes(ours)  # Ray's own processes may have left the session
        shutil.rmtree(temp_dir, ignore_errors=True)


def started_by(proc: subprocess.Popen) -> list[psutil.Process]:
    """``proc`` and every process it started (its descendants now), each known by pid and start
    time, so a pid reused later is never hit."""
    try:
        root = psutil.Process(proc.pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def end_processes(procs: list[psutil.Process], grace_s: float = 3.0) -> None:
    """SIGTERM, then after ``grace_s`` SIGKILL, to those of ``procs`` still running."""
    alive = [p for p in procs if p.is_running()]  # is_running compares start times
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(alive, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=grace_s)


def stop_session(proc: subprocess.Popen) -> None:
    for sig, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_client(address: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CLIENT, address],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S,
    )


def assert_refused(client: subprocess.CompletedProcess) -> None:
    """The client got no task run, and the head said why: its token is missing or wrong."""
    out = client.stdout + client.stderr
    assert client.returncode == 3, out
    assert "RESULT" not in client.stdout
    assert "REFUSED" in client.stdout
    assert "InvalidAuthToken" in out or "AuthenticationError" in out, out


def test_a_client_without_the_token_is_refused_and_one_with_it_runs(head, tmp_path):
    address, token_file = head
    home = tmp_path / "home-client"
    home.mkdir()

    stranger = run_client(address, bare_env(home))
    assert_refused(stranger)

    wrong = bare_env(home)
    wrong_token = tmp_path / "wrong_token"
    wrong_token.write_text("0" * 32)
    wrong.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(wrong_token))
    assert_refused(run_client(address, wrong))

    member = bare_env(home)
    member.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token_file))
    ok = run_client(address, member)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "RESULT 42" in ok.stdout


@pytest.mark.parametrize("role", ["head", "ray-head", "worker"])
def test_every_ray_role_refuses_to_start_without_a_token_file(role, tmp_path):
    env = bare_env(tmp_path)
    env["RAY_HEAD"] = "127.0.0.1:1"  # never reached: the token check comes first
    proc = entrypoint([role], env)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2, out
    assert "RAY_AUTH_TOKEN_FILE" in out and "token" in out
    assert "ray start" not in out.lower() and "Local node IP" not in out


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"RAY_AUTH_MODE": "disabled"}, "only with token authentication"),
        ({"RAY_AUTH_TOKEN": "abc"}, "as a file"),
        ({"RAY_AUTH_TOKEN_FILE": "/nonexistent/token"}, "not a readable file"),
        ({"RAY_AUTH_TOKEN_FILE": "EMPTY"}, "is empty"),
    ],
)
def test_a_bad_token_setting_is_one_clear_line(setting, message, tmp_path):
    env = bare_env(tmp_path)
    env.update(setting)
    if env.get("RAY_AUTH_TOKEN_FILE") == "EMPTY":
        empty = tmp_path / "empty"
        empty.touch()
        env["RAY_AUTH_TOKEN_FILE"] = str(empty)
    proc = entrypoint(["ray-head"], env)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("checkerzero-node: "), out
    assert message in lines[0]


def test_a_local_ray_runs_with_token_auth_and_says_nothing_about_it(tmp_path):
    """`start_ray` turns token authentication on for the Ray it starts (Ray's own default for a
    local Ray) explicitly, so Ray's warning about it does not greet every run."""
    env = bare_env(tmp_path)  # a fresh HOME: Ray makes its token file there
    code = (
        "import ray\n"  # imported first, as the learner does: its config is cached by then
        "from checkerzero.cluster.start import start_ray\n"
        "start_ray('local', num_cpus=1)\n"
        "import os; print('MODE', os.environ['RAY_AUTH_MODE'])\n"
        "print('RESULT', ray.get(ray.remote(lambda: 6 * 7).remote(), timeout=60))\n"
        "ray.shutdown()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "MODE token" in done.stdout and "RESULT 42" in done.stdout
    assert "Token authentication" not in out, out
    # its token is its own, in its processes' environment: Ray's shared file is not made
    assert not (tmp_path / ".ray" / "auth_token").exists()
