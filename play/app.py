"""The play server: a JSON API (OpenAPI docs at /docs) and the page that uses it.

Routes (all JSON unless said otherwise):

- ``POST /api/position``: a position (FEN and/or moves) with its legal moves, pieces and result;
- ``POST /api/move``: a player's move for a position, with W/D/L, PV and top moves;
- ``POST /api/analyse``: analysis of many positions by the alpha-beta (multi-PV lines, the
  default) or the network (W/D/L, visits); ``/api/deepen``: one position deepened until stopped
  (``play.analysis_routes``);
- ``GET /api/openings``, ``POST /api/pdn/parse``, ``POST /api/pdn/write``: starts and PDN;
- ``GET /api/runs`` and ``/api/runs/{run}/...``: runs, metrics, Elo, games (as PDN or JSON);
- ``GET /api/config``, ``GET /api/status``: the limits and the searches under way;
- ``GET /docs``: the OpenAPI schema (``/openapi.json``) in Swagger UI, from local files;
- the page's own routes (opponents by name, annotated PDN read and saved, the Elo chart, the
  favicon): ``play.page_routes``.

Bounds: a request whose Host header names another machine than the server's gets 400 (a web
page of another site cannot reach the API through DNS rebinding); request bodies above
``limits.max_request_bytes`` get 413; budgets, batch sizes and move lists beyond the limits get
422. At most ``limits.max_concurrent_searches`` searches run at once (``play.slots``: at most
``limits.max_searches_per_client`` per client, freed slots shared round robin); a request that
waits ``limits.queue_wait_s`` for a slot gets 503. A search stops after ``limits.max_request_s``
seconds (its answer says ``"stopped": "time"``) or as soon as its client disconnects. Players
that do not search (random, a network at one visit) run in slots of their own
(``limits.max_concurrent_quick``, shared between clients the same way), so they never wait
behind a search and are bounded all the same. Every request counts against its client's
``limits.max_requests_per_client`` (``play.clients``: 429 beyond), and connections are capped
and given read deadlines (``play.connections``). Paths from requests are checked by
``play.paths.Roots``, files are read through ``game.files`` (regular files, size-capped),
and errors name paths relative to their folder; the server never writes a file.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from itertools import islice
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

from checkerzero.run_files import GAME_FOLDERS
from game.notation import squares_of
from game.openings import acf_deck
from game.pdn import PdnTooLong, game_from_position, iter_pdn, write_pdn
from game.position import Position
from play import runs as run_files
from play.analysis import Cancelled, Stop, position_from
from play.analysis_routes import add_analysis_routes
from play.clients import SCOPE_KEY as CLIENT_KEY
from play.clients import ClientLimit, client_of
from play.connections import BodyLimit
from play.page_routes import add_page_routes
from play.paths import CHECKPOINT_SUFFIX, NotFound, PathRefused, Roots, is_network
from play.players import LimitError, Players
from play.slots import Busy, Slots

logger = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
MAX_FEN_CHARS = 200  # the longest FEN of 8x8 (24 pieces, all kings) is under 120
DISCONNECT_POLL_S = 0.1  # how often a request with work under way asks whether its client left
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class PositionQuery(BaseModel):
    fen: str | None = Field(
        None, max_length=MAX_FEN_CHARS, description="start FEN; initial if none"
    )
    moves: list[str] = Field(default_factory=list, description="moves played from the start")


class MoveQuery(PositionQuery):
    player: str | None = Field(None, description="player spec; the default network if none")


class PdnText(BaseModel):
    pdn: str


class PdnGameIn(PositionQuery):
    result: str = "*"
    tags: dict[str, str] = Field(default_factory=dict)


class HostCheck:
    """ASGI middleware: 400 for a request whose Host header names no address of this server.

    A web page of another site can make a browser resolve its own name to 127.0.0.1 (DNS
    rebinding) and then call the API as a page of that name; its requests carry that name in
    Host, so only the loopback names, the bound address and ``allowed_hosts`` are accepted. The
    port is not checked (an SSH tunnel may forward the server to another port)."""

    def __init__(self, app: Any, allowed: set[str]) -> None:
        self.app = app
        self.allowed = {h.lower().strip("[]") for h in allowed}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        values = [v for k, v in scope.get("headers", []) if k == b"host"]
        name = host_name(values[0].decode("latin-1")) if len(values) == 1 else None
        if name is not None and name in self.allowed:
            await self.app(scope, receive, send)
            return
        shown = values[0].decode("latin-1")[:100] if values else "none"
        response = JSONResponse(
            {
                "detail": f"Host {shown!r} is not a name of this server; use one of "
                f"{sorted(self.allowed)} (more can be allowed with allowed_hosts in "
                "conf/play/default.yaml)"
            },
            status_code=400,
        )
        await response(scope, receive, send)


def host_name(value: str) -> str | None:
    """The name part of a Host header value (``[::1]:8000`` -> ``::1``), lower case; None
    when it is not one."""
    value = value.strip().lower()
    if value.startswith("["):
        name, sep, rest = value[1:].partition("]")
        if not sep or (rest and not (rest[0] == ":" and rest[1:].isdigit())):
            return None
        return name
    name, sep, port = value.partition(":")
    if sep and not port.isdigit():
        return None
    return name.rstrip(".") or None


def allowed_hosts(settings: dict[str, Any]) -> set[str]:
    """The Host names the server answers: loopback, its bound address, ``allowed_hosts``."""
    names = set(LOOPBACK_HOSTS) | {str(h).lower() for h in settings.get("allowed_hosts") or []}
    if settings["host"] not in ("0.0.0.0", "::", ""):
        names.add(str(settings["host"]).lower())
    return names


def describe(pos: Position) -> dict[str, Any]:
    """What the board needs: pieces, legal moves with every landing square, the result."""
    setup = pos.setup()
    legal = pos.legal_moves()
    return {
        "fen": pos.fen(),
        "turn": pos.turn,
        "ply": pos.ply,
        "black": squares_of(setup.black & ~setup.kings),
        "white": squares_of(setup.white & ~setup.kings),
        "black_kings": squares_of(setup.black & setup.kings),
        "white_kings": squares_of(setup.white & setup.kings),
        "legal": [
            {"move": str(m), "squares": list(m.squares), "captures": list(m.captures)}
            for m in legal
        ],
        "must_capture": bool(legal) and legal[0].is_capture,
        "no_progress": pos.game.no_progress,
        "result": pos.result(),
        "end_reason": pos.end_reason,
    }


# A route's way to run its work, and a query's position (see create_app).
RunWork = Callable[[Request, Callable[[Stop], dict[str, Any]], bool], Awaitable[dict[str, Any]]]
PositionOf = Callable[[PositionQuery], Position]


def create_app(settings: dict[str, Any], roots: Roots) -> FastAPI:
    """The app over ``roots`` with the play ``settings`` (conf/play/default.yaml)."""
    limits = settings["limits"]
    engines = Players(settings, roots)
    slots = Slots(
        int(limits["max_concurrent_searches"]),
        int(limits["max_searches_per_client"]),
        int(limits["max_waiting_per_client"]),
        float(limits["queue_wait_s"]),
    )
    # Work that needs no search (a random move, one visit per position) has slots of its own,
    # shared between clients the same way, so it never waits behind a search and is bounded.
    quick = Slots(
        int(limits["max_concurrent_quick"]),
        int(limits["max_searches_per_client"]),
        int(limits["max_waiting_per_client"]),
        float(limits["queue_wait_s"]),
    )
    # Searches run on threads of their own, so the threads that serve the other routes are
    # never all busy with searches, and waiting for a slot takes no thread at all.
    lanes = {
        False: (slots, ThreadPoolExecutor(int(slots.total), thread_name_prefix="search")),
        True: (quick, ThreadPoolExecutor(int(quick.total), thread_name_prefix="quick")),
    }
    counts = {"served": 0, "cancelled": 0, "stopped": 0}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        for _slots, threads in lanes.values():  # idle workers end; busy ones are cancelled
            threads.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(
        lifespan=lifespan,
        title="checkerzero play",
        description="Play, analyse and watch a checkers network. Read-only over its folders.",
        version="1",
        docs_url=None,  # served below from local copies of Swagger UI (no CDN)
        redoc_url=None,
    )
    run_work = _search_runner(limits, lanes, counts)
    _add_error_handlers(app, roots)

    def position(q: PositionQuery) -> Position:
        return position_from(q.fen, q.moves, max_moves=int(limits["max_moves"]))

    _add_page(app)
    _add_config_routes(app, settings, roots, slots, quick, counts)
    _add_position_routes(app, settings, engines, run_work, position)
    add_analysis_routes(app, settings, engines, run_work, position)
    _add_pdn_routes(app, limits, position)
    _add_run_routes(app, settings, roots)
    app.add_middleware(BodyLimit, limit=int(limits["max_request_bytes"]))
    app.add_middleware(ClientLimit, limit=int(limits["max_requests_per_client"]))
    app.add_middleware(HostCheck, allowed=allowed_hosts(settings))  # outermost: checked first
    return app


def _search_runner(
    limits: dict[str, Any],
    lanes: dict[bool, tuple[Slots, ThreadPoolExecutor]],
    counts: dict[str, int],
) -> RunWork:
    """How a route runs its work: on a thread of its lane (searches, or quick work) within a
    slot of that lane, stopped when its client leaves or its time is up (`run_work`)."""

    async def watch(request: Request, stop: Stop, gone: asyncio.Event) -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(DISCONNECT_POLL_S)
        stop.cancel()
        gone.set()

    async def run_work(
        request: Request, work: Callable[[Stop], dict[str, Any]], cheap: bool
    ) -> dict[str, Any]:
        """``work(stop)`` on a thread within a slot (cheap work: a quick slot), ended by
        ``stop`` when its client disconnects or ``limits.max_request_s`` has passed."""
        stop = Stop(float(limits["max_request_s"]))
        slots, threads = lanes[cheap]
        client = request.scope.get(CLIENT_KEY) or client_of(request.scope)
        gone = asyncio.Event()
        watcher = asyncio.create_task(watch(request, stop, gone))
        try:
            if not await slots.acquire(client, gone):
                counts["cancelled"] += 0 if cheap else 1
                raise Cancelled("the client left while waiting for a search slot")
            if gone.is_set() or await request.is_disconnected():  # left as the slot came
                slots.release(client)
                counts["cancelled"] += 0 if cheap else 1
                raise Cancelled("the client left while waiting for a search slot")
            future = asyncio.get_running_loop().run_in_executor(threads, work, stop)

            def finished(_: Any) -> None:  # the slot is held until the thread is done
                slots.release(client)
                if cheap:  # the counts are the searches'
                    return
                counts["served"] += 1
                if stop.reason is not None:
                    counts["cancelled" if stop.reason == "cancelled" else "stopped"] += 1

            future.add_done_callback(finished)
            try:
                answer = await asyncio.shield(future)
            except asyncio.CancelledError:
                stop.cancel()
                raise
        finally:
            watcher.cancel()
        if stop.reason == "time":
            answer["stopped"] = "time"
        return answer

    return run_work


def _add_error_handlers(app: FastAPI, roots: Roots) -> None:
    """The status codes of the errors a route raises, messages with the server's folders out."""
    roots_shown = [(f"{root}/", "") for root in (roots.runs, roots.models)]

    def shown(message: str) -> str:
        """``message`` with the server's folders left out: paths as a request names them."""
        for full, short in roots_shown:
            message = message.replace(full, short)
        return message

    @app.exception_handler(Busy)
    async def _busy(_: Request, exc: Busy) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(Cancelled)
    async def _cancelled(_: Request, exc: Cancelled) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=499)  # nobody reads it

    @app.exception_handler(PathRefused)
    async def _refused(_: Request, exc: PathRefused) -> JSONResponse:
        return JSONResponse({"detail": shown(str(exc))}, status_code=403)

    @app.exception_handler(NotFound)
    async def _not_found(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": shown(str(exc))}, status_code=404)

    @app.exception_handler(LimitError)
    async def _limit(_: Request, exc: LimitError) -> JSONResponse:
        return JSONResponse({"detail": shown(str(exc))}, status_code=422)

    @app.exception_handler(ValueError)
    async def _bad(_: Request, exc: ValueError) -> JSONResponse:
        return JSONResponse({"detail": shown(str(exc))}, status_code=400)


def _add_page(app: FastAPI) -> None:
    """The page (``/``, its static files) and the API docs (``/docs``)."""
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title}: API",
            swagger_js_url="/static/swagger/swagger-ui-bundle.js",
            swagger_css_url="/static/swagger/swagger-ui.css",
            swagger_favicon_url="/static/swagger/favicon-32x32.png",
        )


