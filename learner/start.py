"""The body of ``python -m learner``: the run a composed config asks for.

The MCTS loop (:class:`learner.run.Run`) by default; with ``nneval.enabled`` (the ``nneval``
preset) the fast player's evaluation trained in generations (:mod:`learner.nneval.loop`, which
builds on the same Run). Both end with one line on stderr, not a traceback, when the replay store
cannot be reached or the cluster refuses the run.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from omegaconf import DictConfig, OmegaConf

from checkerzero.cluster.preflight import PreflightError
from checkerzero.store.redis_server import RedisServerError
from checkerzero.store.replay import ReplayUnavailable
from learner.nneval.loop import run_generations
from learner.run import Run


def run(cfg: DictConfig) -> dict[str, Any]:
    """Runs the whole loop for a composed config; returns a summary dict.

    The body of `python -m learner`: a replay store that cannot be reached (after the bounded
    retries) or a private redis-server that cannot start ends the process with one line on
    stderr naming the URL or the cause and exit status 1, not a traceback (the errors say all
    there is to say; `Run(cfg).main()` raises them for callers that want the exception).
    """
    with suppress(AttributeError):
        OmegaConf.set_struct(cfg, True)
    try:
        if OmegaConf.select(cfg, "nneval.enabled", default=False):
            return run_generations(cfg)
        return Run(cfg).main()
    except (ReplayUnavailable, RedisServerError, PreflightError) as e:
        raise SystemExit(f"error: {e}") from None
