"""Fuzzing the file readers: crafted JSON headers and odd file kinds, in every file a user names.

Each case writes one file of one kind (learned evaluation, network checkpoint, warm-start
weights, opening book, endgame manifest, match journal) whose JSON is a real-looking header with
one value replaced by something odd (nested up to 60 deep, integers of thousands of digits,
floats past 1e308, NaN, booleans, strings where numbers go), or whose bytes are not JSON at all;
then the reader must either accept it or refuse it with its own error (a ValueError kind), on
one line that names the file: never a RecursionError, TypeError, OverflowError or a hang.

The file kinds: a FIFO, a link, a directory, a device node, a 10^12-byte sparse file in a match
journal's or a manifest's place are refused by name without blocking (the other readers' FIFOs
belong to the readers' regular-file opener, with its own tests). The default lane runs a few
hundred cases; the slow lane many more.
"""

from __future__ import annotations

import json
import os
import random
import stat
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from checkerzero.network.checkpoint import load_checkpoint
from checkerzero.network.header import read_model_shape
from evaluation.matches.journal import MatchJournal
from evaluation.players.book import load_book
from game import nneval
from game.egdb import EgdbError
from game.egdb.manifest import manifest_path, read_manifest

CASES = 240  # default lane: a few seconds
SLOW_CASES = 6_000
MAX_MESSAGE = 1_000  # one line, short enough to read


