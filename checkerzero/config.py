"""Where the Hydra configs live, how to compose them, and value checks before anything starts.

`compose(overrides)` is the one way to read the configuration: `python -m learner`, every other
command line, the benchmarks and the tests all get the same groups, presets and defaults from it.
`validate` checks every key against its rule in `checkerzero.config_schema` (type, range, finite,
a path that exists) and the rules between keys (the board and the model, a warm start's network
file and the model keys), so a bad command line fails in its first second, before Ray, Redis or
the run folder, with one line naming the key, the value and what is allowed. An override Hydra
refuses (an unknown key, a group option that does not exist) gets one line too, with the nearest
valid names (`override_error_message`).
"""

from __future__ import annotations

import difflib
import functools
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hydra import compose as hydra_compose
from hydra import initialize_config_dir, initialize_config_module
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from checkerzero.config_schema import group_names, leaf_keys, problems
from checkerzero.network.header import SHAPE_KEYS, read_model_shape, shape_text
from game.encoding import NUM_PLANES

SOURCE_CONF = Path(__file__).resolve().parents[1] / "conf"  # a checkout's, editable installs
INSTALLED_CONF = Path(__file__).resolve().parent / "conf"  # a non-editable install's copy
PACKAGE_CONF = "pkg://checkerzero.conf"  # the same copy as Hydra names it (CMakeLists.txt)

# `${encoder_planes:}` in conf/model: the network's input planes are the encoder's, not a choice.
OmegaConf.register_new_resolver("encoder_planes", lambda: NUM_PLANES, replace=True)


def conf_dir() -> Path:
    """The one place conf/ is found: the checkout's when running from source (or an editable
    install), else the copy a non-editable install carries inside this package."""
    return SOURCE_CONF if (SOURCE_CONF / "config.yaml").is_file() else INSTALLED_CONF


def config_path() -> str:
    """conf/ as Hydra takes it: `conf_dir` as a folder, or the package's copy by module."""
    return str(SOURCE_CONF) if conf_dir() == SOURCE_CONF else PACKAGE_CONF


@functools.cache
def default_config() -> DictConfig:
    """The default composition (no overrides), composed once per process: what library code
    reads when a caller gives it no settings of its own (the players' search defaults). Entry
    points compose with their overrides (`compose`) and pass settings down instead."""
    cfg = compose()
    OmegaConf.set_readonly(cfg, True)
    return cfg


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
        raise ConfigError(override_error_message(e, overrides)) from e
    validate(cfg)
    return cfg


def validate(cfg: DictConfig, *, refuse_unknown: bool = True) -> None:
    """Raises ConfigError, one line naming the key, the value and what is allowed, for the first
    value that breaks its rule in `checkerzero.config_schema.SCHEMA` or a rule between keys.

    ``refuse_unknown``: a key the schema does not know is refused too (a ``+key`` added on the
    command line that nothing would read); off for a resumed run's saved config, which may hold
    keys that were since removed.
    """
    try:
        values = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as e:
        raise ConfigError(f"cannot resolve the config: {_one_line(e)}") from None
    assert isinstance(values, dict)
    validate_values(values, refuse_unknown=refuse_unknown)


def validate_values(values: dict[str, Any], *, refuse_unknown: bool = True) -> None:
    """`validate` for a resolved config as plain dicts and lists."""
    for key, value, allowed in problems(values, unknown=refuse_unknown):
        if allowed == "not a config key":
            raise ConfigError(unknown_key_message(key, leaf_keys(values), value))
        allowed = allowed.replace("\n", "\\n")  # one line, whatever a value held
        raise ConfigError(f"bad config value {key}={value!r}: {allowed}")
    for keys, why in CROSS_RULES:
        if all(_has(values, k) for k in keys):
            reason = why(values)
            if reason is not None:
                key = keys[0]
                raise ConfigError(f"bad config value {key}={_get(values, key)!r}: {reason}")
    for key in ("learner.device", "evaluation.device"):
        if _has(values, key) and not device_available(_get(values, key)):
            value = _get(values, key)
            raise ConfigError(f"bad config value {key}={value!r}: {device_missing_why(value)}")


_MISSING = object()


def _get(values: dict[str, Any], key: str) -> Any:
    node: Any = values
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _has(values: dict[str, Any], key: str) -> bool:
    return _get(values, key) is not _MISSING


def _init_weights_why(values: dict[str, Any]) -> str | None:
    """A warm start's network must have the run's shape: read from the file's header only."""
    path = _get(values, "learner.init_weights")
    if path is None:
        return None
    try:
        held = read_model_shape(path)
    except (OSError, ValueError) as e:
        return f"not a network file: {e}"
    model = values["model"]
    if all(held.get(k) == model.get(k) for k in SHAPE_KEYS):
        return None
    return (
        f"the file holds a {shape_text(held)} network, the model keys make a "
        f"{shape_text(model)} one: set model.* to the file's shape or pick another file"
    )


