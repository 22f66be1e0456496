"""``python -m play.cli``: play a network (or any player) in the terminal.

    python -m play.cli                                   # Black against the shipped network
    python -m play.cli --colour W --player minimax:6
    python -m play.cli --ballot 12 --player long-320min.safetensors:ms=500

Type a move in standard notation (``11-15``, a capture as ``15x22`` or with every landing square
``15x22x31``), or ``hint``, ``undo``, ``moves``, ``pdn``, ``quit``. The board is printed with a
numbered board beside it (the square numbers of the notation), and only when it has changed
since it was last printed: a bad move, ``help`` or ``moves`` print their answer alone.
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Callable

from game.notation import board_rows
from game.openings import acf_deck
from game.pdn import game_from_position, write_pdn
from game.position import Position
from play.analysis import position_from
from play.paths import Roots
from play.players import Players, PlayerSpec
from play.settings import load_settings, models_dir

HELP = "moves like 11-15 or 15x22x31; hint, undo, moves, pdn, quit"


def board_with_squares(pos: Position) -> str:
    """The board (Black at the top: b/w men, B/W kings, '.' empty) with the same board's square
    numbers beside it, row for row, and the side to move."""
    setup = pos.setup()
    size = setup.size
    rule = "+" + "-" * (3 * size + 1) + "+"  # three characters a square, as the numbers
    lines = [f"  {rule}   {rule}"]
    for cells in board_rows(setup):
        pieces = "".join(f"{piece:>3}" for _, piece in cells)
        numbers = "".join("   " if square is None else f"{square:>3}" for square, _ in cells)
        lines.append(f"  |{pieces} |   |{numbers} |")
    lines.append(f"  {rule}   {rule}")
    lines.append(f"  {'White' if setup.white_to_move else 'Black'} to move (b w men, B W kings)")
    return "\n".join(lines)


USER = "You"  # the PDN name of the one at the keyboard
EVENT = "checkerzero play.cli"  # the PDN Event tag of a terminal game


def today() -> str:
    """The date as PDN writes it (YYYY.MM.DD)."""
    return datetime.date.today().strftime("%Y.%m.%d")


def pdn_tags(colour: str, opponent: str, date: str) -> dict[str, str]:
    """The Seven Tag Roster's tags of a terminal game (Result, and FEN away from the start, are
    added by the writer): the user plays ``colour`` ('B', 'W' or 'both') against ``opponent``."""
    black = opponent if colour == "W" else USER
    white = opponent if colour == "B" else USER
    return {"Event": EVENT, "Date": date, "Black": black, "White": white}


def _wdl(answer: dict) -> str:
    if not answer.get("wdl"):
        return ""
    win, draw, loss = answer["wdl"]
    side = "Black" if answer["turn"] == "B" else "White"
    pv = " ".join(answer["pv"][:6])
    return f" ({side}: win {win:.0%}, draw {draw:.0%}, loss {loss:.0%}; PV {pv})"


def play_game(
    engines: Players,
    opponent: PlayerSpec,
    hint_spec: PlayerSpec,
    colour: str,
    start: Position,
    opening: list[str],
    read: Callable[[str], str],
    write: Callable[[str], None],
) -> Position:
    """The game loop; returns the final position. ``read`` raises EOFError at end of input.

    The board is written when it is the user's turn or the game is over, and only when it
    differs from the board last written (an opponent's reply is written as its move).
    """
    start_fen = start.fen()
    moves = list(opening)
    pos = position_from(start_fen, moves)
    shown: str | None = None  # the FEN of the board last written

    def show() -> None:
        nonlocal shown
        if pos.fen() != shown:
            write(board_with_squares(pos))
            shown = pos.fen()

    while True:
        if pos.is_over():
            show()
            write(f"Game over: {pos.result()} ({pos.end_reason})")
            break
        if colour in ("B", "W") and pos.turn != colour:
            answer = engines.move(pos, opponent)
            write(f"{opponent.text} plays {answer['move']}{_wdl(answer)}")
            moves.append(answer["move"])
            pos.play(answer["move"])
            continue
        show()
        captures = " (a capture is compulsory)" if pos.legal_moves()[0].is_capture else ""
        try:
            text = read(f"{'Black' if pos.turn == 'B' else 'White'} to move{captures}> ").strip()
        except EOFError:
            break
        if text in ("quit", "q", "exit"):
            break
        if text in ("help", "?", ""):
            write(HELP)
        elif text == "moves":
            write("legal: " + " ".join(str(m) for m in pos.legal_moves()))
        elif text == "hint":
            answer = engines.move(pos, hint_spec)
            write(f"hint: {answer['move']}{_wdl(answer)}")
        elif text == "undo":
            back = 2 if colour in ("B", "W") else 1
            if len(moves) - back < len(opening):
                write("nothing to undo")
                continue
            del moves[len(moves) - back :]
            pos = position_from(start_fen, moves)
        elif text == "pdn":
            tags = pdn_tags(colour, opponent.text, today())
            game = game_from_position(start, moves, pos.result() or "*", tags)
            write(write_pdn([game]))
        else:
            try:
                moves.append(str(pos.play(text)))
            except ValueError as e:
                write(str(e))
    return pos


def main(argv: list[str] | None = None) -> None:
    settings = load_settings()
    parser = argparse.ArgumentParser(
        prog="python -m play.cli",
        description=__doc__.split("\n")[0].strip("`") + ".",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--player", default=settings["default_opponent"], help="opponent spec")
    parser.add_argument(
        "--colour", "--color", default="B", choices=["B", "W", "both"], help="the side you play"
    )
    parser.add_argument("--fen", help="start from this position")
    parser.add_argument("--ballot", type=int, help="start from this ACF 3-move ballot number")
    parser.add_argument("--models", default=settings["models_dir"], help="the networks folder")
    parser.add_argument("--runs", default=settings["runs_dir"], help="the runs folder")
    args = parser.parse_args(argv)
    engines = Players(settings, Roots(args.runs, models_dir(args.models)))
    try:
        opponent = engines.parse(args.player)
        hint = opponent if opponent.searches else engines.parse(settings["default_player"])
        start = Position.from_fen(args.fen) if args.fen else Position()
        opening: list[str] = []
        if args.ballot is not None:
            ballots = {o.id: o for o in acf_deck()}
            if args.ballot not in ballots:
                raise ValueError(
                    f"no ACF ballot {args.ballot}; numbers are {min(ballots)}-"
                    f"{max(ballots)} (tournament ballots only)"
                )
            opening = list(ballots[args.ballot].moves)
    except ValueError as e:
        parser.error(str(e))
    print(f"You play {args.colour} against {opponent.text}. {HELP}.")
    play_game(engines, opponent, hint, args.colour, start, opening, input, print)


if __name__ == "__main__":
    main()
