"""The play group of the configuration (conf/play/default.yaml), read without Hydra.

The server, the engine and the terminal player are front ends, not parts of a training run, so
they read the one YAML file directly; command-line flags override its top-level keys.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

import game

SOURCE_CONF = Path(__file__).resolve().parents[1] / "conf" / "play" / "default.yaml"
# A non-editable install carries conf/ inside the checkerzero package (CMakeLists.txt).
PACKAGE_CONF = (
    Path(__file__).resolve().parents[1] / "checkerzero" / "conf" / "play" / "default.yaml"
)
GAME_DATA = Path(game.__file__).resolve().parent / "data"  # where the shipped network lives


def conf_file() -> Path:
    for path in (SOURCE_CONF, PACKAGE_CONF):
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"the play configuration is missing: neither {SOURCE_CONF} nor {PACKAGE_CONF} exists"
    )


def load_settings(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The play group as a dict, with ``overrides`` (nested dicts merge key by key).

    An override naming a key the file does not have raises ValueError naming it.
    """
    settings = yaml.safe_load(conf_file().read_text()) or {}
    _merge(settings, dict(overrides or {}), "play")
    return settings


def _merge(base: dict[str, Any], extra: Mapping[str, Any], where: str) -> None:
    for key, value in extra.items():
        if key not in base:
            raise ValueError(f"unknown setting {where}.{key}; known: {sorted(base)}")
        if isinstance(base[key], dict):
            if not isinstance(value, Mapping):
                raise ValueError(f"setting {where}.{key} must be a mapping, got {value!r}")
            _merge(base[key], value, f"{where}.{key}")
        else:
            base[key] = copy.deepcopy(value)


def models_dir(value: str | Path) -> Path:
    """The models root: as given, or (for the default relative path, when the current folder is
    not a checkout) the game package's data folder, where the shipped network is installed."""
    path = Path(value)
    if not path.is_absolute() and not path.is_dir() and Path(value) == Path("game/data"):
        return GAME_DATA
    return path


def shipped_network() -> Path:
    """The shipped network: the file of the play configuration's ``default_player`` (a spec such
    as ``long-320min.safetensors:sims=200``) in the game package's data folder. The one place
    that names it, for the front ends and the benchmarks alike."""
    return GAME_DATA / load_settings()["default_player"].split(":", 1)[0]


__all__ = ["conf_file", "load_settings", "models_dir", "shipped_network"]
