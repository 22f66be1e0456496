"""Shared test fixtures: the configuration, a private Redis, where the reference data lives.

The configuration is composed by ``checkerzero.config.compose`` exactly as every command line reads
it (``config``); a test shrinks it with overrides. Redis is a real ``redis-server`` per test
(``server``, ``client``). The reference data (the OCA game archive, the ACF openings) ships with
the package in ``game/data``, so the tests that read it run on a fresh clone too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from checkerzero.config import compose
from checkerzero.store.redis_server import EmbeddedRedis, find_redis_server
from checkerzero.store.replay import connect

REPO_ROOT = Path(__file__).resolve().parents[1]


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