def odd_value(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value, often absurd."""
    pick = rng.randrange(12)
    if pick == 0 and depth < 60:
        return [odd_value(rng, depth + 1)]  # a deep chain
    if pick == 1 and depth < 60:
        return {"k": odd_value(rng, depth + 1)}
    return rng.choice(
        [
            None,
            True,
            False,
            -1,
            0,
            2**64,
            -(2**63),
            10**400,
            1.5,
            1e308,
            "",
            "x" * 200,
            "12",
            [],
            {},
            [1, 2, 3],
            {"a": 1},
        ]
    )


def replace_somewhere(value: Any, rng: random.Random) -> Any:
    """``value`` (parsed JSON) with one nested value replaced by an odd one."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(sorted(value))
        return {**value, key: replace_somewhere(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.8:
        i = rng.randrange(len(value))
        return [*value[:i], replace_somewhere(value[i], rng), *value[i + 1 :]]
    return odd_value(rng)


def odd_text(template: Any, rng: random.Random) -> str:
    """JSON text of ``template`` with one odd value, or text that JSON alone gets wrong."""
    pick = rng.randrange(10)
    if pick == 0:
        return "[" * rng.choice((20, 2_000, 100_000)) + "]" * rng.choice((0, 20))
    if pick == 1:
        return json.dumps(template)[:-1] + ', "n": ' + "9" * rng.choice((30, 5_000)) + "}"
    if pick == 2:
        return json.dumps(template).replace("1", rng.choice(["NaN", "Infinity", "1e999", "-0"]))
    if pick == 3:
        return json.dumps(template)[: rng.randrange(1, 40)]
    text = json.dumps(replace_somewhere(template, rng))
    return text.replace('"DEEP"', "[" * 5000 + "]" * 5000)


def safetensors(header_text: str, body: bytes = b"\0" * 64) -> bytes:
    raw = header_text.encode()
    return struct.pack("<Q", len(raw)) + raw + body


NNEVAL = {
    "__metadata__": {"format": "checkerzero-nneval", "version": "1", "board_size": "8"},
    "ft_w": {"dtype": "I16", "shape": [128, 16], "data_offsets": [0, 4096]},
    "ft_b": {"dtype": "I16", "shape": [16], "data_offsets": [4096, 4128]},
}
MODEL = {
    "kind": "model",
    "schema_version": 2,
    "model_config": {"board_size": 8, "blocks": 1, "channels": 8, "in_planes": 15},
    "sha256": "0" * 64,
}
BOOK = {"format": "checkerzero book", "version": 1, "board": 8, "entries": {"B:W21:B1": {}}}
MANIFEST = {
    "manifest_version": 1,
    "board": 6,
    "file_format": 1,
    "pieces": 1,
    "files": {"6x6_1-0-0-0.egdb": {"bytes": 80, "sha256": "0" * 64}},
}
HEADER = {"a": "minimax:1", "b": "random", "games": 4, "seed": 3}
PAIR = {
    "index": 0,
    "opening": "09-13",
    "a_black": {
        "black": "minimax:1",
        "white": "random",
        "opening": "09-13",
        "moves": ["9-13"],
        "result": "1-0",
        "end_reason": "no moves",
        "size": 8,
    },
    "a_white": {},
    "a_stats": {"moves": 3, "nodes": 100},
}


def _nneval(path: Path, rng: random.Random) -> Callable[[], Any]:
    path.write_bytes(safetensors(odd_text(NNEVAL, rng), rng.randbytes(rng.randrange(200))))
    return lambda: nneval.load(path)


def _checkpoint(path: Path, rng: random.Random) -> Callable[[], Any]:
    inner = odd_text(MODEL, rng) if rng.random() < 0.7 else json.dumps(MODEL)
    outer = {"__metadata__": {"checkerzero": inner}}
    text = odd_text(outer, rng) if rng.random() < 0.3 else json.dumps(outer)
    path.write_bytes(safetensors(text))
    return lambda: load_checkpoint(path)


def _warm_start(path: Path, rng: random.Random) -> Callable[[], Any]:
    _checkpoint(path, rng)
    return lambda: read_model_shape(path)


def _book(path: Path, rng: random.Random) -> Callable[[], Any]:
    path.write_text(odd_text(BOOK, rng))
    return lambda: load_book(path)


def _manifest(path: Path, rng: random.Random) -> Callable[[], Any]:
    manifest_path(path.parent, 6).write_text(odd_text(MANIFEST, rng))
    return lambda: read_manifest(path.parent, 6)


def _journal(path: Path, rng: random.Random) -> Callable[[], Any]:
    header = {"kind": "checkerzero match journal", "version": 1, **HEADER}
    pair = {**PAIR, "a_white": PAIR["a_black"]}
    lines = [json.dumps(header), odd_text(pair, rng)]
    if rng.random() < 0.3:
        lines[0] = odd_text(header, rng)
    path.write_text("\n".join(lines) + "\n")
    return lambda: MatchJournal(path, HEADER).open()


READERS = {
    "nneval": _nneval,
    "checkpoint": _checkpoint,
    "warm start": _warm_start,
    "book": _book,
    "manifest": _manifest,
    "journal": _journal,
}


def run(folder: Path, cases: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    refused = dict.fromkeys(READERS, 0)
    for case in range(cases):
        kind = rng.choice(sorted(READERS))
        sub = folder / str(case)
        sub.mkdir()
        path = sub / "file"
        read = READERS[kind](path, rng)
        try:
            read()
        except (ValueError, OSError, EgdbError) as e:  # the readers' own errors
            message = str(e)
            assert "\n" not in message and len(message) < MAX_MESSAGE, (kind, message[:300])
            # a warm start's reader says what is wrong; the config check names the file
            assert str(sub) in message or kind == "warm start", (kind, message[:300])
            refused[kind] += 1
    return refused


def test_crafted_headers(tmp_path: Path) -> None:
    refused = run(tmp_path, CASES, seed=0)
    assert all(n > 0 for n in refused.values()), refused


@pytest.mark.slow
def test_crafted_headers_at_scale(tmp_path: Path) -> None:
    refused = run(tmp_path, SLOW_CASES, seed=1)
    assert all(n > 0 for n in refused.values()), refused


def _odd_kind(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link":
        target = path.with_name("target")
        target.write_text("{}\n")
        path.symlink_to(target)
    elif kind == "directory":
        path.mkdir()
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(10**12)
    elif kind == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a copy of /dev/null's node
        except PermissionError:
            pytest.skip("making a device node needs root")


@pytest.mark.parametrize("kind", ["fifo", "link", "directory", "sparse", "device"])
def test_odd_file_kinds_in_a_journals_or_manifests_place(tmp_path: Path, kind: str) -> None:
    journal = tmp_path / "match.journal"
    _odd_kind(journal, kind)
    before = os.lstat(journal)
    with pytest.raises(ValueError, match=f"match journal {journal}: ") as err:
        MatchJournal(journal, HEADER).open()
    assert "\n" not in str(err.value)
    after = os.lstat(journal)
    assert (after.st_mode, after.st_ino, after.st_size) == (
        before.st_mode,
        before.st_ino,
        before.st_size,
    )
    folder = tmp_path / "db"
    folder.mkdir()
    manifest = manifest_path(folder, 6)
    _odd_kind(manifest, kind)
    with pytest.raises(EgdbError, match="manifest") as err:
        read_manifest(folder, 6)
    assert str(manifest) in str(err.value) and "\n" not in str(err.value)
