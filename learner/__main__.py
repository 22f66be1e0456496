"""`python -m learner [overrides]`: compose the Hydra config and run the distributed loop.

Examples:
    python -m learner                                  # the laptop preset, a new run under runs/
    python -m learner preset=smoke                     # a one-minute end-to-end check
    python -m learner selfplay.actors=32 mcts.simulations=200
    python -m learner run_dir=runs/2026-11-22_15-00-00 # resume that run with its saved config
    python -m learner -m mcts.simulations=50,100       # a sweep: one run directory per job

Hydra composes the config and writes nothing itself; learner.run_record checks it (or, for an
existing run directory, the run's saved config with the overrides a resume may change), and
only then creates the run directory, records the config and starts Redis and Ray.
"""

from __future__ import annotations

import logging
import os
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from checkerzero.cluster.preflight import PreflightError, check_environment
from checkerzero.config import ConfigError, config_path, override_error_message
from checkerzero.run_files import LOG_FILE
from learner.run_record import prepare, write_record
from learner.terminal import setup_terminal


def _main(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    job_num = int(hc.job.num) if hc.mode == RunMode.MULTIRUN else None
    try:
        prepared = prepare(cfg, list(hc.overrides.task), job_num)
        check_environment(prepared.cfg)  # W&B key, devices: before anything is written
        check_evaluation(prepared.cfg)
        record = write_record(prepared, hc)
    except (ConfigError, PreflightError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:  # the run folder cannot be made (a path the schema could not foresee)
        print(
            f"error: run_dir: cannot create the run folder {e.filename}: {e.strerror}",
            file=sys.stderr,
        )
        sys.exit(2)
    root = logging.getLogger()
    root.setLevel(prepared.cfg.logging.level)
    # The terminal's log, also kept in the run directory (appended to by every resume).
    log_file = logging.FileHandler(prepared.run_dir / LOG_FILE)
    if root.handlers and root.handlers[0].formatter is not None:
        log_file.setFormatter(root.handlers[0].formatter)
    root.addHandler(log_file)
    # The terminal: short lines, and the actors' and Ray's internals only in the file.
    setup_terminal(root, bool(OmegaConf.select(prepared.cfg, "logging.actors_to_terminal")))
    logging.getLogger(__name__).info(
        "%s %s (config recorded in %s)",
        "resuming" if prepared.resumed else "starting",
        prepared.run_dir,
        record,
    )
    if prepared.filled:
        logging.getLogger(__name__).info(
            "keys new since the run started take today's defaults: %s", ", ".join(prepared.filled)
        )
    # Deferred: learner.start (the run, the generations) brings torch and Ray (1.9 s to import
    # here, measured), so a bad command line is answered in 0.4 s instead of 2.3 s.
    from learner.start import run

    try:
        run(prepared.cfg)
    finally:
        root.removeHandler(log_file)
        log_file.close()


def check_evaluation(cfg: DictConfig) -> None:
    """The evaluator's settings (its ladder's player specs, the rated table) are checked here,
    not first inside its Ray actor after the run has started; ConfigError naming the key."""
    if not cfg.evaluation.enabled:
        return
    from evaluation.evaluator.settings import (
        EvalSettings,  # torch: learner.run imports it next anyway
    )

    try:
        EvalSettings.from_config(OmegaConf.to_container(cfg, resolve=True))
    except (ValueError, KeyError) as e:
        message = " ".join(str(e).split()) or repr(e)
        raise ConfigError(
            message if "evaluation." in message else f"evaluation: {message}"
        ) from None


FULL_ERROR = "HYDRA_FULL_ERROR"  # makes Hydra raise a refused override instead of printing it


def main() -> None:
    """Hydra prints a refused override itself, in five lines suggesting ``+key`` (which would
    start a run with the key ignored); with HYDRA_FULL_ERROR set it raises instead, and this
    prints one line with the nearest valid names, exit status 2. Once the run has begun, errors
    are Hydra's to report as before (the variable is unset again)."""
    overrides = [a for a in sys.argv[1:] if not a.startswith("-")]
    ours = FULL_ERROR not in os.environ
    os.environ.setdefault(FULL_ERROR, "1")
    started = False

    def task(cfg: DictConfig) -> None:
        nonlocal started
        started = True
        if ours:
            os.environ.pop(FULL_ERROR, None)
        _main(cfg)

    task.__module__ = _main.__module__  # Hydra names the job after the task's module
    try:
        hydra.main(config_path=config_path(), config_name="config", version_base="1.3")(task)()
    except (HydraException, OmegaConfBaseException) as e:
        if started or not ours:
            raise
        print(f"error: {override_error_message(e, overrides)}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
