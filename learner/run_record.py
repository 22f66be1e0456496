"""The run directory's config record: a new run, a resume, one job of a sweep.

A run's identity is its directory. The first start writes the config the run uses, resolved, to
``<run_dir>/.hydra/config.yaml`` and the command line's overrides to ``.hydra/overrides.yaml``;
nothing ever rewrites them. Starting ``python -m learner run_dir=<that directory>`` again resumes
the run with that saved config, not with whatever the current ``conf/`` would compose: overrides
given on resume may change only the keys in :data:`RESUMABLE` (limits, logging, actor count,
where things run), or repeat a saved override unchanged; anything else is a :class:`ConfigError`
naming the key. Each resume keeps its own record in ``.hydra/resume-<time>/`` (the overrides it
was given and the config it ran with).

A sweep (``python -m learner -m key=a,b``) gives every job a run directory of its own,
``<run_dir>/<job number>/`` with its ``.hydra/`` inside; Hydra's ``multirun.yaml`` stays in
``<run_dir>``. Running the same sweep command again resumes every job.

Everything here runs before the run directory is created, Redis or Ray started: a rejected
config leaves nothing behind.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from checkerzero.config import ConfigError, validate
from checkerzero.run_files import (
    CHECKPOINT_DIR,
    RECORD_CONFIG,
    RECORD_DIR,
    RECORD_OVERRIDES,
    RESUME_PREFIX,
)
from checkerzero.store.replay import redact_url

logger = logging.getLogger(__name__)


# Keys an override may change when a run resumes: when it stops, how it reports, how many
# actors play and where things run. Everything else (game, model, search, optimiser, replay
# window, seed...) defines the experiment and stays as saved. A key ending in ".*" is a group:
# every key below it may change.
RESUMABLE = (
    "run_dir",
    "learner.max_steps",
    "learner.time_limit_min",
    "learner.checkpoint_every_steps",
    "learner.checkpoint_every_min",
    "learner.keep_checkpoints",
    "learner.keep_weights",
    "learner.device",
    "learner.threads",
    "learner.wait_poll_s",
    "learner.max_checkpoint_mb",
    "selfplay.actors",
    "selfplay.torch_threads",
    "selfplay.cpu_backend",
    "replay.url",
    "replay.password_env",
    "replay.redis_server",
    "replay.connect_retries",
    "replay.connect_backoff_s",
    "replay.prefetch_depth",
    "evaluation.device",
    "evaluation.gpus",
    "evaluation.torch_threads",
    "evaluation.num_cpus",
    "evaluation.poll_s",
    "nneval.generations",
    "nneval.positions",
    "nneval.selfplay.actors",
    "nneval.train.threads",
    "nneval.gate.parallel",
    "nneval.ladder.pairs",
    "nneval.ladder.table",
    "logging.*",
    "cluster.*",
)


@dataclass(frozen=True)
class Prepared:
    """What `prepare` decided: the config to run and what to record before running it."""

    cfg: DictConfig
    run_dir: Path
    overrides: list[str]  # this invocation's overrides, as typed
    resumed: bool
    filled: tuple[str, ...] = ()  # keys a resumed run's saved config lacked: today's defaults


def resumable(key: str) -> bool:
    return any(key == k or (k.endswith(".*") and key.startswith(k[:-1])) for k in RESUMABLE)


def job_run_dir(run_dir: str | Path, job_num: int | None) -> Path:
    """The run directory of one job: ``run_dir`` itself, or ``run_dir/<n>`` in a sweep."""
    return Path(run_dir) if job_num is None else Path(run_dir) / str(job_num)


def saved_config_path(run_dir: Path) -> Path:
    return run_dir / RECORD_DIR / RECORD_CONFIG


def prepare(cfg: DictConfig, overrides: Sequence[str], job_num: int | None = None) -> Prepared:
    """The config to run for a composed ``cfg`` and the command line's ``overrides``.

    A new run: ``cfg`` itself. An existing run directory: its saved config with the overrides
    allowed on resume applied. ``job_num`` (a sweep's job) gives the job its own directory.
    Raises ConfigError, before anything is created, for a value ``validate`` rejects or an
    override that a resume may not change.
    """
    if not isinstance(cfg.run_dir, str) or not cfg.run_dir.strip():
        # Path("") is the current folder: the run's files would land wherever it was started
        raise ConfigError(
            f"run_dir: {cfg.run_dir!r} names no folder; name one (the default is runs/<time>)"
        )
    run_dir = job_run_dir(cfg.run_dir, job_num)
    saved = saved_config_path(run_dir)
    filled: tuple[str, ...] = ()
    if saved.is_file():
        out, filled = _resume_config(saved, run_dir, list(overrides), cfg)
        resumed = True
    else:
        if (run_dir / CHECKPOINT_DIR).is_dir():
            raise ConfigError(
                f"{run_dir} holds checkpoints but no saved config ({saved}); "
                "it cannot be resumed safely: start a new run elsewhere"
            )
        if _has_entries(run_dir):
            raise ConfigError(
                f"run_dir: {run_dir} is a folder with other files in it, not a run (no saved "
                f"config {saved}); name a new or empty folder"
            )
        out = cfg.copy()
        resumed = False
    OmegaConf.set_struct(out, False)
    out.run_dir = str(run_dir)
    OmegaConf.set_struct(out, True)
    validate(out, refuse_unknown=not resumed)  # a saved config may hold keys since removed
    return Prepared(out, run_dir, list(overrides), resumed, filled)


def _has_entries(folder: Path) -> bool:
    """Whether ``folder`` is a directory with anything in it (False when it is not there)."""
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is not None
    except (FileNotFoundError, NotADirectoryError):
        return False


def _resume_config(
    saved: Path, run_dir: Path, overrides: list[str], composed: DictConfig
) -> tuple[DictConfig, tuple[str, ...]]:
    """The saved config with the allowed overrides; keys added to conf/ since the run started
    (absent from the saved file) take their value from ``composed``, and are returned."""
    try:
        stored = OmegaConf.load(saved)
    except Exception as e:  # a YAML or OmegaConf error: name the file
        raise ConfigError(f"cannot read the saved config {saved}: {e}") from None
    if not isinstance(stored, DictConfig):
        raise ConfigError(f"the saved config {saved} is not a mapping")
    defaults = composed.copy()
    OmegaConf.set_struct(defaults, False)
    base = OmegaConf.merge(defaults, stored)
    filled = tuple(sorted(_leaves(defaults) - _leaves(stored) - {"run_dir"}))
    saved_overrides: set[str] = set()
    saved_overrides_path = saved.parent / RECORD_OVERRIDES
    if saved_overrides_path.is_file():
        loaded = OmegaConf.load(saved_overrides_path)
        saved_overrides = {str(x) for x in loaded} if not isinstance(loaded, DictConfig) else set()
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException as e:
        raise ConfigError(f"bad override: {e}") from None
    OmegaConf.set_struct(base, True)
    for o in parsed:
        key = o.key_or_group
        if key == "run_dir" or o.input_line in saved_overrides:
            continue  # the directory itself, or the run's own override repeated
        if o.is_delete() or o.is_add() or o.package is not None:
            raise ConfigError(
                f"cannot apply {o.input_line!r} when resuming {run_dir}: a resumed run keeps "
                f"its saved config ({saved})"
            )
        present = OmegaConf.select(base, key, throw_on_missing=False, default=_ABSENT)
        value = o.value()
        if present is not _ABSENT and not isinstance(present, DictConfig) and _same(present, value):
            continue  # the saved value repeated: nothing changes
        if present is _ABSENT or isinstance(present, DictConfig) or not resumable(key):
            raise ConfigError(
                f"cannot change {key} when resuming {run_dir}: the run keeps its saved config "
                f"({saved}); keys that may change on resume: {', '.join(RESUMABLE)}"
            )
        OmegaConf.update(base, key, value, merge=False)
    return base, filled


def _leaves(cfg: DictConfig) -> set[str]:
    """The dotted keys of every value (not mapping) in a config."""
    out: set[str] = set()

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}{k}.")
        else:
            out.add(prefix[:-1])

    walk(OmegaConf.to_container(cfg, resolve=False), "")
    return out


class _Absent:
    pass


_ABSENT = _Absent()


def _same(saved: Any, value: Any) -> bool:
    """Whether an override repeats the saved value (2 and 2.0 are the same; True and 1 not)."""
    if OmegaConf.is_config(saved):
        saved = OmegaConf.to_container(saved)
    if isinstance(saved, bool) or isinstance(value, bool):
        return saved is value
    return saved == value


def write_record(prepared: Prepared, hydra_cfg: Any = None) -> Path:
    """Creates the run directory and records the config: ``.hydra/`` for a new run (and Hydra's
    own settings as ``hydra.yaml``), ``.hydra/resume-<time>/`` for a resume. Returns the
    folder written."""
    record = prepared.run_dir / RECORD_DIR
    if prepared.resumed:
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        record = record / f"{RESUME_PREFIX}{stamp}"
        suffix = 1
        while record.exists():  # two resumes within a second
            suffix += 1
            record = record.with_name(f"{RESUME_PREFIX}{stamp}_{suffix}")
    record.mkdir(parents=True, exist_ok=not prepared.resumed)
    config = record / RECORD_CONFIG
    if config.exists():  # a new run's record is written once, never replaced
        raise ConfigError(f"{config} exists already; not overwriting a run's config record")
    _write(config, OmegaConf.to_yaml(_without_secrets(prepared.cfg)))
    overrides = [_redact_override(o) for o in prepared.overrides]
    _write(record / RECORD_OVERRIDES, OmegaConf.to_yaml(OmegaConf.create(overrides)))
    if hydra_cfg is not None and not prepared.resumed:
        text = OmegaConf.to_yaml(hydra_cfg)
        for raw, masked in zip(prepared.overrides, overrides, strict=True):
            text = text.replace(raw, masked)  # Hydra keeps the command line's overrides too
        _write(record / "hydra.yaml", text)
    return record


def _without_secrets(cfg: DictConfig) -> DictConfig:
    """The resolved config to record, with no Redis password in it: a URL that came from the
    environment is recorded as that interpolation (a resume reads the environment again), a URL
    with a password given on the command line is recorded masked (give it again on resume:
    ``replay.url`` may change then)."""
    out = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    if OmegaConf.select(cfg, "replay.url", default=None) is None:
        return out
    raw = OmegaConf.to_container(cfg.replay, resolve=False)["url"]
    if isinstance(raw, str) and raw.startswith("${oc.env:"):
        out.replay.url = raw
    elif isinstance(out.replay.url, str) and redact_url(out.replay.url) != out.replay.url:
        out.replay.url = redact_url(out.replay.url)
        logger.warning(
            "replay.url carries a password: the run's config record masks it; pass the URL "
            "again when resuming, or keep the password in %s",
            cfg.replay.get("password_env") or "the environment",
        )
    return out


def _redact_override(override: str) -> str:
    """A command-line override as recorded: any URL's password masked."""
    key, sep, value = override.partition("=")
    return key + sep + redact_url(value) if sep and "://" in value else override


RECORD_MODE = 0o600  # the run's record is its owner's alone: config, overrides, Hydra's settings


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, RECORD_MODE)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, RECORD_MODE)  # an older .tmp left by a kill keeps its mode through O_CREAT
    tmp.replace(path)