def _add_config_routes(
    app: FastAPI,
    settings: dict[str, Any],
    roots: Roots,
    slots: Slots,
    quick: Slots,
    counts: dict[str, int],
) -> None:
    """The defaults, limits and networks the page offers, and the searches under way."""
    limits = settings["limits"]

    def networks() -> list[str]:
        found = []
        if roots.models.is_dir():
            found += [
                roots.relative(p)
                for p in sorted(roots.models.glob(f"*{CHECKPOINT_SUFFIX}"))
                if p.is_file() and p.resolve().is_relative_to(roots.models) and is_network(p)
            ]
        runs = settings["runs"]
        for run in run_files.list_runs(roots, runs["running_within_s"], runs["max_file_bytes"]):
            if run.get("network"):
                found.append(run["network"])
        return found

    add_page_routes(app, settings, networks, roots)  # opponents, annotated PDN, Elo chart

    @app.get("/api/config")
    def config() -> dict[str, Any]:
        """Defaults, limits and the mistake thresholds the page uses."""
        return {
            "default_player": settings["default_player"],
            "default_opponent": settings["default_opponent"],
            "default_simulations": settings["default_simulations"],
            "limits": limits,
            "analysis": settings["analysis"],
            "live_poll_s": settings["runs"]["live_poll_s"],
            "networks": networks(),
            "players": [o["spec"] for o in settings["opponents"]],  # named: /api/opponents
        }

    @app.get("/api/status")
    async def status() -> dict[str, Any]:
        """Searches running now, waiting for a slot, served so far, cancelled because their
        client left, and stopped at the time cap; quick work (no search) running and waiting
        (answered on the event loop: never queued)."""
        return {
            "searches": slots.busy,
            "queued": slots.queued,
            "slots": slots.total,
            "quick": quick.busy,
            "quick_queued": quick.queued,
            **counts,
        }


