"""The manifest of an endgame database folder: which files it holds, their sizes and checksums.

``NxN.manifest.json`` beside the files (one per board size) lists every signature file a build
wrote (name, bytes, SHA-256): the values (``.egdb``) and the distances to conversion (``.dtc``,
a format of their own), the two format versions, ``pieces``: the most pieces of which every
signature's values are listed, and ``distance_pieces``: the same for the distances. A build
rewrites it after each slice pair, so it always names exactly the finished files. Opening the
database checks the folder against it: every listed file present and a regular file of the listed
size, and nothing else in the folder but other boards' files and manifests; ``verify`` compares
the checksums too. A folder built before manifests existed is refused until
``python -m game.egdb manifest`` writes one from the files there (each checked).

Nothing in the folder is opened before it is known to be a regular file (and then without
blocking or following links), so a FIFO, a device or a link in a file's place is refused by
name, never waited on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
from pathlib import Path

from game import _core
from game.egdb import EgdbError, Signature, check_file, signatures
from game.files import kind_of
from game.json_header import parse_object

MANIFEST_VERSION = 1
FILE_FORMAT = 1  # the signature files' format version (kFormatVersion in game/cpp/egdb.h)
DISTANCE_FORMAT = 1  # the distance files' format version (kDistanceFormatVersion in egdb.h)
MAX_MANIFEST_BYTES = 16 << 20  # a real one is a few hundred bytes a file; 8 pieces: ~100 KB
HEADER_BYTES = 64  # kHeaderBytes in game/cpp/egdb.h
POSITIONS_PER_BYTE = 4  # kPositionsPerByte: 2 bits a position
MAX_FILE_PIECES = 12  # no signature file name with more pieces is taken for one

_FILE = re.compile(r"(\d+)x(\d+)_(\d+)-(\d+)-(\d+)-(\d+)\.(egdb|dtc)")
_MANIFEST = re.compile(r"(\d+)x(\d+)\.manifest\.json")
_BOARD = re.compile(r"(\d+)x(\d+)[_.]")  # a name that belongs to some board's database


def manifest_path(folder: str | Path, size: int) -> Path:
    return Path(folder) / f"{size}x{size}.manifest.json"


def regular_size(path: Path) -> int:
    """The size of a regular file, looked at without opening it or following a link.

    Raises EgdbError naming the path when it is missing or anything but a regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise EgdbError(f"endgame database file {path}: missing") from None
    except OSError as e:
        raise EgdbError(f"endgame database file {path}: cannot stat ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise EgdbError(
            f"endgame database file {path}: not a regular file ({kind_of(st.st_mode)}); "
            "remove it (a build then writes the file in its place)"
        )
    return st.st_size


