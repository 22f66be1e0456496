"""Every file of a run directory (``python -m learner``), named once.

Writers and readers import these names and join them to the run directory; nobody retypes
``"eval/ratings.csv"``. A name is relative to the run directory unless its comment says under
which folder it lives. Who writes what (docs/architecture.md has the whole map):

=====================================  ==========================================================
``.hydra/``                            the run's config and overrides, once, and a
                                       ``resume-<time>/`` per resume (``learner.run_record``)
``learner.log``                        the terminal's lines, appended by every start
``git_revision.txt``                   the code's revision (``learner.run``)
``checkpoints/state_<step>.safetensors``  resumable training states (``learner.trainer``)
``checkpoints/latest.safetensors``     the newest network: what a player takes
``checkpoints/weights/step_<step>``    the network at each checkpoint, the newest kept
``checkpoints/weights/best_v<V>``      every version the gate promoted (``learner.retention``)
``games/selfplay.pdn``                 sampled self-play games (``learner.run``)
``games/live.json``                    a game an actor is playing now (``checkerzero.store.live``)
``eval/``                              the evaluator's PDN games, ``decisions.jsonl``,
                                       ``ratings.csv``/``.png``, ``curve.csv``,
                                       ``elo_curve.png``
``metrics.csv``                        every metric over time (``checkerzero.metrics``)
``loss.png``, ``elo_by_step.png``,     its plots: losses and ratings by training step,
``throughput.png``, ``replay.png``     rates and the replay window by the run's minutes
``redis/``                             the private Redis's data (``checkerzero.store.redis_server``)
``summary.json``                       the run's end state (``learner.run``)
=====================================  ==========================================================

The play server (``play.runs``) reads ``metrics.csv``, ``summary.json``, ``eval/ratings.csv``,
``checkpoints/latest.safetensors`` and the PDN files of ``games/`` and ``eval/``.
"""

from __future__ import annotations

import re

# --- the record of the run (learner.run_record, learner.run) ---------------------------------
RECORD_DIR = ".hydra"  # the run's config and overrides, and one folder per resume
RECORD_CONFIG = "config.yaml"  # under RECORD_DIR: the run's resolved config, written once
RECORD_OVERRIDES = "overrides.yaml"  # under RECORD_DIR: the command line's overrides, once
RESUME_PREFIX = "resume-"  # under RECORD_DIR: resume-<time>/, one record per resume
LOG_FILE = "learner.log"  # the terminal's log lines, appended by every start of the run
REVISION_FILE = "git_revision.txt"  # the code's revision (-dirty with local changes)
SUMMARY_FILE = "summary.json"  # the run's end state, for scripts; the log shows it as text

# --- checkpoints (learner.trainer, learner.retention) ----------------------------------------
CHECKPOINT_DIR = "checkpoints"  # a directory holding this is a run
MODEL_FILE = "latest.safetensors"  # under CHECKPOINT_DIR: the newest network, a model checkpoint
MODEL_PATH = f"{CHECKPOINT_DIR}/{MODEL_FILE}"
STATE_PATTERN = re.compile(r"^state_(\d{8})\.safetensors$")  # under CHECKPOINT_DIR
WEIGHTS_DIR = "weights"  # under CHECKPOINT_DIR: the network at each checkpoint, promoted ones
STEP_PATTERN = re.compile(r"^step_(\d{8})\.safetensors$")  # under WEIGHTS_DIR
BEST_GLOB = "best_v*.safetensors"  # under WEIGHTS_DIR
BEST_PATTERN = re.compile(r"^best_v(\d{5,})\.safetensors$")  # under WEIGHTS_DIR


def state_name(step: int) -> str:
    """The training state saved at ``step`` (under CHECKPOINT_DIR)."""
    return f"state_{step:08d}.safetensors"


def step_name(step: int) -> str:
    """The network saved at ``step`` (under WEIGHTS_DIR)."""
    return f"step_{step:08d}.safetensors"


def best_name(version: int) -> str:
    """A promoted version's network (under WEIGHTS_DIR)."""
    return f"best_v{version:05d}.safetensors"


def best_version(name: str) -> int | None:
    """The version of a promoted network's file name (`best_name`), None for any other name."""
    m = BEST_PATTERN.match(name)
    return int(m.group(1)) if m else None


# --- games -----------------------------------------------------------------------------------
GAMES_DIR = "games"
SELFPLAY_PDN = f"{GAMES_DIR}/selfplay.pdn"  # self-play games, each once, appended
LIVE_FILE = f"{GAMES_DIR}/live.json"  # an actor's game in progress, rewritten

# --- the evaluator (evaluation) ---------------------------------------------------------------
EVAL_DIR = "eval"  # PDN games of the gate and the ladder, and the files below
DECISIONS_FILE = "decisions.jsonl"  # under EVAL_DIR: one gate decision per line
RATINGS_CSV = "ratings.csv"  # under EVAL_DIR: the ladder, then candidates by version
RATINGS_PNG = "ratings.png"  # under EVAL_DIR
CURVE_CSV = "curve.csv"  # under EVAL_DIR: each candidate's rating by step, wall time, positions
CURVE_PNG = "elo_curve.png"  # under EVAL_DIR: the same, plotted by step, minutes and positions
RATINGS_PATH = f"{EVAL_DIR}/{RATINGS_CSV}"
GAME_FOLDERS = (GAMES_DIR, EVAL_DIR)  # the folders whose *.pdn files the play server lists

# --- metrics (checkerzero.metrics) ------------------------------------------------------------
METRICS_CSV = "metrics.csv"  # long form: time_s, step, key, value
LOSS_PNG = "loss.png"  # the losses by training step
ELO_BY_STEP_PNG = "elo_by_step.png"  # each rating once, at its weights' training step
THROUGHPUT_PNG = "throughput.png"  # self-play positions and training samples per second
REPLAY_PNG = "replay.png"  # the replay window and the positions ever added

# --- the private Redis (checkerzero.store.redis_server) ---------------------------------------
REDIS_DIR = "redis"  # its append-only file, config, password and log
