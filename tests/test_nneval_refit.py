"""`python -m learner.nneval.refit` and `relabel`: another evaluation from stored shards, the
shards labelled again by a network, and what each refuses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from actors.ab_selfplay import ABSettings, play_ab_game
from checkerzero.network.checkpoint import save_checkpoint
from checkerzero.network.model import CheckersNet, ModelConfig
from checkerzero.store.positions import FLAG_EXACT, POSITION_DTYPE
from checkerzero.store.positions import FLAG_WHITE_TO_MOVE as FLAG_WHITE
from game import _core, nneval
from game.openings import load_openings
from learner.nneval import shards
from learner.nneval.fit import FitSettings, fit, targets
from learner.nneval.model import NNEvalModel
from learner.nneval.refit import main
from learner.nneval.relabel import SearchJudge, Teacher, blend_scores
from learner.nneval.relabel import main as relabel


def generation_shards(folder: Path, net: nneval.NNEvalNet, games: int) -> Path:
    """``folder``/gen-000: a 6x6 generation's shard of ``games`` games of ``net`` at depth 3."""
    deck = load_openings("deck", 6)
    settings = ABSettings(depth=3, size=6, max_plies=100)
    rows = np.concatenate(
        [
            play_ab_game(net.core(), deck, settings, seed=1, generation=0, game_id=i)
            for i in range(games)
        ]
    )
    shards.write_shard(folder / "gen-000", rows, 0, games, "test-store")
    return folder / "gen-000"


def test_positions_before_result_from_ply_take_their_search_score_alone() -> None:
    # Four positions scored +200 centi-men (expected score 0.731 at output_scale 200) in games
    # the mover lost; the last is the database's exact win.
    rows = np.zeros(4, POSITION_DTYPE)
    rows["score"], rows["result"] = 200, -1
    rows["ply"] = [10, 39, 40, 12]
    rows["flags"][3], rows["result"][3] = FLAG_EXACT, 1
    search = 1 / (1 + np.exp(-1.0))
    blended = 0.5 * search
    got = targets(rows, 0.5, 200).numpy()
    np.testing.assert_allclose(got, [blended, blended, blended, 1.0], rtol=1e-6)
    got = targets(rows, 0.5, 200, result_from_ply=40).numpy()
    np.testing.assert_allclose(got, [search, search, blended, 1.0], rtol=1e-6)
    flipped = targets(rows, 0.5, 200, flip=True, result_from_ply=40).numpy()
    np.testing.assert_allclose(flipped, [1 - search, 1 - search, 1 - blended, 0.0], rtol=1e-6)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, Path]:
    """A 6x6 generation's shards (80 games of a random evaluation at depth 3) and that file."""
    folder = tmp_path_factory.mktemp("refit")
    torch.manual_seed(5)
    model = NNEvalModel(6, 32, 8, 8)
    net = nneval.quantise(model.float_weights(), size=6, output_scale=200)
    parent = nneval.save(net, folder / "parent.nn")
    return generation_shards(folder, net, 80), parent


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
        (["--result-from-ply", "-1"], "--result-from-ply must be >= 0"),
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


def test_steps_train_that_many_steps_across_epochs_whatever_the_data(data) -> None:
    folder, _ = data
    paths = shards.shard_files(folder)
    rows = shards.count_rows(paths)
    batch = 256
    per_epoch = -(-int(rows * 0.98) // batch)
    want = 2 * per_epoch + 3  # into a third pass
    s = FitSettings(hidden=32, dense1=8, dense2=8, batch=batch, steps=want, epochs=1)
    _, history = fit(paths, s, 6)
    assert history[-1]["step"] == want and len(history) == 3
    assert history[-1]["lambda"] == pytest.approx(s.lambda_end, abs=0.02)
    _, by_epochs = fit(paths, FitSettings(hidden=32, dense1=8, dense2=8, batch=batch, epochs=2), 6)
    assert len(by_epochs) == 2 and by_epochs[-1]["step"] >= 2 * (per_epoch - 1)


def test_blend_scores_mixes_expected_scores_and_keeps_exact_values() -> None:
    score = np.array([0, 0, 0, 400, 30000], np.int16)
    teacher = np.array([1.0, 0.0, 0.5, 0.5, 0.0])
    exact = np.array([False, False, False, False, True])
    new = blend_scores(score, teacher, exact, 0.5, 200)
    # 0.5 * 1.0 + 0.5 * 0.5 = 0.75: 200 * ln 3; the teacher's 0 with weight 1 clips; exact stays
    assert new[0] == round(200 * np.log(3)) and new[1] == -new[0] and new[2] == 0
    assert 0 < new[3] < 400 and new[4] == 30000
    assert blend_scores(score[:2], teacher[:2], exact[:2], 1.0, 200)[1] == round(
        200 * np.log(1e-4 / (1 - 1e-4))
    )


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    torch.manual_seed(2)
    path = tmp_path_factory.mktemp("teacher") / "tiny6.safetensors"
    config = ModelConfig(board_size=6, blocks=1, channels=8, policy_channels=4, value_channels=2)
    save_checkpoint(path, CheckersNet(config), step=0, version=1)
    return path


def test_relabel_writes_the_same_rows_with_the_teachers_blend(data, teacher, tmp_path, capsys):
    folder, _ = data
    out = tmp_path / "relabelled"
    argv = ["--data", str(folder), "--out", str(out), "--teacher", str(teacher), "--size", "6"]
    assert relabel([*argv, "--weight", "0.6"]) == 0
    assert f"into {out}" in capsys.readouterr().out
    (src,) = shards.shard_files(folder)
    (dest,) = shards.shard_files(out)
    assert dest.name == src.name
    old = np.concatenate(list(shards.iter_rows([src])))
    new = np.concatenate(list(shards.iter_rows([dest])))
    for column in ("black", "white", "kings", "flags", "result", "game", "ply"):
        assert np.array_equal(old[column], new[column]), column
    exact = (old["flags"] & FLAG_EXACT) != 0
    want = blend_scores(old["score"], Teacher(teacher, 6)(old), exact, 0.6, 200)
    assert np.array_equal(new["score"], want) and not np.array_equal(new["score"], old["score"])
    assert np.array_equal(new["score"][exact], old["score"][exact])
    source = json.loads((out / "source.json").read_text())
    assert source["relabel"]["weight"] == 0.6 and len(source["relabel"]["teacher_sha256"]) == 64
    # Shards already written are kept; another weight into the same folder is refused.
    assert relabel([*argv, "--weight", "0.6"]) == 0 and "0 shards" not in capsys.readouterr().err
    assert relabel([*argv, "--weight", "0.9"]) == 2
    assert "relabelled with" in capsys.readouterr().err
    # The copy trains like any generation's folder.
    nn = tmp_path / "t.nn"
    assert main(["--data", str(out), "--size", "6", "--hidden", "32", "--out", str(nn)]) == 0


def test_relabel_refuses_bad_input_in_one_line(data, teacher, tmp_path, capsys) -> None:
    folder, _ = data
    base = ["--out", str(tmp_path / "o"), "--size", "6"]
    assert relabel(["--data", str(tmp_path), *base, "--teacher", str(teacher)]) == 2
    assert "no Parquet shards" in capsys.readouterr().err
    assert relabel(["--data", str(folder), *base, "--teacher", str(teacher), "--weight", "0"]) == 2
    assert "--weight must be in (0, 1]" in capsys.readouterr().err
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"junk")
    assert relabel(["--data", str(folder), *base, "--teacher", str(junk)]) == 2
    assert "junk.safetensors" in capsys.readouterr().err
    assert relabel(["--data", str(folder), "--out", str(folder), "--teacher", str(teacher)]) == 2
    assert "another folder" in capsys.readouterr().err


