"""Fuzzing the compiled core and the notation parsers: mutated and random input, fixed seeds.

Every `_core` entry point that takes numbers, arrays, moves or bitboards, and the Python parsers
(FEN, moves, PDN), get input derived from real positions and then mutated: bits flipped, words
replaced, characters inserted, deleted and swapped, shapes and sizes changed, NaN and infinities
planted. Only ValueError may come out (IndexError for a game index outside a search, as
documented), never a crash, and what is accepted must be right: a parsed FEN round-trips, a
parsed move is legal, an accepted packed state encodes the pieces it holds and has the legal
moves of the same position set up by bitboards, and so on. Each kind of input must see both
outcomes, so a parser that refuses everything (or nothing) fails too.

The default lane runs a few hundred cases per kind (seconds); the slow lane 10^5 in all. The same
file runs under AddressSanitizer and UBSan in tests/test_sanitize.py.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest

from game import _core
from game.notation import format_fen, parse_fen, pieces_per_side
from game.pdn import game_from_position, read_pdn, write_game
from game.position import Position

FAST_CASES = 500  # per kind of input in the default lane
SLOW_CASES = 100_000  # in all, over the kinds, in the slow lane
SEEDS = (1, 2)  # fast lane: each kind runs once per seed

INT32 = (-(2**31), 2**31 - 1)
META_PRESENT = 1 << 16
# Characters that mean something to one of the parsers, and some that look like they might.
NOTATION_CHARS = [*"0123456789-x:,KkWwBb.!?*+ ", "\u0661", "\uff11", "_", "\x00", "\u00e9"]
PDN_TOKENS = [
    *NOTATION_CHARS, *'{}()[]";$/\n\t%', "1-0", "0-1", "1/2-1/2", "2-0", "$12", " 12. ",
    "12...", "\n[Event \"e\"]\n", '[FEN "',
    '[SetUp "1"]', "{ ", "( ", ") ", "} ", "\\", "11-15", "22x15", "9x18x27",
]  # fmt: skip


# ------------------------------------------------------------------------------------------
# Material: positions from random games on both boards
# ------------------------------------------------------------------------------------------


@functools.cache
def positions() -> dict[int, list[Position]]:
    """Positions of seeded random games, some in the middle of a multi-jump, per board size."""
    rng = random.Random(20261123)
    out: dict[int, list[Position]] = {8: [], 6: []}
    for size in (8, 6):
        for _ in range(12):
            pos = Position(size)
            while not pos.is_over() and pos.ply < 120:
                out[size].append(pos.copy())
                pos.play(rng.choice(pos.legal_moves()))
            out[size].append(pos.copy())
        for pos in list(out[size]):  # mid-jump states: the first action of a multi-jump
            for move in pos.legal_moves():
                if len(move.squares) > 2:
                    mid = pos.copy()
                    mid.game.step(mid.game.actions_of(move)[0])
                    out[size].append(mid)
                    break
    return out


def any_position(rng: random.Random, size: int | None = None) -> Position:
    size = size or rng.choice((8, 6))
    return rng.choice(positions()[size])


def between_turns(rng: random.Random, size: int | None = None) -> Position:
    while True:
        pos = any_position(rng, size)
        if not pos.game.mid_jump:
            return pos


def mutate_text(text: str, rng: random.Random, alphabet: list[str], edits: int = 4) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, edits)):
        op = rng.randrange(5)
        at = rng.randint(0, len(chars))
        if op == 0:
            chars.insert(at, rng.choice(alphabet))
        elif op == 1 and chars:
            del chars[min(at, len(chars) - 1)]
        elif op == 2 and chars:
            chars[min(at, len(chars) - 1)] = rng.choice(alphabet)
        elif op == 3 and len(chars) > 1:  # swap two neighbours
            i = min(at, len(chars) - 2)
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
        else:  # repeat a slice
            j = rng.randint(at, min(len(chars), at + 6))
            chars[at:at] = chars[at:j] * rng.randint(1, 3)
    return "".join(chars)


def random_int(rng: random.Random, low: int, high: int) -> int:
    """Mostly near the valid range [low, high], sometimes at the ends of int32."""
    r = rng.random()
    if r < 0.1:
        return rng.choice(INT32)
    if r < 0.2:
        return rng.randint(*INT32)
    return rng.randint(low - 3, high + 3)


# ------------------------------------------------------------------------------------------
# Cases: each returns True when the input was accepted (and checked), False when refused
# ------------------------------------------------------------------------------------------


def fen_case(rng: random.Random) -> bool:
    pos = any_position(rng)
    size = pos.size if rng.random() < 0.9 else rng.choice((8, 6))
    text = mutate_text(pos.fen(), rng, NOTATION_CHARS)
    try:
        setup = parse_fen(text, size)
    except ValueError as e:
        assert repr(text) in str(e)  # the message quotes the FEN
        return False
    assert parse_fen(format_fen(setup), size) == setup
    for bitboard in (setup.black, setup.white):
        assert bitboard.bit_count() <= pieces_per_side(size)
    assert Position.from_setup(setup).fen() == format_fen(setup)  # the core agrees it is a position
    return True


def move_case(rng: random.Random) -> bool:
    pos = between_turns(rng).copy()
    legal = pos.legal_moves()
    base = str(rng.choice(legal)) if legal else "11-15"
    text = mutate_text(base, rng, NOTATION_CHARS, edits=2)
    before = pos.fen()
    try:
        move = pos.parse_move(text)
    except ValueError as e:
        assert repr(text) in str(e)
        assert pos.fen() == before
        return False
    assert move in legal
    assert pos.fen() == before
    return True


def pdn_case(rng: random.Random) -> bool:
    start = between_turns(rng)
    pos = start.copy()
    moves = []
    for _ in range(rng.randint(0, 12)):
        legal = pos.legal_moves()
        if not legal:
            break
        moves.append(str(pos.play(rng.choice(legal))))
    text = write_game(game_from_position(start, moves, "*", {"Event": "fuzz"}))
    text = mutate_text(text, rng, PDN_TOKENS, edits=3)
    try:
        games = read_pdn(text, size=start.size)
    except ValueError:
        return False
    for game in games:
        final = game.replay()
        assert final.ply == len(game.moves)
    return True


def packed_case(rng: random.Random) -> bool:
    size = rng.choice((8, 6))
    n = rng.randint(0, 4)
    a = np.zeros((n, _core.HISTORY, _core.PACKED_WORDS), np.uint32)
    for i in range(n):
        a[i] = any_position(rng, size).game.pack_history()
    for _ in range(rng.randint(0, 3) if n else 0):
        i, k, w = rng.randrange(n), rng.randrange(_core.HISTORY), rng.randrange(4)
        if rng.random() < 0.8:
            a[i, k, w] ^= np.uint32(1 << rng.randrange(32))
        else:
            a[i, k, w] = np.uint32(rng.getrandbits(32))
    call_size = size if rng.random() < 0.9 else rng.choice((6, 8, 7, 0, -8, 2**31 - 1))
    if rng.random() < 0.05:  # a mis-shaped array
        shape = rng.choice([(n, 2, 4), (n, 3, 3), (n, 1, 4), (n, 4, 4), (n, 1, 1), (n, 3, 5)])
        a = np.zeros(shape, np.uint32)
    try:
        planes = _core.encode_packed(call_size, a)
    except ValueError:
        planes = None
    try:
        masks = _core.legal_mask_packed(call_size, a)
    except ValueError:
        masks = None
    if planes is None:
        return masks is not None
    assert masks is not None  # masks read a subset of what the encoder checked
    for i in range(n):
        for k in range(_core.HISTORY):
            black, white, _kings, meta = (int(x) for x in a[i, k])
            pieces = planes[i, 4 * k : 4 * k + 4].sum()
            assert pieces == ((black | white).bit_count() if meta & META_PRESENT else 0)
        assert (planes[i, _core.NUM_PLANES - 1] == 1).all()
        black, white, kings, meta = (int(x) for x in a[i, 0])
        if (meta >> 1) & 0x3F == 0:  # between turns: the same legal moves as a set-up game
            game = _core.Game.from_bitboards(call_size, black, white, kings, bool(meta & 1))
            assert (masks[i] == game.legal_action_mask()).all()
    return True


def bitboards_case(rng: random.Random) -> bool:
    game = any_position(rng).game
    size = game.size if rng.random() < 0.9 else rng.choice((6, 8, 7, 10))
    words = [game.black, game.white, game.kings]
    for _ in range(rng.randint(0, 3)):
        j = rng.randrange(3)
        words[j] ^= 1 << rng.randrange(32) if rng.random() < 0.8 else rng.getrandbits(32)
    no_progress = rng.randint(0, 80) if rng.random() < 0.7 else random_int(rng, 0, 80)
    ply = rng.randint(0, 300) if rng.random() < 0.7 else random_int(rng, 0, 65535)
    max_plies = 0 if rng.random() < 0.7 else random_int(rng, 0, 65535)
    try:
        made = _core.Game.from_bitboards(
            size, *words, rng.random() < 0.5, max_plies, no_progress, ply
        )
    except ValueError:
        return False
    black, white, kings = made.black, made.white, made.kings
    assert not black & white and not kings & ~(black | white)
    assert max(black.bit_count(), white.bit_count()) <= pieces_per_side(size)
    assert _core.encode_packed(size, made.pack_history()[None]).shape[0] == 1
    assert sum(count for _, count in made.divide(2)) == made.perft(2)
    for move in made.legal_moves():
        child = made.copy()
        child.make(move)
        assert child.ply == min(ply + 1, 65535)
        child.undo()
        assert (child.black, child.white, child.kings) == (black, white, kings)
    return True


def make_case(rng: random.Random) -> bool:
    game = any_position(rng).game.copy()
    donor = any_position(rng)
    donor_moves = donor.game.legal_moves() if not donor.game.mid_jump else []
    if not donor_moves:
        return False
    move = rng.choice(donor_moves)
    legal = game.legal_moves() if not game.mid_jump else []
    before = (game.black, game.white, game.kings, game.ply, game.depth)
    try:
        actions = game.actions_of(move)
    except ValueError:
        actions = None
    try:
        game.make(move)
    except ValueError:
        assert move not in legal and actions is None
        assert (game.black, game.white, game.kings, game.ply, game.depth) == before
        return False
    assert move in legal and actions
    game.undo()
    assert (game.black, game.white, game.kings, game.ply, game.depth) == before
    return True


def step_case(rng: random.Random) -> bool:
    game = any_position(rng).game.copy()
    legal = set(game.legal_actions())
    if rng.random() < 0.5:
        actions = [random_int(rng, 0, game.num_actions - 1)]
    else:
        actions = [random_int(rng, 0, game.num_actions - 1) for _ in range(rng.randint(0, 4))]
        if legal and actions:
            actions[0] = rng.choice(sorted(legal))
        if not game.mid_jump:
            try:
                move = game.move_of(actions)
            except ValueError:
                pass
            else:
                assert move in game.legal_moves()
                assert game.actions_of(move) == actions
    action = actions[0] if actions else -1
    depth = game.depth
    try:
        game.step(action)
    except ValueError:
        assert action not in legal and game.depth == depth
        return False
    assert action in legal and game.depth == depth + 1
    return True


def perft_case(rng: random.Random) -> bool:
    game = any_position(rng).game
    depth = rng.choice([-1, -(2**31), 0, 1, 2, 65, 2**31 - 1, 10_000])
    call = rng.choice(["perft", "divide"])
    lowest = 0 if call == "perft" else 1
    try:
        result = getattr(game, call)(depth)
    except ValueError:
        assert game.mid_jump or not lowest <= depth <= 64
        return False
    assert lowest <= depth <= 2 and not game.mid_jump
    total = result if call == "perft" else sum(n for _, n in result)
    assert total == game.perft(depth)
    return True


WEIGHT_NAMES = ("man", "king", "advancement", "back_rank", "centre", "mobility", "runaway")


def evaluate_case(rng: random.Random) -> bool:
    game = between_turns(rng).game
    weights = {}
    for name in (*WEIGHT_NAMES, "king_centre"):
        r = rng.random()
        weights[name] = (
            rng.randint(-200, 200) if r < 0.8 else rng.choice([*INT32, 5000, -5000, 30000])
        )
    w = _core.EvalWeights(**weights)
    try:
        score = _core.evaluate(game, w)
    except ValueError as e:
        assert "evaluation weights too large" in str(e)
        with pytest.raises(ValueError, match="evaluation weights too large"):
            _core.alphabeta_search(game, depth=1, weights=w)
        return False
    assert abs(score) < _core.MATE_THRESHOLD
    if game.result() == 0:  # ongoing
        result = _core.alphabeta_search(game, depth=rng.randint(1, 2), weights=w)
        assert result.move in game.legal_moves()
    return True


def search_case(rng: random.Random) -> bool:
    """A BatchedMCTS fed evaluations with NaN, infinities and negatives planted at random."""
    size = rng.choice((8, 6))
    config = _core.MctsConfig()
    config.simulations = rng.randint(0, 12)
    config.leaves_per_game = rng.randint(1, 4)
    config.seed = rng.getrandbits(32)
    if rng.random() < 0.1:
        name = rng.choice(["c_puct", "fpu_reduction", "virtual_loss", "dirichlet_alpha"])
        setattr(config, name, rng.choice([float("nan"), float("inf"), -1.0]))
    num_games = rng.randint(1, 3)
    try:
        mcts = _core.BatchedMCTS(num_games, size, config)
    except ValueError:
        return False
    for i in range(num_games):
        mcts.reset(i, between_turns(rng, size).game)
    accepted = False
    for _ in range(3):
        _planes, masks = mcts.gather()
        masks = masks.copy()
        n = len(masks)
        priors = np.where(masks, np.float32(1.0), np.float32(rng.random()))
        wdl = np.tile(np.float32([0.3, 0.4, 0.3]), (n, 1))
        bad_prior = bad_value = False
        for _ in range(rng.randint(0, 2) if n else 0):
            bad = rng.choice([np.nan, np.inf, -np.inf, -1.0])
            if rng.random() < 0.7:
                i, a = rng.randrange(n), rng.randrange(masks.shape[1])
                priors[i, a] = bad
                bad_prior |= bool(masks[i, a])
            else:
                wdl[rng.randrange(n), rng.randrange(3)] = bad
                bad_value = True
        try:
            mcts.expand(priors.astype(np.float32), wdl)
        except ValueError:
            assert bad_prior or bad_value
            mcts.expand(masks.astype(np.float32), np.tile(np.float32([0.3, 0.4, 0.3]), (n, 1)))
        else:
            assert not (bad_prior or bad_value)
            accepted = True
    index = rng.choice([0, num_games - 1, num_games, -1, 2**31 - 1])
    if not 0 <= index < num_games:
        with pytest.raises(IndexError, match="out of range"):
            mcts.root_visits(index)
        return accepted
    if mcts.done(index) or mcts.tree_size(index) == 1:
        return accepted
    temperature = rng.choice([0.0, 1.0, 0.5, float("nan"), float("inf"), -1.0])
    try:
        action = mcts.choose(index, temperature)
    except ValueError:
        assert temperature != temperature  # only NaN is refused
        return accepted
    assert mcts.game(index).is_legal_action(action)
    wrong = random_int(rng, 0, mcts.num_actions - 1)
    try:
        mcts.advance(index, wrong)
    except ValueError:
        assert not mcts.game(index).is_legal_action(wrong)
    path = [random_int(rng, 0, mcts.num_actions - 1) for _ in range(rng.randint(0, 2))]
    try:
        priors_at, visits_at = mcts.node_stats(index, path)
    except ValueError:
        pass
    else:
        assert np.isfinite(priors_at).all() and (visits_at >= 0).all()
    return accepted


CASES: dict[str, Callable[[random.Random], bool]] = {
    "fen": fen_case,
    "move": move_case,
    "pdn": pdn_case,
    "packed": packed_case,
    "bitboards": bitboards_case,
    "make": make_case,
    "step": step_case,
    "perft": perft_case,
    "evaluate": evaluate_case,
    "search": search_case,
}


def run(kind: str, cases: int, seed: int) -> Counter:
    rng = random.Random(f"{kind}:{seed}")
    outcomes: Counter = Counter()
    for i in range(cases):
        try:
            outcomes["accepted" if CASES[kind](rng) else "refused"] += 1
        except Exception as e:  # anything but the documented errors is a finding
            raise AssertionError(
                f"{kind} case {i} (seed {seed}) raised {type(e).__name__}: {e}; "
                f"replay it with run({kind!r}, {i + 1}, {seed})"
            ) from e
    return outcomes


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", sorted(CASES))
def test_fuzz(kind: str, seed: int) -> None:
    outcomes = run(kind, FAST_CASES, seed)
    # Both outcomes happen, so neither "refuse everything" nor "accept everything" passes.
    assert outcomes["accepted"] > 0 and outcomes["refused"] > 0, outcomes


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(CASES))
def test_fuzz_long(kind: str) -> None:
    outcomes = run(kind, SLOW_CASES // len(CASES), seed=1000)
    assert outcomes["accepted"] > 0 and outcomes["refused"] > 0, outcomes