def _add_position_routes(
    app: FastAPI,
    settings: dict[str, Any],
    engines: Players,
    run_work: RunWork,
    position: PositionOf,
) -> None:
    """Positions described, moves played and positions analysed."""

    @app.post("/api/position")
    def position_route(q: PositionQuery) -> dict[str, Any]:
        """The position after the moves: pieces, legal moves (captures with every landing
        square and the pieces taken), the side to move and the result."""
        return describe(position(q))

    @app.post("/api/move")
    async def move(q: MoveQuery, request: Request) -> dict[str, Any]:
        """The player's move, with W/D/L, principal variation and top moves for networks."""
        spec, pos = await run_in_threadpool(
            lambda: (engines.parse(q.player or settings["default_opponent"]), position(q))
        )

        def work(stop: Stop) -> dict[str, Any]:
            answer = engines.move(pos, spec, stop)
            after = pos.copy()
            after.play(answer["move"])
            answer["position"] = describe(after)
            return answer

        return await run_work(request, work, spec.cheap)


def _add_pdn_routes(app: FastAPI, limits: dict[str, Any], position: PositionOf) -> None:
    """The ACF openings and PDN read and written."""
    deck = acf_deck()

    @app.get("/api/openings")
    def openings() -> list[dict[str, Any]]:
        """The ACF three-move ballots (156 tournament openings)."""
        return [{"name": o.name, "moves": list(o.moves), "fen": o.fen} for o in deck]

    @app.post("/api/pdn/parse")
    def pdn_parse(q: PdnText) -> list[dict[str, Any]]:
        """The first ``limits.max_pdn_games`` games of a PDN text (start FEN, moves, tags, and
        the warnings of a tolerated move); 400 names a bad game and move, 422 a cap passed."""
        if len(q.pdn) > limits["max_pdn_chars"]:
            raise LimitError(
                f"PDN text of {len(q.pdn)} characters; at most {limits['max_pdn_chars']} "
                "(limits.max_pdn_chars)"
            )
        games = iter_pdn(q.pdn, max_moves=int(limits["max_pdn_moves"]))
        try:
            read = list(islice(games, int(limits["max_pdn_games"])))
        except PdnTooLong as e:
            raise LimitError(f"{e} (limits.max_pdn_moves)") from None
        return [
            {
                "tags": g.tags,
                "fen": g.start().fen(),
                "moves": g.moves,
                "result": g.result,
                "warnings": g.warnings,
            }
            for g in read
        ]

    @app.post("/api/pdn/write", response_class=PlainTextResponse)
    def pdn_write(q: PdnGameIn) -> str:
        """A game as strict PDN: the moves are checked, and a result other than 1-0, 0-1,
        1/2-1/2 or *, a tag name other than letters, digits and _, or a tag value with a
        newline is refused (400), so no field can add movetext."""
        start = Position.from_fen(q.fen) if q.fen else Position()
        position(q)  # every move must be legal
        return write_pdn([game_from_position(start, q.moves, q.result, q.tags)])


