"""A replay record with a valid CRC is still checked in full before it is trained on.

Each case is a record an actor could never write, framed with a correct CRC (so the frame check
passes), as a damaged actor or anyone with access to Redis could store it: positions the rules
cannot reach (bits off a 6x6 board made the C++ encoder write before its buffer and abort the
process), zero visit counts (0/0 policy targets), non-finite or out-of-range root values (an
infinite value target made the weights NaN), illegal actions (the PDN sample crashed the loop).
`GameRecord.from_bytes` refuses each with a ValueError saying what is wrong and where, and the
learner's mirror counts and skips it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil

import numpy as np
import pytest
from omegaconf import OmegaConf
from record_cases import frame, random_game_record

from checkerzero.store.replay import ReplayStore
from game import _core, encoding
from game.records import GameRecord, Result, Termination
from learner.mirror import ReplayMirror


@pytest.fixture(scope="module")
def six() -> GameRecord:
    """A random 6x6 game long enough for every case below."""
    record = random_game_record(seed=4, size=6)
    assert record.num_decisions >= 12
    return record


@pytest.fixture(scope="module")
def eight() -> GameRecord:
    return random_game_record(seed=5, size=8)


def test_valid_random_records_round_trip(six, eight):
    for record in (six, eight, *(random_game_record(s, 8, 200) for s in range(6))):
        back = GameRecord.from_bytes(record.to_bytes())
        assert back.to_bytes() == record.to_bytes()


def _positions(record: GameRecord, t: int, **words: int) -> np.ndarray:
    """The record's positions with words of position t replaced (black, white, kings, meta)."""
    out = record.positions.copy()
    for k, name in enumerate(("black", "white", "kings", "meta")):
        if name in words:
            out[t, k] = words[name]
    return out


