"""``python -m evaluation.book build|show``: build an opening book (a network's, or with
``--evaluation`` the fast alpha-beta player's), or check one and say what it holds
(``evaluation.players.book``'s docstring)."""

from __future__ import annotations

import argparse
import logging
from collections import defaultdict
from pathlib import Path

from evaluation.book.build import (
    DEFAULT_AB_DEPTH,
    DEFAULT_MIN_GAMES,
    DEFAULT_PLIES,
    DEFAULT_SELFPLAY_PLIES,
    DEFAULT_SIMULATIONS,
    build_alphabeta_book,
    build_book,
)
from evaluation.players.book import load_book
from game.openings import acf_deck


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.book", description="Build or check an opening book."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build a network's or the fast player's book")
    whose = b.add_mutually_exclusive_group(required=True)
    whose.add_argument("--network", help="the network's .safetensors file (MCTS searches)")
    whose.add_argument(
        "--evaluation",
        help="a learned evaluation file of the ab+nn player (its alpha-beta searches; "
        "game/data/nneval-v2.safetensors is the shipped one)",
    )
    b.add_argument("--out", help="the book file (default: <stem>.book.json beside the file)")
    b.add_argument("--depth", type=int, default=DEFAULT_AB_DEPTH, help="--evaluation: search depth")
    b.add_argument("--workers", type=int, default=1, help="--evaluation: processes")
    b.add_argument("--sims", type=int, default=DEFAULT_SIMULATIONS, help="visits per position")
    b.add_argument("--plies", type=int, default=DEFAULT_PLIES, help="book moves per ballot line")
    b.add_argument("--selfplay", action="append", default=[], help="a run's selfplay.pdn")
    b.add_argument("--selfplay-plies", type=int, default=DEFAULT_SELFPLAY_PLIES)
    b.add_argument("--min-games", type=int, default=DEFAULT_MIN_GAMES)
    b.add_argument("--ballots", type=int, default=0, help="the first N ACF ballots (0: all)")
    b.add_argument(
        "--replies",
        action="store_true",
        help="also every position one opponent move off the book's lines (both colours)",
    )
    b.add_argument("--threads", type=int, default=None, help="torch threads")
    s = sub.add_parser("show", help="check a book and print what it holds")
    s.add_argument("book")
    s.add_argument(
        "--network", help="also check that it was built for this network or evaluation file"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "build":
            for name, value in (
                ("--sims", args.sims),
                ("--plies", args.plies),
                ("--ballots", args.ballots),
            ):
                if value < 0:
                    raise ValueError(f"{name} must be at least 0, got {value}")
            if args.evaluation is not None:
                if not 1 <= args.depth <= 64 or args.workers < 1:
                    raise ValueError(
                        f"--depth must be 1..64 and --workers at least 1, got {args.depth} "
                        f"and {args.workers}"
                    )
                if not Path(args.evaluation).is_file():
                    raise ValueError(f"evaluation {args.evaluation} not found")
                build_alphabeta_book(
                    args.evaluation,
                    args.out,
                    depth=args.depth,
                    plies=args.plies,
                    replies=args.replies,
                    openings=acf_deck()[: args.ballots] if args.ballots else None,
                    workers=args.workers,
                    progress=print,
                )
                return
            if not Path(args.network).is_file():
                raise ValueError(f"network {args.network} not found")
            build_book(
                args.network,
                args.out,
                simulations=args.sims,
                plies=args.plies,
                selfplay=args.selfplay,
                selfplay_plies=args.selfplay_plies,
                min_games=args.min_games,
                replies=args.replies,
                openings=acf_deck()[: args.ballots] if args.ballots else None,
                threads=args.threads,
                progress=print,
            )
        else:
            book = load_book(args.book, args.network)
            sources = defaultdict(int)
            for entry in book.entries.values():
                sources[entry.get("source", "?")] += 1
            shown = ", ".join(f"{n} from {s}" for s, n in sorted(sources.items()))
            print(f"{book.path}: {len(book)} positions ({shown}), network {book.network}")
    except (ValueError, OSError) as e:
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
