"""The learned alpha-beta evaluation: incremental accumulators, exact quantised arithmetic, the
weights file's checks, and the search with it."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import numpy as np
import pytest

from game import _core, nneval
from game.position import Position

SHOT_FEN = "B:W21,22,24,28,32:B1,7,10,13,14"  # tests/test_alphabeta.py: 14-17 wins a man


def random_net(
    seed: int, size: int = 8, hidden: int = 32, dense1: int = 16, dense2: int = 8
) -> nneval.NNEvalNet:
    """Random float weights, quantised: scaled so that activations spread over [0, 1]."""
    rng = np.random.default_rng(seed)
    inputs = 4 * size * size // 2
    floats = {
        "ft_w": rng.normal(0, 0.25, (inputs, hidden)),
        "ft_b": rng.normal(0.3, 0.2, hidden),
        "l1_w": rng.normal(0, 0.4, (dense1, 2 * hidden)),
        "l1_b": rng.normal(0.1, 0.2, dense1),
        "l2_w": rng.normal(0, 0.5, (dense2, dense1)),
        "l2_b": rng.normal(0.1, 0.2, dense2),
        "out_w": rng.normal(0, 2.0, dense2),
        "out_b": rng.normal(0, 0.2, 1),
    }
    return nneval.quantise(floats, size=size, output_scale=300)


def material_net() -> nneval.NNEvalNet:
    """A hand-built net that scores material only: 100 a man, 129.7 a king (the total truncated).

    Four first-layer units count own men, own kings, the opponent's men and kings (10 each, so a
    full side stays under the clip at 127); the dense layers pass them through (weight 64 = 1.0)
    and the output weighs them 64 and 83 for 1270 centi-men per logit: 10 * 64 * 1270 / 8128 = 100.
    """
    squares = 32
    ft_w = np.zeros((4 * squares, 4), np.int16)
    for kind in range(4):
        ft_w[kind * squares : (kind + 1) * squares, kind] = 10
    eye = np.eye(4, dtype=np.int8) * 64
    tensors = {
        "ft_w": ft_w,
        "ft_b": np.zeros(4, np.int16),
        "l1_w": np.concatenate([eye, np.zeros((4, 4), np.int8)], axis=1),
        "l1_b": np.zeros(4, np.int32),
        "l2_w": eye.copy(),
        "l2_b": np.zeros(4, np.int32),
        "out_w": np.array([64, 83, -64, -83], np.int16),
        "out_b": np.zeros(1, np.int32),
    }
    return nneval.NNEvalNet(8, 1270, tensors)


GOLDEN_SEARCHES = Path(__file__).parent / "golden" / "nneval_search_depth8.txt"


def _kernels() -> list[bool]:
    """The kernels this machine runs: the plain ones always, AVX2 where the CPU has it."""
    probe = random_net(0).core()
    return [False, True] if probe.simd_unusable == "" else [False]


def with_kernels(net: nneval.NNEvalNet, simd: bool) -> _core.NNEvalWeights:
    core = net.core()
    core.simd = simd
    return core


def random_positions(rng: random.Random, count: int, size: int = 8) -> list[_core.Game]:
    games = []
    for _ in range(count):
        game = _core.Game(size)
        for _ in range(rng.randrange(0, 70)):
            moves = game.legal_moves()
            if not moves or game.result() != 0:
                break
            game.make(rng.choice(moves))
        games.append(game)
    return games


@pytest.mark.parametrize("size", [8, 6])
@pytest.mark.parametrize("simd", _kernels())
def test_incremental_updates_equal_a_full_recompute(size: int, simd: bool) -> None:
    net = random_net(1, size=size)
    core = with_kernels(net, simd)
    rng = random.Random(7)
    checked = 0
    for _ in range(30):  # games
        game = _core.Game(size)
        tracker = _core.NNEvalTracker(core, game)
        for _ in range(120):  # random makes and unmakes
            moves = game.legal_moves()
            if moves and game.result() == 0 and (game.depth == 0 or rng.random() < 0.75):
                game.make(rng.choice(moves))
                tracker.push(game)
            elif game.depth > 0:
                game.undo()
                tracker.pop()
            else:
                break
            assert tracker.depth == game.depth
            full = _core.nneval_accumulator(core, game)
            assert np.array_equal(tracker.accumulator(core), full)
            assert tracker.evaluate() == _core.nneval_evaluate(core, game)
            checked += 1
    assert checked > 2000


def test_quantised_core_equals_the_numpy_reference() -> None:
    rng = random.Random(3)
    for seed in range(3):
        net = random_net(seed + 10)
        core = net.core()
        scores = set()
        for _ in range(150):
            game = _core.Game(8)
            for _ in range(rng.randrange(0, 60)):
                moves = game.legal_moves()
                if not moves or game.result() != 0:
                    break
                game.make(rng.choice(moves))
            acc = nneval.reference_accumulators(net, game.black, game.white, game.kings)
            assert np.array_equal(_core.nneval_accumulator(core, game), acc)
            want = nneval.reference_evaluate(
                net, game.black, game.white, game.kings, game.white_to_move
            )
            assert _core.nneval_evaluate(core, game) == want
            scores.add(want)
        assert len(scores) > 50  # the positions really differ in score


@pytest.mark.parametrize(
    ("hidden", "dense1", "dense2"),
    [(64, 16, 16), (32, 16, 8), (96, 12, 5), (128, 64, 64), (256, 7, 3)],
)
def test_simd_and_plain_kernels_agree_with_the_reference(
    hidden: int, dense1: int, dense2: int
) -> None:
    """Every width the AVX2 kernels pad (rows to 4, inputs to 32) and every block size of the
    accumulator update, against the plain kernels and the NumPy reference."""
    if True not in _kernels():
        pytest.skip(f"no AVX2 kernels here: {random_net(0).core().simd_unusable}")
    net = random_net(hidden + dense1, hidden=hidden, dense1=dense1, dense2=dense2)
    plain, simd = with_kernels(net, False), with_kernels(net, True)
    assert simd.simd and not plain.simd
    rng = random.Random(hidden)
    scores = set()
    for game in random_positions(rng, 120):
        want = nneval.reference_evaluate(
            net, game.black, game.white, game.kings, game.white_to_move
        )
        assert _core.nneval_evaluate(plain, game) == want
        assert _core.nneval_evaluate(simd, game) == want
        scores.add(want)
    assert len(scores) > 40
    # Incremental updates along random games: both kernels equal a full recompute.
    for game_index in range(10):
        game = _core.Game(8)
        trackers = [_core.NNEvalTracker(k, game) for k in (plain, simd)]
        for _ in range(rng.randrange(20, 90)):
            moves = game.legal_moves()
            if not moves or game.result() != 0:
                break
            game.make(rng.choice(moves))
            full = _core.nneval_accumulator(plain, game)
            for t, k in zip(trackers, (plain, simd), strict=True):
                t.push(game)
                assert np.array_equal(t.accumulator(k), full), game_index
                assert t.evaluate() == _core.nneval_evaluate(plain, game)


def test_simd_switch_refuses_what_it_cannot_run() -> None:
    core = random_net(2, hidden=48).core()  # not a multiple of 32: the plain kernels only
    assert not core.simd
    assert "multiple of 32" in core.simd_unusable
    with pytest.raises(ValueError, match="multiple of 32, this one is 48"):
        core.simd = True
    core.simd = False  # always allowed


def golden_searches() -> list[tuple[str, int, str, int]]:
    rows = []
    for line in GOLDEN_SEARCHES.read_text().splitlines():
        if line and not line.startswith("#"):
            fen, depth, move, score = line.split()
            rows.append((fen, int(depth), move, int(score)))
    return rows


@pytest.mark.parametrize("simd", _kernels())
def test_fixed_depth_searches_are_unchanged_by_the_speed_work(simd: bool) -> None:
    """The first shipped evaluation's best move and score at depth 8 on positions from real
    games, as the search gave them before its accumulators became lazy, its scores cached and its
    kernels vectorised (tests/golden/nneval_search_depth8.txt)."""
    core = with_kernels(nneval.load(nneval.FIRST_PATH), simd)  # the file the goldens came from
    rows = golden_searches()
    assert len(rows) == 15
    for fen, depth, move, score in rows:
        result = _core.alphabeta_search(Position.from_fen(fen).game, depth, 0, None, 4, None, core)
        assert (str(result.move), result.score) == (move, score), fen


def test_both_kernels_search_the_same_tree() -> None:
    """Same move, score, principal variation and node count with either kernel and whatever the
    score cache holds from earlier searches (a random net whose scores spread widely)."""
    if True not in _kernels():
        pytest.skip("no AVX2 kernels here")
    net = random_net(21, hidden=64, dense1=16, dense2=16)
    plain, simd = with_kernels(net, False), with_kernels(net, True)
    for fen, *_ in golden_searches()[:6]:
        game = Position.from_fen(fen).game
        found = []
        for core in (plain, simd, plain):  # the third search meets a warm cache
            r = _core.alphabeta_search(game, 7, 0, None, 4, None, core)
            found.append((str(r.move), r.score, [str(m) for m in r.pv], r.nodes))
        assert found[0] == found[1] == found[2], fen


def test_material_net_scores_material() -> None:
    core = material_net().core()
    for fen, want in [
        ("B:W21,22:B1,7,10", 100),
        ("W:W21,22:B1,7,10", -100),
        ("B:WK21:B1", -29),  # 100 - 129.7, truncated towards zero
        ("W:WK21,K22:B1,2,3", -40),  # 2 * 129.7 - 300
    ]:
        assert _core.nneval_evaluate(core, Position.from_fen(fen).game) == want, fen


def test_search_with_the_learned_evaluation_finds_the_shot() -> None:
    core = material_net().core()
    pos = Position.from_fen(SHOT_FEN)
    for depth in (3, 6):
        result = _core.alphabeta_search(pos.game, depth, 0, None, 4, None, core)
        assert str(result.move) == "14-17"
        assert [str(m) for m in result.pv[:3]] == ["14-17", "21x14", "10x17x26"]
        assert 100 <= result.score < _core.MATE_THRESHOLD


def test_search_with_a_random_net_plays_legal_moves_to_the_end() -> None:
    core = random_net(5).core()
    pos = Position()
    while not pos.is_over() and pos.ply < 80:
        result = _core.alphabeta_search(pos.game, 3, 0, None, 4, None, core)
        assert result.move in pos.legal_moves()
        assert abs(result.score) <= nneval.SCORE_LIMIT or abs(result.score) >= _core.MATE_THRESHOLD
        pos.play(result.move)


def test_wrong_board_size_is_refused() -> None:
    core = random_net(1, size=6).core()
    with pytest.raises(ValueError, match="side 6, the game is on side 8"):
        _core.alphabeta_search(_core.Game(8), 2, 0, None, 4, None, core)


# ---- the file ----


def test_round_trip(tmp_path: Path) -> None:
    net = random_net(2)
    path = nneval.save(net, tmp_path / "n.safetensors")
    back = nneval.load(path)
    assert back.size == 8 and back.output_scale == 300
    for name in nneval.TENSORS:
        assert np.array_equal(back.tensors[name], net.tensors[name])
    game = Position.from_fen(SHOT_FEN).game
    assert _core.nneval_evaluate(back.core(), game) == _core.nneval_evaluate(net.core(), game)


def _rewrite(path: Path, edit) -> None:
    """Re-encode a file after ``edit(header_dict, body_bytes) -> (header, body)``."""
    data = path.read_bytes()
    (n,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8 : 8 + n])
    header, body = edit(header, data[8 + n :])
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)


def _meta(key: str, value: str):
    def edit(h, body):
        h["__metadata__"][key] = value
        return h, body

    return edit


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: p.write_bytes(p.read_bytes()[:-40]), "outside the file"),
        (lambda p: p.write_bytes(p.read_bytes()[:5]), "truncated"),
        (
            lambda p: p.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!"),
            "unreadable",
        ),
        (lambda p: p.write_bytes(b"\0" * (nneval.MAX_FILE_BYTES + 1)), "cap"),
        (lambda p: _rewrite(p, _meta("format", "checkerzero-book")), "format 'checkerzero-book'"),
        (lambda p: _rewrite(p, _meta("version", "2")), "version 2"),
        (lambda p: _rewrite(p, _meta("output_scale", "nan")), "not a finite integer"),
        (lambda p: _rewrite(p, _meta("output_scale", "inf")), "not a finite integer"),
        (lambda p: _rewrite(p, _meta("output_scale", "0")), "output scale 0"),
        (lambda p: _rewrite(p, _meta("board_size", "10")), "board_size 10"),
    ],
)
def test_damaged_files_are_refused(tmp_path: Path, damage, message: str) -> None:
    path = nneval.save(random_net(2), tmp_path / "n.safetensors")
    damage(path)
    with pytest.raises(nneval.NNEvalFileError, match=message) as err:
        nneval.load(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_wrong_shapes_dtypes_and_floats_are_refused(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    good = random_net(2)
    meta = {"format": nneval.FORMAT, "version": "1", "board_size": "8", "output_scale": "300"}
    cases = [
        ({"l1_w": good.tensors["l1_w"][:, :-1]}, "l1_w has shape"),
        ({"ft_w": good.tensors["ft_w"][:-4]}, "ft_w has shape"),
        ({"l2_w": good.tensors["l2_w"].astype(np.int16)}, "l2_w is int16, expected int8"),
        ({"out_w": np.full(8, np.nan, np.float32)}, "only integer tensors"),
        ({"extra": np.zeros(3, np.int8)}, "unexpected tensors \\['extra'\\]"),
    ]
    for change, message in cases:
        tensors = {**good.tensors, **change}
        path = tmp_path / "bad.safetensors"
        save_file(
            {k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path), metadata=meta
        )
        with pytest.raises(nneval.NNEvalFileError, match=message):
            nneval.load(path)
    # First-layer weights that could overflow the int16 accumulator on a full board.
    tensors = dict(good.tensors)
    tensors["ft_w"] = good.tensors["ft_w"].copy()
    tensors["ft_w"][0, 0] = 2000
    save_file(tensors, str(path), metadata=meta)
    with pytest.raises(nneval.NNEvalFileError, match="beyond the int16 accumulator"):
        nneval.load(path)
    with pytest.raises(nneval.NNEvalFileError, match="cannot read"):
        nneval.load(tmp_path / "missing.safetensors")


def test_quantise_refuses_non_finite_floats() -> None:
    floats = {k: np.zeros(v.shape) for k, v in random_net(1).tensors.items()}
    floats["l2_b"] = np.array([np.inf] + [0.0] * 7)
    with pytest.raises(ValueError, match="l2_b hold non-finite"):
        nneval.quantise(floats, size=8, output_scale=300)


# ---- the player ----


def test_player_spec_with_a_weights_file(tmp_path: Path) -> None:
    from evaluation.players.make import make_player

    path = nneval.save(material_net(), tmp_path / "material.safetensors")
    player = make_player(f"ab+nn:3:{path}")
    assert player.name == f"ab+nn:3:{path}"
    pos = Position.from_fen(SHOT_FEN)
    assert str(player.choose(pos)) == "14-17"
    assert player.stats()["moves"] == 1 and player.stats()["depth"] == 3
    timed = make_player(f"ab+nn:t30:{path}")
    assert (
        timed.name == f"ab+nn:t30:{path}" and timed.choose(Position()) in Position().legal_moves()
    )


def test_player_spec_refuses_a_bad_file(tmp_path: Path) -> None:
    from evaluation.players.make import make_player

    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a weights file")
    with pytest.raises(
        ValueError, match=f"player spec 'ab\\+nn:2:{bad}': learned evaluation {bad}"
    ):
        make_player(f"ab+nn:2:{bad}")
    with pytest.raises(ValueError, match="malformed player spec"):
        make_player("ab+nn:x")


# ---- training ----


def test_training_command_reads_a_run_and_writes_a_usable_file(tmp_path: Path) -> None:
    import torch

    from game.archive import read_archive
    from game.pdn import iter_pdn, write_pdn
    from learner.nneval import train as train_nneval

    games = [g for _, g in zip(range(20), iter_pdn(read_archive()), strict=False)]
    run = tmp_path / "run"
    (run / "games").mkdir(parents=True)
    (run / train_nneval.RUN_GAMES).write_text(write_pdn(games))
    positions = train_nneval.collect_positions([write_pdn(games[:3])], skip_plies=0)
    # Each position's result is the game's from its mover's side, and no capture is pending.
    for i in range(len(positions)):
        game = _core.Game.from_bitboards(
            8,
            int(positions.black[i]),
            int(positions.white[i]),
            int(positions.kings[i]),
            bool(positions.white_to_move[i]),
        )
        assert not game.legal_moves()[0].is_capture
    first = train_nneval.collect_positions([write_pdn(games[:1])], skip_plies=0)
    black_result = train_nneval.RESULT_FOR_BLACK[games[0].result]
    assert np.array_equal(first.result, np.where(first.white_to_move, -black_result, black_result))

    # The loss falls on this fixed small set (targets: the results), held out too.
    every = train_nneval.collect_positions([write_pdn(games)], skip_plies=6)
    settings = train_nneval.TrainSettings(
        hidden=16, dense1=8, dense2=8, epochs=10, batch=64, lr=2e-2
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _, report = train_nneval.train(every, every.result, settings)
    finally:
        torch.set_num_threads(threads)
    assert report["epoch9/train_loss"] < report["epoch0/train_loss"] - 0.05
    assert report["val_loss"] < report["val_loss_constant"] - 0.02

    out = tmp_path / "n.safetensors"
    argv = ["--run", str(run), "--no-archive", "--teacher", "", "--epochs", "1", "--out", str(out)]
    argv += ["--hidden", "16", "--dense1", "8", "--dense2", "8", "--batch", "256"]
    assert train_nneval.main(argv) == 0
    net = nneval.load(out)
    assert net.hidden == 16 and net.metadata["teacher"] == "none"
    assert int(net.metadata["positions"]) == len(every)


def test_training_command_refuses_a_run_without_games(tmp_path: Path, capsys) -> None:
    from learner.nneval import train as train_nneval

    assert train_nneval.main(["--run", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert "no self-play games at" in capsys.readouterr().err


def test_the_shipped_file_loads_and_the_default_spec_plays() -> None:
    from evaluation.players.make import make_player

    net = nneval.load(nneval.DEFAULT_PATH)
    assert net.size == 8 and net.metadata["format"] == nneval.FORMAT
    assert nneval.DEFAULT_PATH.stat().st_size < nneval.MAX_FILE_BYTES
    player = make_player("ab+nn:4")
    assert player.name == "ab+nn:4"
    pos = Position.from_fen(SHOT_FEN)
    assert str(player.choose(pos)) == "14-17"  # the shot: a man up after 10x17x26


def test_play_engines_offer_the_learned_evaluation() -> None:
    from play.engine import answer
    from play.paths import Roots
    from play.players import Players
    from play.settings import load_settings

    engines = Players(
        load_settings({"torch_threads": 1}), Roots("runs", nneval.DEFAULT_PATH.parent)
    )
    reply = answer(engines, {"id": "n", "action": "move", "player": "ab+nn:3"}, "random")
    assert reply["player"] == "ab+nn:3" and reply["minimax"]["depth"] == 3
    assert reply["move"] in {str(m) for m in Position().legal_moves()}
    with pytest.raises(ValueError, match=r"ab\+nn:3:/etc/passwd'.*the server plays"):
        engines.parse("ab+nn:3:/etc/passwd")  # the server reads no file a request names


def test_positions_stop_where_the_rules_end_a_game_played_on() -> None:
    from learner.nneval import train as train_nneval

    # Two kings shuffle: the start recurs after 4 and 8 plies, a draw by threefold repetition
    # there; the two moves written after it are not positions of a game in progress.
    text = '[FEN "B:WK32:BK1"]\n1. 1-5 32-28 2. 5-1 28-32 3. 1-5 32-28 4. 5-1 28-32 '
    text += "5. 1-5 32-28 1/2-1/2\n"
    positions = train_nneval.collect_positions([text])
    assert len(positions) == 8
    assert np.array_equal(positions.result, np.zeros(8, np.float32))


def test_held_out_positions_are_whole_games() -> None:
    from learner.nneval.train import held_out_games

    game = np.repeat(np.arange(40), 25)  # 40 games of 25 positions
    held = held_out_games(game, 0.1, seed=3)
    kept_games, held_games = set(game[~held]), set(game[held])
    assert len(held_games) == 4 and not kept_games & held_games
    assert held.sum() == 100  # every position of the 4 held-out games, none of the others
    assert held_out_games(np.zeros(5, np.int64), 0.5, seed=0).all()  # one game: it is held out
