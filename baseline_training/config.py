"""Configs of the baseline commands: ``conf/baselines/<name>.yaml`` plus the model group.

A run directory keeps the config it started with (``config.yaml``); pointing the command at it
again resumes with that config, and ``key=value`` arguments change it (e.g. more epochs).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from checkerzero.config import compose, conf_dir, unknown_key_message
from checkerzero.config_schema import leaf_keys

CONFIG_FILE = "config.yaml"


def load_config(name: str, overrides: Sequence[str], run_dir: Path | None = None) -> DictConfig:
    """The run's config: the saved one when ``run_dir`` has it, else the defaults; then
    ``overrides`` (``key=value``); an unknown key or a malformed item raises ValueError."""
    saved = run_dir / CONFIG_FILE if run_dir is not None else None
    if saved is not None and saved.is_file():
        cfg = OmegaConf.load(saved)
    else:
        # The model group resolved within the project's composed config (its board size and
        # input planes follow the game and the encoder).
        model = OmegaConf.to_container(compose().model, resolve=True)
        cfg = OmegaConf.merge(
            OmegaConf.load(conf_dir() / "baselines" / f"{name}.yaml"), {"model": model}
        )
    OmegaConf.set_struct(cfg, True)
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"bad override {item!r}: use key=value")
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist([item]))
        except ConfigKeyError as err:
            key, _, value = item.partition("=")
            keys = leaf_keys(OmegaConf.to_container(cfg, resolve=False))
            where = f"conf/baselines/{name}.yaml"
            raise ValueError(f"{unknown_key_message(key, keys, value)} ({where})") from err
        except OmegaConfBaseException as err:
            flat = " ".join(str(err).split())
            raise ValueError(f"bad override {item!r}: {flat}") from err
    return cfg


def save_config(cfg: DictConfig, run_dir: Path) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG_FILE).write_text(OmegaConf.to_yaml(cfg))
