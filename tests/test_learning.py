"""Learning is pinned by a player that gets stronger: a few minutes of self-play on 6x6.

Slow (about 6 minutes on two cores): `python -m learner` trains from a random network on the
small board; the trained network's MCTS must then beat the random player and minimax depth 1 in
seeded matches over every 3-ply start, where the same search with uniform priors loses to
minimax depth 1 (measured when this test was written: 20% for uniform priors against 77.5%
after 3.5 minutes of training). The 8x8 figures are in docs/results.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.match_workers import run_match
from game.openings import load_openings

ROOT = Path(__file__).resolve().parents[1]
TRAIN_MINUTES = 4
GAMES = 40  # 20 openings, each with colours reversed
SIMULATIONS = 100


@pytest.mark.slow
def test_six_by_six_training_beats_random_and_minimax_1(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "learner",
        "game=small",
        "model.board_size=6",
        f"run_dir={run_dir}",
        f"learner.time_limit_min={TRAIN_MINUTES}",
        "selfplay.actors=1",
        "selfplay.openings=start",
        "mcts.simulations=48",
        "replay.min_positions=1000",
        "replay.window_positions=30000",
        "replay.sample_ratio=6",
        "learner.batch_size=128",
        "logging.wandb.mode=disabled",
        "cluster.address=local",
        "seed=1",
    ]
    proc = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=60 * (TRAIN_MINUTES + 6)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    checkpoint = run_dir / "checkpoints" / "latest.safetensors"
    assert checkpoint.is_file()

    openings = load_openings("deck", 6)
    trained = f"{checkpoint}:sims={SIMULATIONS}"
    for opponent in ("random:7", "minimax:1"):
        result = run_match(
            trained, opponent, openings, games=GAMES, seed=3, size=6, ray_mode="off", workers=1
        )
        score = result.score
        assert score > 0.6, (
            f"{trained} vs {opponent}: W/D/L {result.wins}/{result.draws}/{result.losses}"
        )
