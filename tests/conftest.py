"""Shared test fixtures: the configuration, a private Redis, where the reference data lives.

The configuration is composed by ``learner.config.compose`` exactly as every command line reads
it (``config``); a test shrinks it with overrides. Redis is a real ``redis-server`` per test
(``server``, ``client``). The reference data (the OCA game archive, the ACF openings) sits in
``shared/data`` beside the repository's root, both here and in CI's fresh clone. A test that
needs it and cannot find it is skipped with a message saying where it looked, never silently
passed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from learner.config import compose
from learner.redis_server import EmbeddedRedis, find_redis_server
from learner.replay import connect

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The ``shared/data`` folder beside the repository; skips the test when it is missing."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data not found: looked for the folder {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def shared_file(shared_data: Path) -> Callable[[str], Path]:
    """``shared_file("OCA_2.0.pdn")``: a file of ``shared/data``; skips the test when missing."""

    def find(name: str) -> Path:
        path = shared_data / name
        if not path.is_file():
            pytest.skip(f"reference file not found: looked for {path}")
        return path

    return find


# The run directory of composed test configs: never created (tests that run the loop pass
# their own).
UNUSED_RUN_DIR = "/tmp/checkerzero-tests-unused"


@pytest.fixture(scope="session")
def config() -> Callable[..., DictConfig]:
    """``config("game=small", "mcts.simulations=8")``: the composed, validated configuration."""

    def make(*overrides: str) -> DictConfig:
        return compose([f"run_dir={UNUSED_RUN_DIR}", *overrides])

    return make


# A private redis-server per test (real, never faked) and a client with a fast retry schedule:
# every test that needs Redis uses them.
REDIS_TEST_BACKOFF_S = 0.001


@pytest.fixture
def server(tmp_path: Path):
    try:
        find_redis_server()
    except Exception as e:  # pragma: no cover - the set-up installs it
        pytest.skip(f"redis-server not available: {e}")
    with EmbeddedRedis(tmp_path / "run") as srv:
        yield srv


@pytest.fixture
def client(server):
    c = connect(server.url, server.password, retries=2, backoff_s=REDIS_TEST_BACKOFF_S)
    yield c
    c.close()


def load_script(name: str):
    """scripts/<name>.py as a module (the scripts are not a package)."""
    import importlib.util

    path = REPO_ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
