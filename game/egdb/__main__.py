"""``python -m game.egdb``: build, probe and verify an endgame database, or write its manifest.

python -m game.egdb build --pieces 5 [--board 8|6] [--out DIR] [--workers K] [--ray]
python -m game.egdb probe "W:W21,K30:B1,K9" [--board 8] [--dir DIR]
python -m game.egdb verify [--board 8] [--dir DIR] [--pieces N]
python -m game.egdb manifest [--board 8] [--dir DIR]

The folder's manifest (NxN.manifest.json, written by build) lists its files; probe and verify
refuse a folder with a missing, extra or non-regular file, naming it, and one without a manifest
(a database built before manifests: ``manifest`` checks its files and writes one).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from game.egdb import EgdbError, EndgameDatabase, describe, signatures
from game.egdb.build import build
from game.egdb.manifest import check_folder, manifest_from_files, manifest_path, read_manifest
from game.position import Position

DEFAULT_DIR = "egdb"  # relative to the working directory; not in git


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            return _build(args)
        if args.command == "manifest":
            return _manifest(args)
        pieces = getattr(args, "pieces", 0) or read_manifest(args.dir, args.board)["pieces"]
        if pieces == 0:
            print(f"no {args.board}x{args.board} endgame database in {args.dir}", file=sys.stderr)
            return 2
        if args.command == "verify":
            check_folder(args.dir, args.board, pieces, checksums=True)
        db = EndgameDatabase(args.dir, args.board, pieces)
        if args.command == "probe":
            return _probe(db, args.fen, args.board, pieces)
        return _verify(db, args.board, pieces)
    except (EgdbError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m game.egdb",
        description="Endgame database tools. A database folder holds one file per material "
        "signature and a manifest (NxN.manifest.json) that build writes: probe, verify and a run "
        "refuse a folder with a missing, extra or non-regular file, naming it. A folder built "
        "before manifests existed is refused until the manifest command writes one.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build (or finish building) the database")
    b.add_argument("--pieces", type=int, required=True, help="most pieces on the board")
    b.add_argument("--board", type=int, default=8, choices=(6, 8))
    b.add_argument(
        "--out", default=DEFAULT_DIR, help=f"folder for the files (default {DEFAULT_DIR}/)"
    )
    b.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="processes solving at once"
    )
    b.add_argument(
        "--ray",
        action="store_true",
        help="run the slices as Ray tasks (shared folder on every node)",
    )
    p = sub.add_parser("probe", help="win/draw/loss of a position given as FEN")
    p.add_argument("fen")
    p.add_argument("--board", type=int, default=8, choices=(6, 8))
    p.add_argument("--dir", default=DEFAULT_DIR)
    v = sub.add_parser(
        "verify",
        help="check every file against the manifest (size, SHA-256) and its header, and every "
        "position against its moves",
    )
    v.add_argument("--board", type=int, default=8, choices=(6, 8))
    v.add_argument("--dir", default=DEFAULT_DIR)
    v.add_argument(
        "--pieces", type=int, default=0, help="up to this many pieces (default: all present)"
    )
    m = sub.add_parser(
        "manifest",
        help="write the manifest of a database built before manifests existed (every file "
        "checked first; anything else in the folder refused by name)",
    )
    m.add_argument("--board", type=int, default=8, choices=(6, 8))
    m.add_argument("--dir", default=DEFAULT_DIR)
    return parser


def _build(args: argparse.Namespace) -> int:
    report = build(
        args.out,
        args.board,
        args.pieces,
        workers=args.workers,
        use_ray=args.ray,
        progress=lambda line: print(line, flush=True),
    )
    print(
        f"built {report.pairs_built} slice pairs ({report.pairs_skipped} already there), "
        f"{report.positions:,} positions in {report.seconds:.1f} s; "
        f"database {report.bytes:,} bytes"
    )
    return 0


def _manifest(args: argparse.Namespace) -> int:
    written = manifest_from_files(args.dir, args.board)
    print(
        f"wrote {manifest_path(args.dir, args.board)}: {len(written['files'])} files, "
        f"every signature up to {written['pieces']} pieces"
    )
    return 0


def _probe(db: EndgameDatabase, fen: str, board: int, pieces: int) -> int:
    pos = Position.from_fen(fen, board)
    value = db.value(pos)
    if value == 0:
        print(f"{pos.fen()}: not in the database (more than {pieces} pieces)")
    else:
        _, plies = db.distance(pos)
        far = f", {plies} plies to conversion" if plies > 0 else ""
        print(
            f"{pos.fen()}: {describe(value, pos.turn)} ({describe(value)} for the side to move"
            f"{far})"
        )
    return 0


def _verify(db: EndgameDatabase, board: int, pieces: int) -> int:
    """Every position of every signature against its moves (the files were checked already)."""
    bad_total = 0
    start = time.monotonic()
    for sig in signatures(board, pieces):
        bad = db.verify(sig)
        bad_total += bad
        if bad:
            print(
                f"signature {'-'.join(map(str, sig))}: {bad:,} positions disagree with their moves"
            )
    verdict = "consistent" if bad_total == 0 else f"{bad_total:,} inconsistent positions"
    print(
        f"{board}x{board} up to {pieces} pieces: every file checked "
        "(manifest, SHA-256, header), "
        f"every position {verdict} "
        f"({time.monotonic() - start:.1f} s)"
    )
    return 0 if bad_total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
