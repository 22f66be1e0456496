"""Where the Hydra configs live, how to compose them, and value checks before anything starts.

`compose(overrides)` is the one way to read the configuration: `python -m learner`, every other
command line, the benchmarks and the tests all get the same groups, presets and defaults from it.
Hydra already rejects unknown keys (the composed config is in struct mode); `validate` rejects
values that are the right type but wrong (a board of 7, zero simulations, a negative window), so
a bad command line fails in the first second with a message naming the key.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra import compose as hydra_compose
from hydra import initialize_config_dir, initialize_config_module
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from checkerzero.network.precision import PRECISIONS
from game.encoding import NUM_PLANES
from game.mcts import SEARCH_PARAMETERS

SOURCE_CONF = Path(__file__).resolve().parents[1] / "conf"
PACKAGE_CONF = "pkg://checkerzero.conf"  # where a non-editable install puts conf/ (CMakeLists.txt)

# `${encoder_planes:}` in conf/model: the network's input planes are the encoder's, not a choice.
OmegaConf.register_new_resolver("encoder_planes", lambda: NUM_PLANES, replace=True)


def config_path() -> str:
    """The checkout's conf/ when running from source, else the copy inside the package."""
    return str(SOURCE_CONF) if (SOURCE_CONF / "config.yaml").is_file() else PACKAGE_CONF


class ConfigError(ValueError):
    pass


