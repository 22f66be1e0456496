"""Every file header and journal line is read by one strict JSON reader (game.json_header).

Crafted files of each kind (learned evaluation, network checkpoint, warm-start weights, opening
book, endgame manifest, match journal) with JSON nested 5,000 deep, 5,000-digit integers or
values of the wrong type are refused with one error of the kind the caller catches, naming the
file, never a RecursionError, TypeError or OverflowError. A match journal's game pairs are
checked too: a result that is not a finished game's, a negative or huge search count, refused.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from pathlib import Path

import pytest

from checkerzero.network.checkpoint import load_checkpoint
from checkerzero.network.header import read_model_shape
from evaluation.match import main
from evaluation.matches.records import PairRecord
from evaluation.players.book import BookError, load_book
from game import nneval
from game.egdb import EgdbError
from game.egdb.manifest import manifest_path, read_manifest
from game.json_header import MAX_DEPTH, int_value, parse_json

DEEP = "[" * 5000 + "]" * 5000
HUGE = "9" * 5000


def safetensors_bytes(header: str) -> bytes:
    raw = header.encode()
    return struct.pack("<Q", len(raw)) + raw


def metadata_header(inner: str) -> str:
    """A safetensors header whose checkerzero metadata is the JSON text ``inner``."""
    return json.dumps({"__metadata__": {"checkerzero": inner}})


NNEVAL_CASES = {
    "deep": '{"t": ' + DEEP + "}",
    "huge offset": '{"t": {"dtype": "I8", "shape": [1], "data_offsets": [0, ' + HUGE + "]}}",
    "boolean shape": '{"t": {"dtype": "I8", "shape": [true], "data_offsets": [0, 1]}}',
    "float offset": '{"t": {"dtype": "I8", "shape": [1], "data_offsets": [0.5, 1]}}',
    "infinite dim": '{"t": {"dtype": "I8", "shape": [1e999], "data_offsets": [0, 1]}}',
    "list dtype": '{"t": {"dtype": [1], "shape": [1], "data_offsets": [0, 1]}}',
    "huge metadata": '{"__metadata__": {"version": "' + HUGE + '"}}',
    "nan": '{"t": NaN}',
}


@pytest.mark.parametrize("case", NNEVAL_CASES)
def test_crafted_learned_evaluation_headers_are_refused(tmp_path: Path, case: str) -> None:
    path = tmp_path / "n.nneval"
    path.write_bytes(safetensors_bytes(NNEVAL_CASES[case]) + b"\0" * 8)
    with pytest.raises(nneval.NNEvalFileError) as err:
        nneval.load(path)
    assert str(path) in str(err.value) and len(str(err.value)) < 400


CHECKPOINT_CASES = {
    "deep header": '{"t": ' + DEEP + "}",
    "deep metadata": metadata_header('{"a": ' + DEEP + "}"),
    "huge schema": metadata_header('{"schema_version": ' + HUGE + "}"),
    "metadata not a string": json.dumps({"__metadata__": {"checkerzero": 5}}),
    "metadata a list": json.dumps({"__metadata__": [1]}),
}


@pytest.mark.parametrize("case", CHECKPOINT_CASES)
def test_crafted_checkpoint_and_warm_start_headers_are_refused(tmp_path: Path, case: str) -> None:
    path = tmp_path / "w.safetensors"
    path.write_bytes(safetensors_bytes(CHECKPOINT_CASES[case]))
    with pytest.raises(ValueError) as err:
        load_checkpoint(path)
    assert str(path) in str(err.value) and len(str(err.value)) < 400
    with pytest.raises(ValueError) as err:  # learner.init_weights: its header alone
        read_model_shape(path)
    assert len(str(err.value)) < 400


@pytest.mark.parametrize(
    "text",
    [
        '{"format": ' + DEEP + "}",
        '{"format": "x", "version": ' + HUGE + "}",
        '{"entries": {"a": NaN}}',
        "[1, 2]",
    ],
    ids=["deep", "huge", "nan", "array"],
)
def test_crafted_books_are_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "b.book.json"
    path.write_text(text)
    with pytest.raises(BookError, match=f"book {path}"):
        load_book(path)


@pytest.mark.parametrize("text", ['{"files": ' + DEEP + "}", '{"board": ' + HUGE + "}"])
def test_crafted_endgame_manifests_are_refused(tmp_path: Path, text: str) -> None:
    manifest_path(tmp_path, 8).write_text(text)
    with pytest.raises(EgdbError, match="manifest"):
        read_manifest(tmp_path, 8)


def test_the_reader_itself() -> None:
    assert parse_json(b'{"a": [1, 2.5, "x"]}', "f") == {"a": [1, 2.5, "x"]}
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "f") == parse_json(
        "[" * MAX_DEPTH + "]" * MAX_DEPTH, "f"
    )
    for bad, why in (
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nested deeper"),
        (DEEP, "nested deeper"),
        (HUGE, "5,000 digits"),
        ("1e999", "out of range"),
        ("Infinity", "not strict JSON"),
        (b"\xff", "not UTF-8"),
        ("{", "not valid JSON"),
    ):
        with pytest.raises(ValueError, match=f"^f: .*{why}"):
            parse_json(bad, "f")
    for value in (True, 1.0, "1", None, 2**70, -1):
        with pytest.raises(ValueError, match=r"^f: count"):
            int_value(value, "count", "f", lo=0, hi=2**64)
    assert int_value(7, "count", "f", lo=0, hi=7) == 7


# ---- match journals -----------------------------------------------------------------------

MATCH = ["minimax:2", "minimax:1", "--games", "4", "--ray", "off", "--workers", "1", "--seed", "3"]


@pytest.fixture(scope="module")
def journal_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The lines of a real two-pair match's journal."""
    path = tmp_path_factory.mktemp("j") / "match.journal"
    assert main([*MATCH, "--journal", str(path)]) == 0
    return path.read_text().splitlines()