def _fast_simulations_why(values: dict[str, Any]) -> str | None:
    cap, simulations = values["selfplay"]["playout_cap"], values["mcts"]["simulations"]
    if not cap.get("enabled", False) or cap["fast_simulations"] <= simulations:
        return None
    return f"fast searches take 0 to mcts.simulations ({simulations}) simulations"


# Rules between keys: (the keys, the first one named in the error; why(values) -> reason | None).
# Each runs only when all its keys are present (a saved config may predate one).
CROSS_RULES: tuple[tuple[tuple[str, ...], Callable[[dict[str, Any]], str | None]], ...] = (
    (
        ("model.board_size", "game.size"),
        lambda v: None if v["model"]["board_size"] == v["game"]["size"] else "must equal game.size",
    ),
    (("learner.init_weights", "model"), _init_weights_why),
    (
        (
            "selfplay.playout_cap.fast_simulations",
            "selfplay.playout_cap.enabled",
            "mcts.simulations",
        ),
        _fast_simulations_why,
    ),
    (
        ("evaluation.gating", "evaluation.enabled"),
        lambda v: (
            None
            if not v["evaluation"]["gating"] or v["evaluation"]["enabled"]
            else "gating needs evaluation.enabled=true: actors follow the weights the evaluator "
            "promotes, and with no evaluator they would wait for ever"
        ),
    ),
    (
        ("selfplay.actors", "replay.url"),
        lambda v: (
            None
            if v["selfplay"]["actors"] != 0 or v["replay"]["url"]
            else "no actor would add a game to the run's private Redis (replay.url=null), which "
            "nothing else can reach, so the learner would wait for ever; run at least one actor, "
            "or name with replay.url a Redis that other actors feed"
        ),
    ),
    (
        ("evaluation.gate.elo0", "evaluation.gate.elo1"),
        lambda v: (
            None
            if v["evaluation"]["gate"]["elo0"] < v["evaluation"]["gate"]["elo1"]
            else "the gate's H0 must be below its H1 (evaluation.gate.elo1)"
        ),
    ),
)


def _one_line(e: BaseException) -> str:
    """An exception's message on one line (Hydra's and OmegaConf's span several)."""
    return " ".join(line.strip() for line in str(e).splitlines() if line.strip())


def known_keys() -> list[str]:
    """Every key of the default composition and every config group: what a typo is near."""
    with _COMPOSE_LOCK:
        path = config_path()
        ctx = (
            initialize_config_module("checkerzero.conf", version_base="1.3")
            if path == PACKAGE_CONF
            else initialize_config_dir(config_dir=path, version_base="1.3")
        )
        with ctx:
            cfg = hydra_compose("config", overrides=[])
    values = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(values, dict)
    groups = group_names(SOURCE_CONF) if path != PACKAGE_CONF else ()
    return [*leaf_keys(values), *groups]


def _nearest(word: str, candidates: Sequence[str], n: int = 3) -> list[str]:
    near = difflib.get_close_matches(word, candidates, n=n, cutoff=0.6)
    if near or "." not in word:
        return near
    # A typo in the section (lerner.batch_size): the same last part under another section.
    leaf = word.rsplit(".", 1)[1]
    return [c for c in candidates if c.rsplit(".", 1)[-1] == leaf][:n]


def unknown_key_message(key: str, candidates: Sequence[str], value: Any = _MISSING) -> str:
    """One line: the key is not in the config, and the nearest ones that are."""
    near = _nearest(key, [c for c in candidates if c != key])
    where = f"{key}={value}" if value is not _MISSING else key
    hint = (
        f"; did you mean {' or '.join(near)}?" if near else "; python -m learner --help lists them"
    )
    return f"unknown config key {where}{hint}"


def override_error_message(error: BaseException, overrides: Sequence[str]) -> str:
    """One line for an override Hydra refused: an unknown key or group option with the nearest
    valid ones, or a line that does not parse. Never Hydra's ``+key`` advice, which would start
    a run with the key silently ignored."""
    cause = error.__cause__
    if isinstance(error, MissingConfigException) and error.missing_cfg_file:
        group, _, option = str(error.missing_cfg_file).rpartition("/")
        options = sorted(error.options or ())
        near = _nearest(option, options)
        hint = f"did you mean {' or '.join(near)}? " if near else ""
        return (
            f"no option {option!r} in config group {group}: {hint}"
            f"its options are {', '.join(options)}"
        )
    if isinstance(cause, ConfigKeyError | ConfigAttributeError) and cause.full_key:
        key = str(cause.full_key)  # the first part that is missing: lerner of lerner.batch_size
        for override in overrides:
            typed, sep, value = override.lstrip("+~").partition("=")
            if typed == key or typed.startswith(key + "."):
                return unknown_key_message(typed, known_keys(), value if sep else _MISSING)
        return unknown_key_message(key, known_keys())
    if isinstance(error, OverrideParseException):
        return f"cannot read the override: {_one_line(error)}"
    return _one_line(error)


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