def _add_run_routes(app: FastAPI, settings: dict[str, Any], roots: Roots) -> None:
    """The runs in the runs folder: status, metrics, Elo, games and the live game."""
    limits = settings["limits"]
    within_s, max_bytes = (
        settings["runs"]["running_within_s"],
        int(settings["runs"]["max_file_bytes"]),
    )

    @app.get("/api/runs")
    def runs() -> list[dict[str, Any]]:
        """Every run in the runs folder with its status, newest first."""
        return run_files.list_runs(roots, within_s, max_bytes)

    @app.get("/api/runs/{run}")
    def run(run: str) -> dict[str, Any]:
        """One run: status, the Elo curve with intervals, the ratings table, its PDN files."""
        path = roots.run(run)
        return {
            **run_files.run_status(path, roots, within_s, max_bytes),
            "elo": run_files.elo_curve(path, max_bytes),
            "ratings": run_files.ratings(path, max_bytes),
            "games": run_files.game_files(path),
        }

    @app.get("/api/runs/{run}/metrics")
    def metrics(
        run: str,
        keys: Annotated[list[str] | None, Query(description="metric keys; all if none")] = None,
    ) -> dict[str, list[list[float]]]:
        """Metric series as [step, time_s, value] rows."""
        return run_files.metrics(roots.run(run), max_bytes, keys)

    @app.get("/api/runs/{run}/games/{file:path}")
    def games(
        run: str, file: str, format: Annotated[str, Query(pattern="^(pdn|json)$")] = "pdn"
    ) -> Any:
        """A PDN file of the run (``games/...`` or ``eval/...``), as text or parsed."""
        if not file.endswith(".pdn") or file.split("/")[0] not in GAME_FOLDERS:
            raise PathRefused(f"file {file!r}: only games/*.pdn and eval/*.pdn are served")
        path = roots.run_file(run, file)
        if format == "json":
            return run_files.games_json(path, int(limits["max_pdn_games"]), max_bytes)
        return PlainTextResponse(run_files.pdn_text(path, max_bytes))

    @app.get("/api/runs/{run}/live")
    def live(run: str) -> dict[str, Any]:
        """The game a self-play actor of the run is playing now (from its games/live.json):
        start FEN, moves, opening, weights version, actor and age in seconds; 404 when the run
        has none or its newest move is older than runs.live_within_s."""
        return run_files.live_game(roots, run, float(settings["runs"]["live_within_s"]))


__all__ = ["create_app", "describe", "host_name"]
