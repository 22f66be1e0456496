"""Shared test fixtures: where the project's reference data lives.

The reference data (the OCA game archive, the ACF openings) sits in ``shared/data`` beside the
repository's root, both here and in CI's fresh clone. A test that needs it and cannot find it is
skipped with a message saying where it looked, never silently passed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

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


# A private redis-server per test (real, never faked) and a client with a fast retry schedule:
# the replay store's and the mirror's tests share them.
REDIS_TEST_BACKOFF_S = 0.001


@pytest.fixture
def server(tmp_path: Path):
    from learner.redis_server import EmbeddedRedis

    with EmbeddedRedis(tmp_path / "run") as srv:
        yield srv


@pytest.fixture
def client(server):
    from learner.replay import connect

    c = connect(server.url, server.password, retries=2, backoff_s=REDIS_TEST_BACKOFF_S)
    yield c
    c.close()
