"""The names of the metrics that more than one module writes or reads: one owner for each.

Keys are namespaced by the process that measures them (``learner/``, ``selfplay/``,
``replay/``, ``eval/``). Writers and readers import these constants; a metric only one module
ever sees may keep its literal name there.
"""

from __future__ import annotations

# The learner
STEP = "learner/step"  # W&B's x axis for every chart (define_metric)
WALL_S = "learner/wall_s"  # an alternative x axis: the run's seconds, resumes summed
LOSS_POLICY = "learner/loss_policy"
LOSS_VALUE = "learner/loss_value"
LOSS_TOTAL = "learner/loss_total"
LOSS_MOVES_LEFT = "learner/loss_moves_left"  # only with the moves-left head
MOVES_LEFT_MAE = "learner/moves_left_mae_plies"
SAMPLES_PER_S = "learner/samples_per_s"
WEIGHTS_VERSION = "learner/weights_version"

# Self-play and the replay store
SELFPLAY_POSITIONS_PER_S = "selfplay/positions_per_s"
SELFPLAY_GAMES_PER_S = "selfplay/games_per_s"
REPLAY_WINDOW_POSITIONS = "replay/window_positions"
REPLAY_POSITIONS_ADDED = "replay/positions_added"

# The evaluator: its newest rating, as the learner logs it (evaluation.evaluator.records
# stores them without the prefix in its Redis hash and reads them back with it)
EVAL_PREFIX = "eval/"
EVAL_VERSION = "eval/version"
EVAL_ELO = "eval/elo"
EVAL_ELO_LOWER = "eval/elo_lower"
EVAL_ELO_UPPER = "eval/elo_upper"
EVAL_GAMES = "eval/games"
EVAL_STEP = "eval/step"  # the training step of the evaluated candidate's weights
EVAL_POSITIONS = "eval/positions"
EVAL_WALL_S = "eval/wall_s"
EVAL_BEST_VERSION = "eval/best_version"
EVAL_BEST_ELO = "eval/best_elo"
EVAL_BEST_ELO_LOWER = "eval/best_elo_lower"
EVAL_BEST_ELO_UPPER = "eval/best_elo_upper"
EVAL_PROMOTIONS = "eval/promotions"
EVAL_GATES = "eval/gates"
EVAL_GATE_LLR = "eval/gate_llr"
EVAL_GATE_GAMES = "eval/gate_games"
EVAL_GATE_ACCEPT = "eval/gate_accept"
EVAL_DRAW_ELO = "eval/draw_elo"


def eval_ladder(rung: str) -> str:
    """A ladder rung's rating, e.g. ``eval/ladder/minimax:4``."""
    return f"{EVAL_PREFIX}ladder/{rung}"