# Hydra's initialize contexts set one process-wide GlobalHydra: two threads composing at once
# (the play server's requests do) would find it set and fail, so compositions take turns.
_COMPOSE_LOCK = threading.Lock()


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """The composed config (`conf/config.yaml` with its groups and preset) plus `overrides`.

    `overrides` use the command line's syntax (``"mcts.simulations=64"``, ``"game=small"``).
    Raises ConfigError naming the override when Hydra rejects one, and when `validate` does.
    Safe to call from several threads at once.
    """
    path = config_path()
    try:
        with _COMPOSE_LOCK:  # the initialize objects set GlobalHydra when made, not entered
            if path == PACKAGE_CONF:
                ctx = initialize_config_module("checkerzero.conf", version_base="1.3")
            else:
                ctx = initialize_config_dir(config_dir=path, version_base="1.3")
            with ctx:
                cfg = hydra_compose("config", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(f"config overrides {list(overrides)}: {e}") from e
    validate(cfg)
    return cfg


def _check(cfg: DictConfig, key: str, ok: Any, why: str | Any) -> None:
    """Raises ConfigError unless ``ok(value)``; ``why`` is the reason, or makes it from the
    value."""
    node = cfg
    for part in key.split("."):
        if node is None or part not in node:
            return  # the group is absent in this composition; nothing to check
        node = node[part]
    if not ok(node):
        reason = why(node) if callable(why) else why
        raise ConfigError(f"bad config value {key}={node!r}: {reason}")


def validate(cfg: DictConfig) -> None:
    """Raises ConfigError naming the first key whose value is wrong. One flat list of checks,
    one per key, in the order of the groups: long, but a reader finds a key's rule by its name."""
    positive = lambda v: isinstance(v, int | float) and v > 0  # noqa: E731
    non_negative = lambda v: isinstance(v, int | float) and v >= 0  # noqa: E731
    _check(cfg, "game.size", lambda v: v in (6, 8), "the board side must be 6 or 8")
    _check(cfg, "game.max_plies", non_negative, "a ply cap is >= 0 (0: none)")
    _check(cfg, "model.board_size", lambda v: v == cfg.game.size, "must equal game.size")
    _check(cfg, "model.blocks", non_negative, "residual blocks are >= 0")
    _check(cfg, "model.channels", positive, "channels are > 0")
    _check(cfg, "learner.batch_size", positive, "the batch size is > 0")
    _check(
        cfg,
        "learner.init_weights",
        lambda v: v is None or Path(v).is_file(),
        "no model checkpoint file there",
    )
    _check(cfg, "learner.max_steps", non_negative, "0 means no limit")
    _check(cfg, "learner.time_limit_min", non_negative, "0 means no limit")
    _check(cfg, "learner.publish_every_steps", positive, "publish at least every so many steps")
    _check(cfg, "learner.checkpoint_every_steps", positive, "checkpoint every so many steps")
    _check(cfg, "learner.keep_checkpoints", positive, "keep at least one checkpoint")
    _check(cfg, "learner.keep_weights", non_negative, "weights files kept, >= 0 (0: all)")
    _check(
        cfg,
        "learner.value_target_q_weight",
        lambda v: isinstance(v, int | float) and 0 <= v <= 1,
        "a share in [0, 1] of the search's root value in the value target",
    )
    _check(
        cfg,
        "learner.ema_decay",
        lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < 1,
        "the weights average's decay per step is in [0, 1) (0: off)",
    )
    _check(cfg, "learner.moves_left_weight", non_negative, "a loss weight >= 0")
    for key in ("learner.precision", "selfplay.precision"):
        _check(cfg, key, lambda v: v in PRECISIONS, f"one of {', '.join(PRECISIONS)}")
    _check(cfg, "model.moves_left_head", lambda v: isinstance(v, bool), "true or false")
    _check(cfg, "replay.window_positions", positive, "the replay window holds > 0 positions")
    _check(cfg, "replay.sample_ratio", positive, "samples per new position must be > 0")
    _check(cfg, "replay.min_positions", non_negative, "positions before training, >= 0")
    for key, parameter in SEARCH_PARAMETERS.items():  # the search's own ranges (game.mcts)
        if parameter.ok is not None:
            _check(cfg, f"mcts.{key}", _number_and(parameter.ok), parameter.rule)
    # A run's searches (self-play, the evaluator) make at least one visit per move.
    _check(cfg, "mcts.simulations", positive, "at least one simulation per move")
    _check(
        cfg,
        "selfplay.playout_cap.full_share",
        lambda v: isinstance(v, int | float) and 0 <= v <= 1,
        "the chance of a full search is in [0, 1]",
    )
    _check(
        cfg,
        "selfplay.playout_cap.fast_simulations",
        lambda v: (
            not cfg.selfplay.playout_cap.get("enabled", False)
            or (isinstance(v, int) and 0 <= v <= cfg.mcts.simulations)
        ),
        lambda v: f"fast searches take 0 to mcts.simulations ({cfg.mcts.simulations}) simulations",
    )
    _check(
        cfg,
        "selfplay.actors",
        lambda v: v is None or (isinstance(v, int) and v >= 0),
        "null (one per free core) or a count >= 0",
    )
    for key, rule in (
        ("max_batch", "the largest batch of leaves is >= 1"),
        ("pipeline", "at least one batch in flight"),
    ):
        _check(
            cfg,
            f"selfplay.inference_server.{key}",
            lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
            rule,
        )
    _check(cfg, "selfplay.inference_server.max_wait_ms", non_negative, "milliseconds, >= 0")
    _check(cfg, "selfplay.inference_server.cpus", non_negative, "CPUs per server, >= 0")
    _check(
        cfg,
        "logging.wandb.mode",
        lambda v: v in ("online", "offline", "disabled"),
        "online, offline or disabled",
    )
    _check(
        cfg,
        "evaluation.gating",
        lambda v: not v or cfg.evaluation.get("enabled", False),
        "gating needs evaluation.enabled=true: actors follow the weights the evaluator "
        "promotes, and with no evaluator they would wait for ever",
    )
    for key in ("learner.device", "evaluation.device"):
        _check(cfg, key, device_available, device_missing_why)


def _number_and(ok: Any) -> Any:
    """``ok`` for a number (a bool or a string is no number here), False for anything else."""
    return lambda v: isinstance(v, int | float) and not isinstance(v, bool) and ok(v)


def device_available(spec: Any) -> bool:
    """Whether a device spec (auto, cpu, cuda, cuda:N, mps) names a device this torch has."""
    if not isinstance(spec, str):
        return False
    kind, _, index = spec.partition(":")
    if kind not in ("auto", "cpu", "cuda", "mps") or (index and not index.isdigit()):
        return False
    if kind in ("auto", "cpu"):
        return not index
    import torch  # only for a GPU spec: torch's import is most of a cold start

    if kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        return not index and mps is not None and mps.is_available()
    return torch.cuda.is_available() and int(index or 0) < torch.cuda.device_count()


def device_missing_why(spec: Any) -> str:
    import torch  # only on the way to an error message

    cuda = (
        f"{torch.cuda.device_count()} CUDA device(s)"
        if torch.cuda.is_available()
        else "no CUDA device (or a CPU-only build)"
    )
    mps = getattr(torch.backends, "mps", None)
    has_mps = mps is not None and mps.is_available()
    return (
        f"auto, cpu, cuda[:N] or mps, and present: this torch {torch.__version__} sees {cuda}"
        f"{' and MPS' if has_mps else ', no MPS'}"
    )