def _refused(data: bytes, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GameRecord.from_bytes(data)


def test_a_white_man_off_the_6x6_board_is_refused_before_the_encoder(six):
    """The reported crash: bit 18 is past the 18 squares of a 6x6 board; the encoder wrote
    before its output buffer (`double free or corruption`)."""
    meta = int(six.positions[0, 3])
    bad = _positions(six, 0, white=int(six.positions[0, 1]) | 1 << 18)
    _refused(frame(six, positions=bad), r"packed state 0, slot 0: pieces off the 6x6 board")
    meta_only = _positions(six, 0, black=0, white=1 << 18, kings=0, meta=meta)
    _refused(frame(six, positions=meta_only), "off the 6x6 board")


def _square_bits(mask: int) -> list[int]:
    return [i for i in range(32) if mask >> i & 1]


@pytest.mark.parametrize(
    ("defect", "match"),
    [
        ("overlap", "both a black and a white piece"),
        ("king_on_empty", "kings on empty squares"),
        ("black_man_crowning_row", "black men on White's back rank .* would have been crowned"),
        ("white_man_crowning_row", "white men on Black's back rank .* would have been crowned"),
        ("too_many_black", "13 black pieces: at most 12 a side"),
        ("too_many_white", "13 white pieces: at most 12 a side"),
        ("unknown_meta_bits", "unknown bits set in the meta word"),
        ("absent_slot", "the newest slot holds no position"),
        ("empty_jump_square", "mid-jump square 8 holds no piece of the side to move"),
        ("jump_square_off_board", "mid-jump square 40 is off the board"),
        ("no_progress", "a no-progress count of .* plies, above 80"),
    ],
)
def test_positions_the_rules_cannot_reach_are_refused(eight, defect, match):
    t = 3
    black, white, kings, meta = (int(x) for x in eight.positions[t])
    empty = ~(black | white) & 0xFFFFFFFF
    if defect == "overlap":
        words = {"white": white | 1 << _square_bits(black)[0]}
    elif defect == "king_on_empty":
        words = {"kings": kings | 1 << _square_bits(empty)[0]}
    elif defect == "black_man_crowning_row":  # squares 29-32
        words = {"black": black & ~(0xF << 28) | 1 << 30, "white": white & ~(0xF << 28)}
        words["kings"] = kings & ~(0xF << 28)
    elif defect == "white_man_crowning_row":  # squares 1-4
        words = {"white": white & ~0xF | 1 << 1, "black": black & ~0xF, "kings": kings & ~0xF}
    elif defect == "too_many_black":
        words = {"black": 0x1FFF, "white": 0xF << 16, "kings": 0}
    elif defect == "too_many_white":
        words = {"white": 0x1FFF << 12, "black": 0xF, "kings": 0}
    elif defect == "unknown_meta_bits":
        words = {"meta": meta | 1 << 20}
    elif defect == "absent_slot":
        words = {"meta": meta & ~(1 << 16)}
    elif defect == "empty_jump_square":
        words = {"meta": meta & ~0x7E | (_square_bits(empty)[0] + 1) << 1}
    elif defect == "jump_square_off_board":
        words = {"meta": meta & ~0x7E | 40 << 1}
    else:
        words = {"meta": meta & ~0xFF00 | 81 << 8}
    _refused(frame(eight, positions=_positions(eight, t, **words)), match)


def test_too_many_pieces_is_the_board_size_own_limit(six):
    """A 6x6 side starts with 6 pieces: 7 cannot happen."""
    bad = _positions(six, 0, black=0x7F, white=0x7 << 12, kings=0)
    _refused(frame(six, positions=bad), "7 black pieces: at most 6 a side on the 6x6 board")


def test_a_zero_visit_count_is_refused(six):
    """A zero count made the policy target 0/0 = NaN."""
    counts = six.visit_counts.copy()
    lo = int(six.visit_offsets[4])
    counts[lo] = 0
    _refused(frame(six, visit_counts=counts), "decision 4 has a visit count of 0")


@pytest.mark.parametrize(
    "row",
    [
        [np.inf, 0, 0],  # the reported poison: an infinite value target
        [60000, 0, 0],  # finite in float16, far outside [0, 1]
        [-0.5, 1.0, 0.5],  # sums to 1, but not probabilities
        [0.25, 0.25, 0.25],  # sums to 0.75
        [np.nan, 0.5, 0.5],  # NaN in part: neither searched nor unsearched
    ],
)
def test_a_root_value_that_is_not_a_distribution_is_refused(six, row):
    wdl = six.root_wdl.copy()
    wdl[5] = row
    _refused(frame(six, root_wdl=wdl), "root_wdl of decision 5 .* not a probability vector")


def test_unsearched_and_rounded_root_values_are_kept(six):
    wdl = six.root_wdl.copy()
    wdl[0] = np.nan
    wdl[1] = [1 / 3, 1 / 3, 1 / 3]  # float16 rounding: the sum is 0.99951
    back = GameRecord.from_bytes(frame(six, root_wdl=wdl))
    assert np.isnan(back.root_wdl[0]).all() and back.root_wdl[1, 0] == np.float16(1 / 3)


def _illegal_action(record: GameRecord, t: int) -> int:
    legal = encoding.legal_masks(record.positions[t : t + 1, None], record.board_size)[0]
    return int(np.flatnonzero(~legal)[0])


def test_an_illegal_played_action_is_refused(six):
    played = six.played.copy()
    played[6] = _illegal_action(six, 6)
    _refused(frame(six, played=played), f"decision 6 played action {played[6]}, which is illegal")
    played[6] = 100  # past the 72 actions of a 6x6 board
    _refused(frame(six, played=played), "decision 6 played action 100, out of range")


def test_visits_to_illegal_or_repeated_actions_are_refused(six):
    actions = six.visit_actions.copy()
    actions[0] = _illegal_action(six, 0)
    _refused(frame(six, visit_actions=actions), "decision 0 lists visits to action")
    t = next(
        k for k in range(six.num_decisions) if six.visit_offsets[k + 1] - six.visit_offsets[k] > 1
    )
    lo = int(six.visit_offsets[t])
    repeated = six.visit_actions.copy()
    repeated[lo + 1] = repeated[lo]
    _refused(frame(six, visit_actions=repeated), "the same visited action twice")


def test_the_constructor_checks_the_same(six):
    """Self-play builds records through the same checks, so an actor cannot write a bad one."""
    wdl = six.root_wdl.copy()
    wdl[2] = [np.inf, 0, 0]
    with pytest.raises(ValueError, match="root_wdl"):
        dataclasses.replace(six, root_wdl=wdl)


# ------------------------------------------------------------------------------------------
# Through the learner: the mirror counts and skips, the PDN sample skips
# ------------------------------------------------------------------------------------------

needs_redis = pytest.mark.skipif(
    shutil.which("redis-server") is None and not os.environ.get("CHECKERZERO_REDIS_SERVER"),
    reason="redis-server not installed (apt-get install redis-server); these tests need a real one",
)


def bad_frames(record: GameRecord) -> list[bytes]:
    """One record-shaped byte string per kind of defect, each with a correct CRC."""
    t = 1
    black, white, kings, _ = (int(x) for x in record.positions[t])
    played = record.played.copy()
    played[t] = _illegal_action(record, t)
    counts = record.visit_counts.copy()
    counts[0] = 0
    wdl = record.root_wdl.copy()
    wdl[t] = [np.inf, 0, 0]
    return [
        frame(record, positions=_positions(record, t, white=white | 1 << 18)),
        frame(record, positions=_positions(record, t, white=white | black)),
        frame(record, positions=_positions(record, t, kings=kings | ~(black | white) & 0x3FFFF)),
        frame(record, played=played),
        frame(record, visit_counts=counts),
        frame(record, root_wdl=wdl),
    ]


@needs_redis
def test_the_mirror_counts_and_skips_bad_records_and_trains_on_the_rest(client, caplog):
    good = [random_game_record(s, 6) for s in range(10, 14)]
    store = ReplayStore(client, window_positions=100_000)
    bad = bad_frames(good[0])
    for k, data in enumerate(bad):
        store.add_game(good[k % 4].to_bytes(), good[k % 4].num_decisions)
        store.add_game(data, good[0].num_decisions)
    mirror = ReplayMirror(store, 6)
    with caplog.at_level(logging.WARNING, logger="learner.mirror"):
        mirror.refresh()
    assert mirror.malformed == len(bad)
    assert mirror.num_positions == sum(good[k % 4].num_decisions for k in range(len(bad)))
    batch = mirror.sample(512, np.random.default_rng(0), q_weight=0.5)
    assert np.isfinite(batch.target_pi).all() and np.isfinite(batch.target_wdl).all()
    np.testing.assert_allclose(batch.target_pi.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(batch.target_wdl.sum(axis=1), 1.0, rtol=1e-3)
    assert not (batch.target_pi > 0)[~batch.mask].any()  # every target on a legal action
    assert any("off the 6x6 board" in r.getMessage() for r in caplog.records)


def _spliced(a: GameRecord, b: GameRecord) -> GameRecord:
    """A record valid position by position whose actions do not replay from its first position:
    a's first decision, then b from its second. Each position and action is legal where it
    stands, so only the replay (record_to_pdn) finds the break."""
    cut = 1
    offsets = np.concatenate(
        [
            a.visit_offsets[: cut + 1],
            b.visit_offsets[cut + 1 :] - b.visit_offsets[cut] + a.visit_offsets[cut],
        ]
    )
    lo_a, lo_b = int(a.visit_offsets[cut]), int(b.visit_offsets[cut])
    return GameRecord(
        board_size=a.board_size,
        positions=np.concatenate([a.positions[:cut], b.positions[cut:]]),
        played=np.concatenate([a.played[:cut], b.played[cut:]]),
        visit_offsets=offsets.astype(np.uint32),
        visit_actions=np.concatenate([a.visit_actions[:lo_a], b.visit_actions[lo_b:]]),
        visit_counts=np.concatenate([a.visit_counts[:lo_a], b.visit_counts[lo_b:]]),
        root_wdl=np.concatenate([a.root_wdl[:cut], b.root_wdl[cut:]]),
        result=Result.DRAW,
        termination=Termination.PLY_CAP,
    )


@needs_redis
def test_the_pdn_sample_skips_a_record_whose_moves_do_not_replay(client, tmp_path):
    """record_to_pdn ran outside any try: one such record ended the run at the next sample."""
    from checkerzero.run_files import SELFPLAY_PDN
    from game.pdn import read_pdn
    from game.record_pdn import record_moves
    from learner.run import Run

    good = random_game_record(20, 6)
    broken = next(
        r
        for s in range(30, 60)
        for r in [_spliced(random_game_record(s, 6), random_game_record(s + 100, 6))]
        if _does_not_replay(r, record_moves)
    )
    store = ReplayStore(client, window_positions=100_000)
    store.add_game(good.to_bytes(), good.num_decisions)
    store.add_game(broken.to_bytes(), broken.num_decisions)
    cfg = OmegaConf.create(
        {
            "run_dir": str(tmp_path),
            "game": {"size": 6},
            "selfplay": {"openings": "start"},
            "logging": {"pdn_sample_games": 5},
        }
    )
    assert Run(cfg)._write_games(store) == 1
    games = read_pdn((tmp_path / SELFPLAY_PDN).read_text(), size=6)
    assert [g.moves for g in games] == [record_moves(good)]


def _does_not_replay(record: GameRecord, record_moves) -> bool:
    try:
        record_moves(record)
    except ValueError:
        return True
    return False


def test_validation_is_batched_not_per_move(six):
    """The legality check is one core call over the record's positions: its result equals the
    per-position masks the core gives one game at a time."""
    masks = encoding.legal_masks(six.positions[:, None], 6)
    game = _core.Game(6, 80)
    for t, action in enumerate(six.played):
        np.testing.assert_array_equal(masks[t], game.legal_action_mask())
        game.step(int(action))
