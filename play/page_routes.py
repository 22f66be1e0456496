"""The routes the page's game features use beside the core API (play.app adds them):

- ``GET /api/opponents``: the suggested opponents by name with their measured strength
  (play.opponents), and the computer's rule for accepting a draw offer;
- ``POST /api/pdn/read``: a PDN text read whole: every good game with its annotated tree
  (comments, variations, NAGs, marks), and each bad game listed by number, names and move;
- ``POST /api/pdn/save``: games with their annotated trees written as PDN, every move of every
  variation checked first;
- ``GET /api/runs/{run}/elo``: the Training view's Elo chart: the run's eval/curve.csv and the
  ladder's rungs (play.run_charts);
- ``GET /favicon.ico``: the page's icon.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse, PlainTextResponse
from pydantic import BaseModel, Field

from game.pdn import PdnError, PdnGame, PdnTooLong, iter_pdn, write_pdn
from game.pdn_lines import check_line, count_moves, line_from_json, line_to_json
from game.position import Position
from play import opponents as opponent_list
from play.paths import Roots
from play.players import LimitError
from play.run_charts import elo_chart

STATIC = Path(__file__).resolve().parent / "static"
MAX_FEN_CHARS = 200  # as play.app's


class PdnText(BaseModel):
    pdn: str


class SavedGame(BaseModel):
    fen: str | None = Field(None, max_length=MAX_FEN_CHARS, description="start FEN")
    result: str = "*"
    tags: dict[str, str] = Field(default_factory=dict)
    line: list[Any] = Field(
        default_factory=list,
        description="the main line: [{move, mark?, nags?, comment?, before?, variations?}]",
    )
    comment: str = ""


class SaveRequest(BaseModel):
    games: list[SavedGame]


def game_json(game: PdnGame) -> dict[str, Any]:
    """A game as the page reads it: its main line, and the tree when it is annotated."""
    return {
        "tags": game.tags,
        "fen": game.start().fen(),
        "moves": game.moves,
        "result": game.result,
        "warnings": game.warnings,
        "line": line_to_json(game.line),
        "comment": game.comment,
    }


def error_json(error: PdnError) -> dict[str, Any]:
    return {
        "number": error.number,
        "names": error.names,
        "move": error.move,
        "message": error.message,
    }


def add_page_routes(
    app: FastAPI, settings: dict[str, Any], networks: Callable[[], list[str]], roots: Roots
) -> None:
    """The routes above, on ``app``; ``networks()`` lists the network files on offer."""
    limits = settings["limits"]

    @app.get("/api/opponents")
    def opponents() -> dict[str, Any]:
        """The opponents the page suggests, by name with their strength on the ladder's scale
        (from the ladder tables, ``play.ratings_tables``), and when the computer accepts a
        draw offer (``play.draw_offer``)."""
        rated = opponent_list.ladder_ratings(settings)
        return {
            "default": settings["default_opponent"],
            "opponents": opponent_list.suggested(settings, networks(), rated),
            "draw_offer": settings["draw_offer"],
        }

    @app.post("/api/pdn/read")
    def pdn_read(q: PdnText) -> dict[str, Any]:
        """Every game of a PDN text, up to ``limits.max_pdn_games``, with its annotations; a
        bad game does not stop the reading: it is listed in ``errors`` by number (1 for the
        text's first game), names and the move where it went wrong."""
        if len(q.pdn) > limits["max_pdn_chars"]:
            raise LimitError(
                f"PDN text of {len(q.pdn)} characters; at most {limits['max_pdn_chars']} "
                "(limits.max_pdn_chars)"
            )
        errors: list[PdnError] = []
        cap = int(limits["max_pdn_games"])
        games = iter_pdn(q.pdn, max_moves=int(limits["max_pdn_moves"]), errors=errors)
        try:
            read = list(islice(games, cap + 1))
        except PdnTooLong as e:
            raise LimitError(f"{e} (limits.max_pdn_moves)") from None
        return {
            "games": [game_json(g) for g in read[:cap]],
            "errors": [error_json(e) for e in errors],
            "capped": len(read) > cap,
        }

    @app.post("/api/pdn/save", response_class=PlainTextResponse)
    def pdn_save(q: SaveRequest) -> str:
        """Games with their trees as PDN: every move of every line checked, marks, NAGs and
        comments refused (400, naming the game and move) where PDN cannot carry them."""
        if len(q.games) > limits["max_pdn_games"]:
            raise LimitError(f"{len(q.games)} games; at most {limits['max_pdn_games']}")
        out, moves = [], 0
        for k, g in enumerate(q.games):
            where = f"game {k + 1}"
            line = line_from_json(g.line, f"{where}: line")
            moves += count_moves([line])
            if moves > limits["max_pdn_moves"]:
                raise LimitError(f"more than {limits['max_pdn_moves']} moves in all")
            start = Position.from_fen(g.fen) if g.fen else Position()
            try:
                main = check_line(start, line)
            except ValueError as e:
                raise ValueError(f"{where}: {e}") from None
            game = PdnGame(tags=dict(g.tags), moves=main, result=g.result, comment=g.comment)
            if any(m.annotated for m in line):
                game.line = line
            if g.fen and (start.fen() != Position().fen()):
                game.tags["SetUp"] = "1"
                game.tags["FEN"] = start.fen()
            out.append(game)
        return write_pdn(out)

    @app.get("/api/runs/{run}/elo")
    def run_elo(run: str) -> dict[str, Any]:
        """The run's Elo chart: each rated candidate as its eval/curve.csv has it (version,
        step, wall_s, positions, elo, lower, upper, games), and the ladder's rungs."""
        return elo_chart(roots.run(run), int(settings["runs"]["max_file_bytes"]))

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")


__all__ = ["add_page_routes", "game_json"]