def test_relabel_by_a_deeper_search_gives_its_scores(data, tmp_path, capsys) -> None:
    folder, parent = data
    out = tmp_path / "deeper"
    argv = ["--data", str(folder), "--out", str(out), "--size", "6", "--evaluation", str(parent)]
    assert relabel([*argv, "--search-depth", "5", "--weight", "1"]) == 0
    (src,) = shards.shard_files(folder)
    old = np.concatenate(list(shards.iter_rows([src])))
    new = np.concatenate(list(shards.iter_rows(shards.shard_files(out))))
    exact = (old["flags"] & FLAG_EXACT) != 0
    assert np.array_equal(new["score"][exact], old["score"][exact])
    # Each label is that of a depth-5 search by the file; the first row's table starts empty, so
    # its label is a fresh search's score exactly (to the rounding of the expected-score round
    # trip), and the rows' signs are the searches'.
    judged = SearchJudge(parent, 5, 6, 200).scores(old)
    row = old[0]
    first = _core.Game.from_bitboards(
        6, int(row["black"]), int(row["white"]), int(row["kings"]), bool(row["flags"] & FLAG_WHITE)
    )
    fresh = _core.alphabeta_search(first, 5, 0, None, 16, None, nneval.load(parent).core())
    assert judged[0] == max(-nneval.SCORE_LIMIT, min(nneval.SCORE_LIMIT, fresh.score))
    small = ~exact & (np.abs(judged) < 1000)
    assert small.sum() > 100
    assert np.abs(new["score"][small] - judged[small]).max() <= 1
    assert np.array_equal(np.sign(new["score"][~exact]), np.sign(judged[~exact]))
    # The depth-5 search is a different judge from the depth-3 one that played the games.
    assert not np.array_equal(new["score"][~exact], old["score"][~exact])
    record = json.loads((out / "source.json").read_text())["relabel"]
    assert record["judge"] == "search" and record["depth"] == 5 and record["weight"] == 1.0
    assert record["evaluation"] == parent.name and len(record["evaluation_sha256"]) == 64
    # Another depth into the same folder is refused; the copy trains like any generation's.
    assert relabel([*argv, "--search-depth", "6", "--weight", "1"]) == 2
    assert "relabelled with" in capsys.readouterr().err
    assert (
        main(["--data", str(out), "--size", "6", "--hidden", "32", "--out", str(tmp_path / "d.nn")])
        == 0
    )


def test_relabel_by_search_refuses_a_bad_depth_or_evaluation(data, teacher, tmp_path, capsys):
    folder, _ = data
    base = ["--data", str(folder), "--out", str(tmp_path / "o"), "--size", "6"]
    assert relabel([*base, "--search-depth", "0"]) == 2
    assert "--search-depth must be in 1..32" in capsys.readouterr().err
    junk = tmp_path / "junk.nn"
    junk.write_bytes(b"\x00" * 64)
    assert relabel([*base, "--search-depth", "3", "--evaluation", str(junk)]) == 2
    assert "junk.nn" in capsys.readouterr().err
    # The shipped file is of the 8x8 board: refused for 6x6 positions, naming it.
    assert relabel([*base, "--search-depth", "3"]) == 2
    err = capsys.readouterr().err
    assert nneval.DEFAULT_PATH.name in err and "6x" in err
    with pytest.raises(SystemExit):  # one judge only
        relabel([*base, "--search-depth", "3", "--teacher", str(teacher)])
