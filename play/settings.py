"""The play group of the configuration (conf/play/default.yaml), read without Hydra.

The server, the engine and the terminal player are front ends, not parts of a training run, so
they read the one YAML file directly, found where every reader finds conf/
(``checkerzero.config.conf_dir``); command-line flags override its top-level keys.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

import game
from checkerzero.config import conf_dir

PLAY_GROUP = ("play", "default")  # conf/play/default.yaml
GAME_DATA = Path(game.__file__).resolve().parent / "data"  # where the shipped network lives


# Every key's type and range: (kind, lowest, highest). A value outside is refused by name at
# start, before anything is served (a string setting is at most MAX_TEXT characters).
INT, FLOAT, TEXT, NAMES = "a whole number", "a number", "a string", "a list of host names"
BOOL = "true or false"
MAX_TEXT = 1000
SCHEMA: dict[str, tuple[str, float, float]] = {
    "host": (TEXT, 1, 255),
    "port": (INT, 1, 65535),
    "allowed_hosts": (NAMES, 0, 100),
    "runs_dir": (TEXT, 1, MAX_TEXT),
    "models_dir": (TEXT, 1, MAX_TEXT),
    "default_player": (TEXT, 1, 500),
    "default_opponent": (TEXT, 1, 500),
    "default_simulations": (INT, 1, 10**7),
    "torch_threads": (INT, 1, 1024),
    "leaves_per_game": (INT, 1, 4096),
    "time_chunk_simulations": (INT, 1, 10**6),
    "top_moves": (INT, 1, 1000),
    "pv_max_plies": (INT, 1, 1000),
    "limits.max_simulations": (INT, 1, 10**7),
    "limits.max_ms": (INT, 1, 3_600_000),
    "limits.max_minimax_depth": (INT, 1, 64),
    "limits.max_batch_positions": (INT, 1, 100_000),
    "limits.max_request_simulations": (INT, 1, 10**9),
    "limits.max_moves": (INT, 1, 10**6),
    "limits.max_request_bytes": (INT, 1, 10**9),
    "limits.max_concurrent_searches": (INT, 1, 1024),
    "limits.max_searches_per_client": (INT, 1, 1024),
    "limits.max_waiting_per_client": (INT, 0, 100_000),
    "limits.max_concurrent_quick": (INT, 1, 1024),
    "limits.max_requests_per_client": (INT, 1, 100_000),
    "limits.max_connections": (INT, 1, 100_000),
    "limits.max_connections_per_client": (INT, 1, 100_000),
    "limits.header_timeout_s": (FLOAT, 0.01, 3600),
    "limits.body_timeout_s": (FLOAT, 0.01, 3600),
    "limits.keep_alive_s": (FLOAT, 0.01, 3600),
    "limits.max_header_bytes": (INT, 1024, 10**7),
    "limits.shutdown_s": (FLOAT, 0, 3600),
    "limits.queue_wait_s": (FLOAT, 0, 3600),
    "limits.max_request_s": (FLOAT, 0.001, 86400),
    "limits.max_cached_networks": (INT, 1, 1000),
    "limits.max_pdn_games": (INT, 1, 10**6),
    "limits.max_pdn_chars": (INT, 1, 10**9),
    "limits.max_pdn_moves": (INT, 1, 10**8),
    "runs.running_within_s": (FLOAT, 0, 10**9),
    "runs.live_poll_s": (FLOAT, 0.1, 3600),
    "runs.live_within_s": (FLOAT, 0, 10**9),
    "analysis.engine": (TEXT, 1, 20),
    "analysis.hint_player": (TEXT, 1, 500),
    "analysis.ab_ms": (INT, 1, 3_600_000),
    "analysis.ab_lines": (INT, 1, 64),
    "analysis.ab_slice_ms": (INT, 1, 3_600_000),
    "analysis.ab_tt_mb": (INT, 1, 4096),
    "analysis.ab_egdb": (BOOL, 0, 1),
    "analysis.deepen_max_s": (FLOAT, 0.1, 86400),
    "analysis.deepen_idle_s": (FLOAT, 0.1, 86400),
    "analysis.deepen_sessions": (INT, 1, 1024),
    "analysis.deepen_per_client": (INT, 1, 1024),
    "draw_offer.accept_below_cp": (INT, -100_000, 100_000),
    "draw_offer.accept_below_score": (FLOAT, 0, 1),
    "runs.max_file_bytes": (INT, 1, 2**40),
    "analysis.inaccuracy": (FLOAT, 0, 1),
    "analysis.mistake": (FLOAT, 0, 1),
    "analysis.blunder": (FLOAT, 0, 1),
}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."


def check_value(key: str, value: Any) -> None:
    """ValueError naming ``play.KEY`` when ``value`` is not of its kind and range."""
    kind, low, high = SCHEMA[key]
    where = f"setting play.{key}"
    if kind in (TEXT, NAMES):
        items = [value] if kind == TEXT else value
        if kind == NAMES and not (isinstance(value, list) and low <= len(value) <= high):
            raise ValueError(f"{where} must be {kind} (at most {high:g}), got {_shown(value)}")
        for item in items:
            if (
                not isinstance(item, str)
                or not item.strip()
                or len(item) > (high if kind == TEXT else 255)
            ):
                raise ValueError(f"{where} must be a non-empty string, got {_shown(item)}")
            if any(c in item for c in "\x00\n\r"):
                raise ValueError(f"{where} must be on one line, got {_shown(item)}")
        return
    if kind == BOOL:
        if not isinstance(value, bool):
            raise ValueError(f"{where} must be {kind}, got {_shown(value)}")
        return
    number = isinstance(value, int) if kind == INT else isinstance(value, (int, float))
    if not number or isinstance(value, bool):
        raise ValueError(f"{where} must be {kind}, got {_shown(value)}")
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{where} must be in [{low:g}, {high:g}], got {_shown(value)}")


def check_settings(settings: Mapping[str, Any]) -> None:
    """Every key of ``settings`` against SCHEMA, and the pairs that must agree (ValueError)."""
    for key in SCHEMA:
        node: Any = settings
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise ValueError(f"setting play.{key} is missing")
            node = node[part]
        check_value(key, node)
    limits = settings["limits"]
    if settings["default_simulations"] > limits["max_simulations"]:
        raise ValueError(
            f"setting play.default_simulations={settings['default_simulations']} is over "
            f"play.limits.max_simulations={limits['max_simulations']}"
        )
    _check_opponents(settings)
    marks = settings["analysis"]
    if marks["engine"] not in ("ab", "network"):
        raise ValueError(
            f"setting play.analysis.engine must be ab or network, got {marks['engine']!r}"
        )
    if not marks["inaccuracy"] <= marks["mistake"] <= marks["blunder"]:
        raise ValueError("settings play.analysis: need inaccuracy <= mistake <= blunder")


def _check_opponents(settings: Mapping[str, Any]) -> None:
    """play.opponents: a list of {spec, name, measured?}; play.ratings_tables: a list of text."""
    tables = settings.get("ratings_tables", [])
    if not isinstance(tables, list) or not all(isinstance(t, str) and t for t in tables):
        raise ValueError(
            f"setting play.ratings_tables must be a list of paths, got {_shown(tables)}"
        )
    entries = settings.get("opponents", [])
    if not isinstance(entries, list):
        raise ValueError(f"setting play.opponents must be a list, got {_shown(entries)}")
    for k, entry in enumerate(entries):
        where = f"setting play.opponents[{k}]"
        if not isinstance(entry, Mapping) or set(entry) - {"spec", "name", "measured"}:
            raise ValueError(f"{where} must be a mapping of spec, name and measured")
        for key in ("spec", "name", "measured"):
            value = entry.get(key, "")
            if (key != "measured" and not value) or not isinstance(value, str) or "\n" in value:
                raise ValueError(f"{where}.{key} must be text on one line, got {_shown(value)}")


def conf_file() -> Path:
    group, name = PLAY_GROUP
    path = conf_dir() / group / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"the play configuration is missing: {path} does not exist")
    return path


def load_settings(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The play group as a dict, with ``overrides`` (nested dicts merge key by key).

    An override naming a key the file does not have, or a value of the wrong kind or out of
    its range (``SCHEMA``), raises ValueError naming it.
    """
    path = conf_file()
    settings = copy.deepcopy(_read(path, path.stat().st_mtime_ns))
    _merge(settings, dict(overrides or {}), "play")
    check_settings(settings)
    return settings


@functools.lru_cache(maxsize=4)
def _read(path: Path, mtime_ns: int) -> dict[str, Any]:
    """The file's settings, read once per modification time (callers get deep copies)."""
    return yaml.safe_load(path.read_text()) or {}


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


__all__ = [
    "SCHEMA",
    "check_settings",
    "conf_file",
    "load_settings",
    "models_dir",
    "shipped_network",
]
