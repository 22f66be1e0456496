"""What a run starts beside the learner before it trains: its Redis (a configured one, or a
private ``redis-server`` under the run directory) and the endgame database the config uses."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from omegaconf import DictConfig

from checkerzero.secrets import read_secret
from checkerzero.store.redis_server import EmbeddedRedis, RedisServerError
from game.egdb.build import ensure_database

logger = logging.getLogger(__name__)


@contextmanager
def redis_for_run(
    cfg: DictConfig,
    run_dir: Path,
    on_lost: Callable[[RedisServerError], None] | None = None,
) -> Iterator[tuple[str, str | None]]:
    """(url, password) of the run's Redis; starts and stops a private server when none is set.

    A private server that dies is restarted from its append-only file while the run goes on;
    ``on_lost`` is called (from a watching thread) if that fails."""
    if cfg.replay.url:
        # NAME_FILE (a mounted secret) before NAME itself; preflight has read it once already
        password = read_secret(cfg.replay.password_env) if cfg.replay.password_env else None
        yield str(cfg.replay.url), password
        return
    server = EmbeddedRedis(run_dir, binary=cfg.replay.redis_server)
    server.start()
    logger.info("started a private redis-server on %s (AOF in %s)", server.url, server.data_dir)
    if on_lost is not None:
        server.watch(on_lost)
    try:
        yield server.url, server.password
    finally:
        server.stop()
        logger.info("stopped the private redis-server")


def ensure_egdb(cfg: DictConfig) -> None:
    """Builds the endgame database the config uses if it is missing (progress lines on the log)."""
    egdb = cfg.get("egdb")
    if egdb is None or not any(
        egdb.get(k, False) for k in ("adjudicate_selfplay", "mcts_leaves", "adjudicate_matches")
    ):
        return
    ensure_database(
        str(egdb.dir), int(cfg.game.size), int(egdb.pieces), int(egdb.build_workers), logger.info
    )