def _open_regular(path: Path) -> int:
    regular_size(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise EgdbError(f"endgame database file {path}: cannot open ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced since the lstat
        os.close(fd)
        raise EgdbError(f"endgame database file {path}: not a regular file")
    return fd


def file_bytes(size: int, sig: Signature) -> int:
    """The size of a signature's file: its header, then 2 bits a position (game/cpp/egdb.h)."""
    return HEADER_BYTES + -(-_core.egdb_index_size(size, sig) // POSITIONS_PER_BYTE)


def distance_file_bytes(size: int, sig: Signature) -> tuple[int, int]:
    """The sizes a signature's distance file may have: its header, then 1 or 2 bytes a position
    (the width its longest distance needs; game/cpp/egdb_distance.cpp)."""
    count = _core.egdb_index_size(size, sig)
    return HEADER_BYTES + count, HEADER_BYTES + 2 * count


def allowed_bytes(size: int, name: str) -> tuple[int, ...]:
    """The sizes the file ``name`` of a ``size`` board may have (a value or a distance file)."""
    sig = signature_of_name(name, size)
    assert sig is not None
    return distance_file_bytes(size, sig) if is_distance_file(name) else (file_bytes(size, sig),)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    fd = _open_regular(path)
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def entry_for(path: Path) -> dict:
    return {"bytes": regular_size(path), "sha256": sha256_of(path)}


@functools.cache
def _signature_set(size: int, pieces: int) -> frozenset:
    return frozenset(signatures(size, pieces))


def signature_of_name(name: str, size: int) -> Signature | None:
    """The signature a file name of this board's database stands for, or None."""
    m = _FILE.fullmatch(name)
    if m is None or int(m[1]) != size or int(m[2]) != size:
        return None
    sig = (int(m[3]), int(m[4]), int(m[5]), int(m[6]))
    if not 1 <= sum(sig) <= MAX_FILE_PIECES or sig not in _signature_set(size, sum(sig)):
        return None
    namer = _core.egdb_file_name if m[7] == "egdb" else _core.egdb_distance_file_name
    return sig if namer(size, sig) == name else None


def is_distance_file(name: str) -> bool:
    return name.endswith(".dtc")


def check_any_file(path: Path, size: int, sig: Signature) -> int:
    """``check_file`` of a value file, or the same checks of a distance file (by its name)."""
    if not is_distance_file(path.name):
        return check_file(path, size, sig)
    regular_size(path)
    try:
        return _core.egdb_check_distance_file(str(path), size, sig)
    except RuntimeError as e:
        raise EgdbError(str(e)) from None


def covered_pieces(size: int, names, namer=None) -> int:
    """The most pieces N such that every signature of up to N pieces is among ``names`` (value
    files; with ``namer=_core.egdb_distance_file_name``, distance files)."""
    names = set(names)
    namer = namer or _core.egdb_file_name
    top = max((sum(s) for n in names if (s := signature_of_name(n, size))), default=0)
    pieces = 0
    for n in range(1, top + 1):
        if not all(namer(size, s) in names for s in signatures(size, n) if sum(s) == n):
            break
        pieces = n
    return pieces


def _other_board(name: str, size: int) -> bool:
    """A name that belongs to another board's database, or a manifest (checked on its own)."""
    if _MANIFEST.fullmatch(name):
        return True
    m = _BOARD.match(name)
    return m is not None and (int(m[1]), int(m[2])) != (size, size)


def _has_files(folder: Path, size: int) -> bool:
    try:
        return any(signature_of_name(e.name, size) for e in os.scandir(folder))
    except OSError:
        return False


def read_manifest(folder: str | Path, size: int) -> dict:
    """The folder's manifest for board ``size``, its fields checked. Raises EgdbError naming it."""
    folder = Path(folder)
    path = manifest_path(folder, size)
    if not os.path.lexists(path):
        if not _has_files(folder, size):
            raise EgdbError(f"no {size}x{size} endgame database in {folder}")
        raise EgdbError(
            f"{folder}: an endgame database without a manifest ({path.name}), built before "
            "manifests existed; check its files and write one with: python -m game.egdb manifest "
            f"--board {size} --dir {folder}"
        )
    fd = _open_regular(path)
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_MANIFEST_BYTES + 1)

    def bad(what: str) -> EgdbError:
        return EgdbError(
            f"endgame database manifest {path}: {what}; write it again with: "
            f"python -m game.egdb manifest --board {size} --dir {folder}"
        )

    if len(data) > MAX_MANIFEST_BYTES:
        raise bad(f"larger than {MAX_MANIFEST_BYTES:,} bytes")
    try:
        m = parse_object(data, "the file")
    except ValueError as e:
        raise bad(str(e)) from None
    if m.get("manifest_version") != MANIFEST_VERSION:
        raise bad(f"not a version {MANIFEST_VERSION} manifest")
    if m.get("board") != size:
        raise bad(f"for board {m.get('board')!r}, not {size}")
    if m.get("file_format") != FILE_FORMAT:
        raise bad(f"files of format {m.get('file_format')!r}, this program reads {FILE_FORMAT}")
    files = m.get("files")
    if not isinstance(files, dict):
        raise bad("no file list")
    for name, entry in files.items():
        if signature_of_name(name, size) is None:
            raise bad(f"lists {name!r}, not a {size}x{size} database file name")
        if (
            not isinstance(entry, dict)
            or type(entry.get("bytes")) is not int
            or entry["bytes"] < 0
            or not isinstance(entry.get("sha256"), str)
            or not re.fullmatch(r"[0-9a-f]{64}", entry["sha256"])
        ):
            raise bad(f"a bad entry for {name}")
        expected = allowed_bytes(size, name)
        if entry["bytes"] not in expected:
            sizes = " or ".join(f"{b:,}" for b in expected)
            raise bad(f"lists {name} at {entry['bytes']:,} bytes, a file of it has {sizes}")
    if m.get("pieces") != covered_pieces(size, files):
        raise bad(f"says {m.get('pieces')!r} pieces, its files cover {covered_pieces(size, files)}")
    dist_pieces = distance_pieces(size, files)
    if m.get("distance_pieces", 0) != dist_pieces:
        raise bad(
            f"says {m.get('distance_pieces')!r} distance pieces, its files cover {dist_pieces}"
        )
    if any(map(is_distance_file, files)) and m.get("distance_format") != DISTANCE_FORMAT:
        raise bad(
            f"distance files of format {m.get('distance_format')!r}, this program reads "
            f"{DISTANCE_FORMAT}"
        )
    return m


def distance_pieces(size: int, names) -> int:
    """The most pieces N such that every signature's distance file up to N pieces is listed."""
    return covered_pieces(size, names, _core.egdb_distance_file_name)


def check_folder(folder: str | Path, size: int, max_pieces: int, checksums: bool = False) -> dict:
    """Checks the folder against its manifest before anything in it is opened: the database holds
    ``max_pieces``, every listed file is a regular file of its listed size (and, with
    ``checksums``, of its listed SHA-256), nothing else of this board is there. Returns the
    manifest; raises EgdbError naming the first file that is missing, extra or wrong."""
    folder = Path(folder)
    m = read_manifest(folder, size)
    build_hint = (
        f"python -m game.egdb build --pieces {max(max_pieces, m['pieces'])} --board {size} "
        f"--out {folder}"
    )
    if max_pieces > m["pieces"]:
        raise EgdbError(
            f"the {size}x{size} endgame database in {folder} holds up to {m['pieces']} pieces "
            f"(its manifest), not {max_pieces} (build it with: {build_hint})"
        )
    files = m["files"]
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        name = entry.name
        if name in files or _other_board(name, size):
            continue
        hint = (
            "left by an unfinished build: remove it, or build again, which removes it"
            if ".tmp" in name
            else "remove or move it (the folder holds only the database's files)"
        )
        raise EgdbError(
            f"endgame database file {folder / name}: not in the manifest "
            f"{manifest_path(folder, size).name}; {hint}"
        )
    for name, listed in sorted(files.items()):
        path = folder / name
        try:
            actual = regular_size(path)
        except EgdbError as e:
            if os.path.lexists(path):
                raise
            raise EgdbError(
                f"endgame database file {path}: missing (its manifest lists it); "
                f"rebuild it with: {build_hint}"
            ) from e
        if actual != listed["bytes"]:
            what = "truncated" if actual < listed["bytes"] else "trailing bytes"
            raise EgdbError(
                f"endgame database file {path}: {actual:,} bytes, its manifest says "
                f"{listed['bytes']:,} ({what})"
            )
    for name, listed in sorted(files.items()) if checksums else ():
        # after every size is checked: hashing a file of a wrong size could take hours
        if sha256_of(folder / name) != listed["sha256"]:
            raise EgdbError(
                f"endgame database file {folder / name}: its SHA-256 differs from the "
                "manifest's (the file changed since it was built)"
            )
    return m


def write_manifest(folder: str | Path, size: int, files: dict[str, dict]) -> dict:
    """Writes the manifest of ``files`` (name: {"bytes", "sha256"}) under a temporary name and
    renames it into place. Returns it."""
    path = manifest_path(folder, size)
    m = {
        "manifest_version": MANIFEST_VERSION,
        "board": size,
        "file_format": FILE_FORMAT,
        "pieces": covered_pieces(size, files),
        "distance_format": DISTANCE_FORMAT,
        "distance_pieces": distance_pieces(size, files),
        "files": {name: files[name] for name in sorted(files)},
    }
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(m, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return m


def manifest_from_files(folder: str | Path, size: int) -> dict:
    """Writes the manifest of a folder built before manifests: every file there checked
    (header, length, CRC-32) and hashed. Anything in the folder that is not a regular
    signature file of this board (or another board's file) is refused by name."""
    folder = Path(folder)
    files = {}
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        name = entry.name
        if _other_board(name, size):
            continue
        path = folder / name
        sig = signature_of_name(name, size)
        if sig is None:
            raise EgdbError(
                f"{path}: not a {size}x{size} endgame database file; remove or move it "
                "before writing the manifest"
            )
        regular_size(path)
        check_any_file(path, size, sig)
        files[name] = entry_for(path)
    if not files:
        raise EgdbError(f"no {size}x{size} endgame database in {folder}")
    return write_manifest(folder, size, files)