def rerun(tmp_path: Path, lines: list[str], capsys) -> tuple[int, str]:
    path = tmp_path / "match.journal"
    path.write_text("".join(line + "\n" for line in lines))
    rc = main([*MATCH, "--journal", str(path)])
    return rc, capsys.readouterr().err


def edited(line: str, edit) -> str:
    d = json.loads(line)
    edit(d)
    return json.dumps(d).replace('"DEEP"', DEEP)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["a_black"].update(result="garbage"),
        lambda d: d["a_white"].update(result="*"),
        lambda d: d.update(a_stats={"moves": 10, "nodes": -5}),
        lambda d: d.update(b_stats={"moves": 10, "nodes": 10**40}),
        lambda d: d.update(a_stats={"moves": True}),
        lambda d: d.update(index=10**4000),
        lambda d: d["a_black"].update(moves="11-15"),
        lambda d: d["a_black"].update(size=True),
        lambda d: d.update(a_black="DEEP"),
    ],
    ids=[
        "garbage result",
        "unfinished",
        "negative",
        "huge",
        "boolean",
        "huge index",
        "moves text",
        "bool size",
        "deep",
    ],
)
def test_a_damaged_game_pair_line_is_refused(tmp_path, capsys, journal_lines, edit) -> None:
    lines = [journal_lines[0], edited(journal_lines[1], edit), journal_lines[2]]
    rc, err = rerun(tmp_path, lines, capsys)
    assert rc != 0
    assert f"match journal {tmp_path / 'match.journal'}, line 2: not a game pair" in err


def test_a_garbage_result_is_not_scored_as_a_draw(journal_lines) -> None:
    line = edited(journal_lines[1], lambda d: d["a_black"].update(result="garbage"))
    with pytest.raises(ValueError, match="garbage"):
        PairRecord.from_dict(json.loads(line))


def test_the_journals_own_pairs_still_load(journal_lines) -> None:
    pairs = [PairRecord.from_dict(json.loads(line)) for line in journal_lines[1:]]
    assert [p.index for p in pairs] == [0, 1]


def test_a_deeply_nested_journal_header_is_refused(tmp_path, capsys, journal_lines) -> None:
    rc, err = rerun(tmp_path, ['{"kind": ' + DEEP + "}"], capsys)
    assert rc != 0 and "line 1: not a journal header" in err and "nested deeper" in err


# ---- the journal's file: a regular file or nothing -------------------------------------------


def run_on(path: Path, capsys) -> tuple[int, str]:
    rc = main([*MATCH, "--journal", str(path)])
    return rc, capsys.readouterr().err


def test_a_device_is_never_replaced(tmp_path, capsys) -> None:
    """A device file (here a copy of /dev/null's node, made in a test folder: the test must
    not risk the machine's own /dev/null on a build without the fix) is refused, untouched."""
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    before = os.lstat(device)
    rc, err = run_on(device, capsys)
    after = os.lstat(device)
    assert rc != 0 and f"match journal {device}: a character device, not a regular file" in err
    assert stat.S_ISCHR(after.st_mode) and (after.st_rdev, after.st_ino) == (
        before.st_rdev,
        before.st_ino,
    )


def test_a_fifo_is_refused_without_waiting(tmp_path, capsys) -> None:
    fifo = tmp_path / "journal"
    os.mkfifo(fifo)
    rc, err = run_on(fifo, capsys)
    assert rc != 0 and f"match journal {fifo}: a FIFO, not a regular file" in err
    assert fifo.is_fifo()


def test_a_link_is_not_followed(tmp_path, capsys, journal_lines) -> None:
    target = tmp_path / "real.journal"
    target.write_text("\n".join(journal_lines) + "\n")
    link = tmp_path / "link.journal"
    link.symlink_to(target)
    rc, err = run_on(link, capsys)
    assert rc != 0 and f"match journal {link}: a symbolic link" in err
    assert link.is_symlink() and target.read_text() == "\n".join(journal_lines) + "\n"


def test_a_link_in_the_temporary_files_place_is_not_followed(tmp_path, capsys) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    (tmp_path / "new.journal.tmp").symlink_to(victim)
    rc, err = run_on(tmp_path / "new.journal", capsys)
    assert rc != 0 and "a symbolic link" in err
    assert victim.read_text() == "keep me\n"


@pytest.mark.parametrize(
    "content", [b"some notes\nof mine\n", b"\x89PNG\r\n\x1a\n\0\0", b"[1, 2]\n"]
)
def test_a_file_that_is_not_a_journal_is_left_alone(tmp_path, capsys, content: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    rc, err = run_on(path, capsys)
    assert rc != 0 and f"match journal {path}" in err and "Traceback" not in err
    assert path.read_bytes() == content
