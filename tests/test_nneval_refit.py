"""`python -m learner.nneval.refit`: another evaluation from stored shards, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from actors.ab_selfplay import ABSettings, play_ab_game
from game import nneval
from game.openings import load_openings
from learner.nneval import shards
from learner.nneval.model import NNEvalModel
from learner.nneval.refit import main


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, Path]:
    """A 6x6 generation's shards (80 games of a random evaluation at depth 3) and that file."""
    folder = tmp_path_factory.mktemp("refit")
    torch.manual_seed(5)
    model = NNEvalModel(6, 32, 8, 8)
    net = nneval.quantise(model.float_weights(), size=6, output_scale=200)
    parent = nneval.save(net, folder / "parent.nn")
    deck = load_openings("deck", 6)
    settings = ABSettings(depth=3, size=6, max_plies=100)
    rows = np.concatenate(
        [
            play_ab_game(net.core(), deck, settings, seed=1, generation=0, game_id=i)
            for i in range(80)
        ]
    )
    shards.write_shard(folder / "gen-000", rows, 0, 80, "test-store")
    return folder / "gen-000", parent


def test_refit_writes_a_checked_evaluation_with_its_settings(data, tmp_path: Path, capsys) -> None:
    folder, parent = data
    out = tmp_path / "wider.nn"
    args = ["--data", str(folder), "--size", "6", "--hidden", "64", "--dense1", "16"]
    assert main([*args, "--epochs", "3", "--lambda-end", "0.5", "--out", str(out)]) == 0
    net = nneval.load(out)
    assert net.hidden == 64 and net.size == 6
    settings = json.loads(net.metadata["settings"])
    assert settings["epochs"] == 3 and settings["lambda_end"] == 0.5 and settings["hidden"] == 64
    assert net.metadata["parent_sha256"] == "none" and str(folder) in net.metadata["trained_on"]
    said = capsys.readouterr().out
    assert f"wrote {out}" in said and "held-out loss" in said
    # Warm-started from the parent where the shapes match: the file names it.
    out2 = tmp_path / "warm.nn"
    warm = [
        "--data",
        str(folder),
        "--size",
        "6",
        "--hidden",
        "32",
        "--dense1",
        "8",
        "--dense2",
        "8",
    ]
    assert main([*warm, "--epochs", "1", "--parent", str(parent), "--out", str(out2)]) == 0
    assert nneval.load(out2).metadata["parent_sha256"] != "none"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--lambda-end", "1.5"], "--lambda-end must be in [0, 1], got 1.5"),
        (["--hidden", "48"], "--hidden must be a multiple of 32 up to 256"),
        (["--dense2", "65"], "--dense2 must be at most 64"),
        (["--epochs", "0"], "--epochs must be >= 1"),
        (["--parent", "nowhere.nn"], "nowhere.nn: no such evaluation file"),
    ],
)
def test_refit_refuses_bad_settings_in_one_line(data, tmp_path, capsys, extra, says) -> None:
    folder, _ = data
    out = tmp_path / "x.nn"
    assert main(["--data", str(folder), "--size", "6", "--out", str(out), *extra]) == 2
    assert says in capsys.readouterr().err and not out.exists()


def test_refit_refuses_a_folder_without_shards_and_a_foreign_parent(data, tmp_path, capsys):
    folder, _ = data
    out = tmp_path / "x.nn"
    assert main(["--data", str(tmp_path), "--size", "6", "--out", str(out)]) == 2
    assert f"{tmp_path}: no Parquet shards" in capsys.readouterr().err
    junk = tmp_path / "junk.nn"
    junk.write_bytes(b"not an evaluation")
    assert main(["--data", str(folder), "--size", "6", "--out", str(out), "--parent", str(junk)])
    assert "junk.nn" in capsys.readouterr().err and not out.exists()
