"""``python -m play``: serve the board, the analysis and the training view.

Open the address it prints in a browser: play the computer, analyse positions and games (the
alpha-beta with the learned evaluation by default, the network on request), open and save PDN,
and watch the runs in the runs folder. Every key of conf/play/default.yaml can be changed with
--set; the server reads its folders and never writes a file.

examples:
  python -m play                       # http://127.0.0.1:8000, the shipped network, runs/
  python -m play --port 8080 --runs runs --models game/data
  python -m play --player RUN/checkpoints/latest.safetensors:sims=200  # play a run's network
"""

from __future__ import annotations

import argparse
import logging
import math
from typing import Any

import uvicorn
import yaml

from play.app import create_app
from play.connections import make_protocol, release_memory
from play.paths import Roots
from play.settings import load_settings, models_dir


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """The description as written (its examples), and each option's default."""


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["limits.max_ms=500", ...]`` as nested dicts; values read as YAML scalars."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set {item!r}: use KEY=VALUE")
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"--set {key}: {part} was set to a value, not a group")
        try:
            node[leaf] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            problem = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ValueError(f"--set {key}: the value is not a YAML scalar ({problem})") from None
    return out


def main(argv: list[str] | None = None) -> None:
    settings = load_settings()
    parser = argparse.ArgumentParser(
        prog="python -m play",
        description=__doc__.replace("``", ""),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--host", default=settings["host"], help="address to bind (loopback)")
    parser.add_argument("--port", type=int, default=settings["port"], help="TCP port")
    parser.add_argument("--runs", default=settings["runs_dir"], help="the runs folder it reads")
    parser.add_argument("--models", default=settings["models_dir"], help="the networks folder")
    parser.add_argument(
        "--player", default=settings["default_opponent"], help="the opponent a new game offers"
    )
    parser.add_argument(
        "--network",
        default=settings["default_player"],
        help="the network of the network engine (a checkpoint relative to --models or --runs)",
    )
    parser.add_argument("--log-level", default="info", help="uvicorn's log level")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key of conf/play/default.yaml, e.g. --set limits.max_simulations=800",
    )
    args = parser.parse_args(argv)

    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings(
            {
                "default_opponent": args.player,
                "default_player": args.network,
                **parse_overrides(args.set),
                "host": args.host,  # the Host header check accepts the address bound
                "port": args.port,
            }
        )
    except ValueError as e:
        parser.error(str(e))
    roots = Roots(args.runs, models_dir(args.models))
    app = create_app(settings, roots)
    print(
        f"checkerzero play on http://{args.host}:{args.port}/ (API docs at /docs); "
        f"networks from {roots.models}, runs from {roots.runs}",
        flush=True,
    )
    serve(app, settings, args.log_level)


def serve(app: Any, settings: dict[str, Any], log_level: str) -> None:
    """Serves ``app`` with uvicorn within the connection bounds of ``settings`` (play.connections)
    until SIGTERM or Ctrl-C; work still running ``limits.shutdown_s`` later is cancelled."""
    limits = settings["limits"]
    config = uvicorn.Config(
        app,
        host=settings["host"],
        port=settings["port"],
        log_level=log_level,
        http=make_protocol(limits, on_large_close=release_memory),
        timeout_keep_alive=math.ceil(float(limits["keep_alive_s"])),
        h11_max_incomplete_event_size=int(limits["max_header_bytes"]),
        timeout_graceful_shutdown=math.ceil(float(limits["shutdown_s"])),
    )
    uvicorn.Server(config).run()  # SIGTERM ends it (uvicorn re-raises the signal)


if __name__ == "__main__":
    main()
