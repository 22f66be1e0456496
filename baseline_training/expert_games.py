"""Expert games as training data: deduplicated, split by game, replayed into decisions.

The OCA archive holds 22,621 games, some of them entered more than once. A game whose start and
move list equal an earlier one's is dropped before the split, so no position sequence can sit on
both sides of it; games without a result (``*``) are dropped too (they have no value target).
The split is by game with a fixed seed: every decision of a game lands in the same split.

A game is replayed action by action, as self-play records it: a multi-jump is several decisions
of the same player (the project's action space), each with its real history of earlier
actions, until the rules end the game: experts sometimes play on past a draw by repetition or by
the no-progress rule, and those positions are outside the game (their no-progress count can
exceed the rules' 80 plies, which the encoder refuses). Each decision keeps its packed history,
the expert's action, the game's result from the mover's view (0 won, 1 drawn, 2 lost, as
``learner.mirror`` codes it), whether it starts a move (the decision a player sees) and the
index of its game.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from game import encoding
from game.archive import read_archive
from game.pdn import PdnGame, iter_pdn

WON, DRAWN, LOST = 0, 1, 2  # result codes from the mover's view (learner.mirror's order)
DECIDED = ("1-0", "0-1", "1/2-1/2")  # results with a value target ("1-0": Black won)
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class Split:
    """Games by split, and what was dropped before splitting."""

    train: list[PdnGame]
    val: list[PdnGame]
    test: list[PdnGame]
    duplicates: int  # games equal to an earlier one (same start, same moves)
    unfinished: int  # games without a result

    def sizes(self) -> dict[str, int]:
        return {
            "train": len(self.train),
            "val": len(self.val),
            "test": len(self.test),
            "duplicates": self.duplicates,
            "unfinished": self.unfinished,
        }


@dataclass(frozen=True)
class Decisions:
    """Every decision of some games, one row each (see the module docstring)."""

    packed: np.ndarray  # uint32 (n, HISTORY, PACKED_WORDS)
    action: np.ndarray  # uint8 (n,) the expert's action, mover-relative
    result: np.ndarray  # uint8 (n,) WON / DRAWN / LOST for the mover
    move_start: np.ndarray  # bool (n,) first decision of a move
    game: np.ndarray  # int32 (n,) index of the game in the list replayed

    def __len__(self) -> int:
        return len(self.action)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, **{k: getattr(self, k) for k in self.__dataclass_fields__})
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> Decisions:
        """Reads what ``save`` wrote (plain arrays; nothing is unpickled)."""
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in cls.__dataclass_fields__}
        except (OSError, KeyError, ValueError) as err:
            raise ValueError(f"{path}: not a decisions file ({err})") from err
        n = len(arrays["action"])
        if any(len(a) != n for a in arrays.values()):
            raise ValueError(f"{path}: arrays of different lengths")
        return cls(**arrays)


def load_games(archive: Path | str | None = None) -> list[PdnGame]:
    """The games of a PDN collection, every move checked (the shipped OCA archive by default)."""
    return list(iter_pdn(read_archive(archive)))


def game_key(game: PdnGame) -> tuple[str, tuple[str, ...]]:
    return game.fen or "", tuple(game.moves)


def dedupe(games: Iterable[PdnGame]) -> tuple[list[PdnGame], int, int]:
    """Decided games, each start + move list once: (kept, duplicates, unfinished)."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    kept: list[PdnGame] = []
    duplicates = unfinished = 0
    for g in games:
        if g.result not in DECIDED:
            unfinished += 1
            continue
        key = game_key(g)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        kept.append(g)
    return kept, duplicates, unfinished


def split_games(
    games: Sequence[PdnGame], *, val_fraction: float, test_fraction: float, seed: int
) -> Split:
    """Deduplicates ``games`` and splits them by game with a seeded permutation."""
    for name, value in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {value}")
    if val_fraction + test_fraction >= 1.0:
        raise ValueError("val_fraction + test_fraction must leave games to train on")
    kept, duplicates, unfinished = dedupe(games)
    order = np.random.default_rng(seed).permutation(len(kept))
    n_test = round(test_fraction * len(kept))
    n_val = round(val_fraction * len(kept))
    test = [kept[i] for i in order[:n_test]]
    val = [kept[i] for i in order[n_test : n_test + n_val]]
    train = [kept[i] for i in order[n_test + n_val :]]
    return Split(train, val, test, duplicates, unfinished)


def result_code(result: str, mover_white: bool) -> int:
    if result == "1/2-1/2":
        return DRAWN
    return WON if (result == "0-1") == mover_white else LOST


def replay_decisions(games: Sequence[PdnGame]) -> Decisions:
    """Every decision of ``games``, replayed action by action (see the module docstring)."""
    packed, action, result, start, index = [], [], [], [], []
    for gi, g in enumerate(games):
        if g.result not in DECIDED:
            raise ValueError(f"game {gi} ({g.describe()}) has no result: {g.result!r}")
        pos = g.start()
        core = pos.game
        for text in g.moves:
            if pos.is_over():  # experts play on past a draw the rules would declare
                break
            move = pos.parse_move(text)
            for k, a in enumerate(core.actions_of(move)):
                packed.append(core.pack_history())
                action.append(a)
                result.append(result_code(g.result, core.white_to_move))
                start.append(k == 0)
                index.append(gi)
                core.step(a)
    n = len(action)
    return Decisions(
        packed=(
            np.stack(packed).astype(np.uint32)
            if n
            else np.zeros((0, encoding.HISTORY, encoding.PACKED_WORDS), np.uint32)
        ),
        action=np.array(action, np.uint8),
        result=np.array(result, np.uint8),
        move_start=np.array(start, bool),
        game=np.array(index, np.int32),
    )


def write_split_summary(path: Path, split: Split, seed: int) -> None:
    path.write_text(json.dumps({"seed": seed, **split.sizes()}, indent=2) + "\n")
