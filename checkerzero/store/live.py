"""The live game: one game each self-play actor is playing right now, for people to watch.

Slot 0 of every actor reports its game after each move; the actor writes it to Redis with an
expiry, so a dead actor's game disappears. The learner copies one of them (the lowest actor id,
so a watcher stays on one game) into the run folder as ``games/live.json``, written to a temp
file and renamed; the play server reads that file and never needs Redis.

==============================  ===========================================================
``<ns>:live:<actor_id>``        JSON (:func:`encode`): the game in progress of that actor,
                                expiring ``selfplay.live_game_ttl_s`` after its last move
==============================  ===========================================================

The key is named in ``checkerzero.store.keys``. The value and the file hold the same JSON object:
``actor`` and ``version`` (ints), ``opening`` (its name), ``fen`` (the start position, before the
opening's moves), ``moves`` (standard notation, the opening's moves first), ``opening_plies`` (how
many of ``moves`` are the opening's) and ``updated`` (the Unix time of the newest move). Nothing is
pickled.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from checkerzero.run_files import LIVE_FILE
from checkerzero.store.keys import live_key, live_pattern
from game.files import read_regular_file

MAX_LIVE_BYTES = 64 * 1024  # a live game larger than this is refused (max_plies bounds it anyway)


def make_live(
    *,
    actor: int,
    version: int,
    opening: str,
    fen: str,
    moves: list[str],
    opening_plies: int,
    updated: float,
) -> dict[str, Any]:
    return {
        "actor": int(actor),
        "version": int(version),
        "opening": str(opening),
        "fen": str(fen),
        "moves": [str(m) for m in moves],
        "opening_plies": int(opening_plies),
        "updated": float(updated),
    }


def encode(live: dict[str, Any]) -> bytes:
    return json.dumps(live, separators=(",", ":")).encode()


def decode(data: bytes | str, source: str) -> dict[str, Any]:
    """A live game checked field by field (ValueError naming ``source`` and what is wrong)."""
    if len(data) > MAX_LIVE_BYTES:
        raise ValueError(f"{source}: {len(data)} bytes, more than {MAX_LIVE_BYTES}")
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{source}: not JSON ({e})") from None
    except RecursionError:
        raise ValueError(f"{source}: JSON nested too deeply for a live game") from None
    if not isinstance(value, dict):
        raise ValueError(f"{source}: not a JSON object")
    kinds = {
        "actor": int,
        "version": int,
        "opening": str,
        "fen": str,
        "moves": list,
        "opening_plies": int,
        "updated": (int, float),
    }
    for name, kind in kinds.items():
        if name not in value:
            raise ValueError(f"{source}: no {name!r}")
        if not isinstance(value[name], kind) or isinstance(value[name], bool):
            raise ValueError(f"{source}: {name!r} has the wrong type")
    if not all(isinstance(m, str) for m in value["moves"]):
        raise ValueError(f"{source}: 'moves' must be strings")
    if not 0 <= value["opening_plies"] <= len(value["moves"]):
        raise ValueError(f"{source}: 'opening_plies' out of range")
    if not math.isfinite(value["updated"]):
        raise ValueError(f"{source}: 'updated' is not finite")
    return make_live(**{name: value[name] for name in kinds})


def publish(client: Any, namespace: str, live: dict[str, Any], ttl_s: float) -> None:
    """Writes an actor's live game, expiring ``ttl_s`` seconds from now."""
    client.set(live_key(namespace, live["actor"]), encode(live), px=max(1, int(ttl_s * 1000)))


def read_live(client: Any, namespace: str) -> dict[str, Any] | None:
    """The live game of the lowest actor id with a valid one; None when there is none (a
    malformed value is skipped)."""
    keys = sorted(client.scan_iter(match=live_pattern(namespace), count=1000))
    if not keys:
        return None
    games = []
    for key, raw in zip(keys, client.mget(keys), strict=True):
        if raw is None:
            continue  # expired between SCAN and MGET
        with contextlib.suppress(ValueError):
            games.append(decode(raw, f"Redis key {key!r}"))
    return min(games, key=lambda g: g["actor"]) if games else None


def write_live_file(run_dir: Path, live: dict[str, Any]) -> Path:
    """``<run_dir>/games/live.json``, replaced atomically (a temp file renamed over it)."""
    path = Path(run_dir) / LIVE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".live-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(encode(live))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def copy_live(client: Any, namespace: str, run_dir: Path) -> dict[str, Any] | None:
    """Copies the live game from Redis into the run folder; returns it (None: none to copy,
    the file is left as it is)."""
    live = read_live(client, namespace)
    if live is not None:
        write_live_file(run_dir, live)
    return live


def read_live_file(path: Path) -> dict[str, Any]:
    """A ``live.json`` checked as :func:`decode` does (ValueError naming the file)."""
    return decode(read_regular_file(path, MAX_LIVE_BYTES, "live game"), str(path))
