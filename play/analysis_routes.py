"""The analysis routes of the play server: one-shot analysis of many positions, and deepening.

``POST /api/analyse`` takes ``"engine": "ab"`` (the default) or ``"network"``:

- ``ab``: the alpha-beta with the learned evaluation (``play.ab_analysis``), each position in
  turn for ``ms`` milliseconds (``analysis.ab_ms`` by default) and/or to ``depth`` plies. Each
  answer holds ``lines``: the best ``lines`` moves (``analysis.ab_lines`` by default), each
  ``{move, score_cp, line, depth}`` best first; ``move``, ``pv``, ``score_cp`` and ``score``
  (the mover's expected score) of the best one; and ``database``: ``{result, distance}`` when the
  position is in the endgame database.
- ``network``: the MCTS network's view (W/D/L, visits, prior and value per move), every
  position in one batched search with ``network`` (a spec; the default network if none) for
  ``sims`` simulations or ``ms`` milliseconds for the whole batch.

A request without ``engine`` that names a ``network`` or ``sims`` is the network's (as before
the alpha-beta was the default); one that names neither is ``analysis.engine``'s.

``POST /api/deepen``, ``GET`` and ``DELETE /api/deepen/{id}``: ``play.deepen``.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from game.position import Position
from play.ab_analysis import AbBudget, AbEngine
from play.analysis import Budget, Cancelled, Stop
from play.deepen import Deepenings, FlagStop
from play.players import LimitError, Players

MAX_ID_CHARS = 100  # query ids are echoed back
ENGINES = ("ab", "network")
FIRST_NETWORK_MS = 500  # the network's first deepening round; each next one takes twice as long


class PositionIn(BaseModel):
    fen: str | None = Field(None, max_length=200, description="start FEN; initial if none")
    moves: list[str] = Field(default_factory=list, description="moves played from the start")


class AnalysisQuery(PositionIn):
    id: str | int | None = Field(None, description="echoed back with the answer")


class AnalyseRequest(BaseModel):
    engine: Literal["ab", "network"] | None = Field(
        None, description="ab (alpha-beta + learned evaluation, the default) or network"
    )
    network: str | None = Field(None, description="network spec; the default network if none")
    sims: int | None = Field(
        None,
        description="network: simulations per position, 1 to limits.max_simulations (0 is refused)",
    )
    ms: int | None = Field(
        None, description="ab: milliseconds per position; network: for the whole batch"
    )
    depth: int | None = Field(None, description="ab: plies (with or without ms)")
    lines: int | None = Field(None, description="ab: how many best moves to report")
    positions: list[AnalysisQuery]


class DeepenRequest(PositionIn):
    engine: Literal["ab", "network"] = "ab"
    network: str | None = Field(None, description="network engine: the network spec")
    lines: int | None = Field(None, description="ab: how many best moves to report")


def engine_of(q: AnalyseRequest, default: str = "ab") -> str:
    """The request's engine: as named, else the network's when it names a network or sims,
    else ``default`` (``analysis.engine``)."""
    if q.engine is not None:
        return q.engine
    return "network" if (q.network or q.sims is not None) else default


def add_analysis_routes(
    app: FastAPI,
    settings: dict[str, Any],
    engines: Players,
    run_work: Any,
    position: Any,
) -> Deepenings:
    """The routes of the module docstring; ``run_work`` and ``position`` are play.app's."""
    limits = settings["limits"]
    cfg = settings["analysis"]
    ab = AbEngine(settings)
    deepenings = Deepenings(
        int(cfg["deepen_sessions"]),
        int(cfg["deepen_per_client"]),
        float(cfg["deepen_max_s"]),
        float(cfg["deepen_idle_s"]),
    )

    def lines_of(n: int | None) -> int | None:
        if n is not None and not 1 <= n <= 64:
            raise LimitError(f"lines must be 1..64, got {n}")
        return n

    def positions_of(q: AnalyseRequest) -> list[Position]:
        if len(q.positions) > limits["max_batch_positions"]:
            raise LimitError(
                f"{len(q.positions)} positions; at most {limits['max_batch_positions']}"
            )
        out = []
        for k, item in enumerate(q.positions):
            if isinstance(item.id, str) and len(item.id) > MAX_ID_CHARS:
                raise LimitError(f"position {k}: id longer than {MAX_ID_CHARS} characters")
            try:
                out.append(position(item))
            except ValueError as e:
                raise ValueError(f"position {k} (id {item.id!r}): {e}") from None
        return out

    def ab_request(q: AnalyseRequest) -> tuple[Any, list[Position]]:
        if q.sims is not None or q.network is not None:
            raise ValueError(
                "engine ab takes ms, depth and lines; sims and network are the network's"
            )
        try:
            budget = ab.budget(q.ms, q.depth)
        except ValueError as e:
            raise LimitError(str(e)) from None
        positions = positions_of(q)
        total_ms = len(positions) * budget.ms
        if total_ms > 1000 * float(limits["max_request_s"]):
            raise LimitError(
                f"{len(positions)} positions x {budget.ms} ms = {total_ms / 1000:g} s; at most "
                f"{limits['max_request_s']} s in one request (limits.max_request_s)"
            )
        lines_of(q.lines)
        return budget, positions

    @app.post("/api/analyse")
    async def analyse(q: AnalyseRequest, request: Request) -> dict[str, Any]:
        """Analysis of many positions by the alpha-beta (the default) or the network."""
        if engine_of(q, str(cfg["engine"])) == "ab":
            budget, positions = await run_in_threadpool(ab_request, q)

            def ab_work(stop: Stop) -> dict[str, Any]:
                results = []
                for item, pos in zip(q.positions, positions, strict=True):
                    r = ab.analyse(pos, budget, lines=q.lines, stop=stop)
                    if stop.reason == "cancelled":
                        raise Cancelled("the search was cancelled: its client has gone")
                    results.append({"id": item.id, **r.to_dict()})
                return {"engine": "ab", "results": results}

            return await run_work(request, ab_work, False)

        spec, budget, positions = await run_in_threadpool(network_request, q)

        def work(stop: Stop) -> dict[str, Any]:
            results = engines.analyse(positions, spec, budget, stop)
            return {
                "engine": "network",
                # the spec as searched: a request's sims or ms replace the spec's own budget
                "network": (engines.with_budget(spec, budget) if budget else spec).text,
                "results": [
                    {"id": item.id, "engine": "network", **r.to_dict()}
                    for item, r in zip(q.positions, results, strict=True)
                ],
            }

        cheap = spec.cheap if budget is None else budget.simulations == 1
        return await run_work(request, work, cheap)

    def network_request(q: AnalyseRequest) -> tuple[Any, Any, list[Position]]:
        if q.depth is not None or q.lines is not None:
            raise ValueError("engine network takes sims or ms; depth and lines are the ab's")
        spec = engines.parse(q.network or settings["default_player"])
        given = q.sims is not None or q.ms is not None  # 0 is refused, not the default
        budget = engines.budget(q.sims, q.ms) if given else None
        return spec, budget, positions_of(q)

    def client_of(request: Request) -> str:
        return request.client.host if request.client else ""

    @app.post("/api/deepen")
    def deepen(q: DeepenRequest, request: Request) -> dict[str, Any]:
        """Starts a deepening analysis of one position (it replaces this client's running
        one); poll it with GET /api/deepen/{id}, stop it with DELETE."""
        pos = position(q)
        if pos.is_over():
            raise ValueError(f"the game is over ({pos.result()}, {pos.end_reason})")
        if q.engine == "ab":
            if q.network is not None:
                raise ValueError("engine ab takes no network")
            # Deeper and deeper until stopped: the session's time cap is the only budget.
            budget = AbBudget(0, int(1000 * float(cfg["deepen_max_s"])), int(cfg["ab_slice_ms"]))
            lines = lines_of(q.lines)

            def ab_work(stop: Any, publish: Any) -> None:
                ab.analyse(
                    pos, budget, lines=lines, stop=stop, on_iteration=lambda a: publish(a.to_dict())
                )

            d = deepenings.start(client_of(request), "ab", ab_work)
        else:
            if q.lines is not None:
                raise ValueError("engine network takes no lines")
            spec = engines.parse(q.network or settings["default_player"])
            if not spec.searches:
                raise ValueError(f"player {spec.text!r} does not analyse; name a network")
            chunk = int(settings["time_chunk_simulations"])

            def network_work(stop: Any, publish: Any) -> None:
                ms = FIRST_NETWORK_MS
                flag = FlagStop(stop)
                while not flag():
                    r = engines.analyse([pos], spec, Budget(ms=ms, chunk=chunk), flag)[0]
                    publish({"engine": "network", "network": spec.text, "ms": ms, **r.to_dict()})
                    ms *= 2

            d = deepenings.start(client_of(request), "network", network_work)
        return d.view(deepenings.clock())

    @app.get("/api/deepen/{ident}")
    def deepen_poll(ident: str, request: Request) -> Any:
        """What the deepening has found so far: ``analysis`` (an ab or network answer, None
        before its first result), ``running``, and why it ``stopped``."""
        try:
            d = deepenings.get(ident, client_of(request))
        except KeyError as e:
            return JSONResponse({"detail": str(e.args[0])}, status_code=404)
        return d.view(deepenings.clock())

    @app.delete("/api/deepen/{ident}")
    def deepen_stop(ident: str, request: Request) -> Any:
        """Stops the deepening; answers with what it found."""
        try:
            d = deepenings.stop(ident, client_of(request))
        except KeyError as e:
            return JSONResponse({"detail": str(e.args[0])}, status_code=404)
        return d.view(deepenings.clock())

    return deepenings


__all__ = ["AnalyseRequest", "DeepenRequest", "add_analysis_routes", "engine_of"]
