"""Labelled positions on disk: one folder per generation of sharded Parquet files.

``<data_dir>/gen-<g>/part-<first>-<end>.parquet`` holds the stream's list items ``first`` to
``end - 1`` (each a game's new positions) in the columns of ``POSITION_DTYPE``, compressed with
zstd: 8.3 bytes a position measured on a shard of 1,500 8x8 games, against 24 in Redis
(``bytes_per_position`` measures a folder). ``gen-<g>/source.json`` names the evaluation file
that played them and the seed, so a folder of another lineage is refused instead of mixed in;
``gen-<g>/selfplay.json`` adds up the seconds of self-play of every sitting that played them.
Later runs and generations read the folders again; a cluster can read them with Ray Data
(``ray.data.read_parquet``).

Exactly once: a shard is written under a temporary name and renamed, then the items are trimmed
from Redis in one transaction with the ``drained`` counter. A learner killed between the two
finds, at start (``recover``), shards of its store (the ``store_id`` in their metadata) that
end past ``drained``, and trims those items then; so no position is lost or stored twice.

Reading streams row groups (``iter_rows``): memory stays at one row group per reader, however
many tens of millions of positions the folders hold.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from checkerzero.store.positions import POSITION_DTYPE, PositionStream, decode_item

logger = logging.getLogger(__name__)

SOURCE_FILE = "source.json"
SELFPLAY_FILE = "selfplay.json"
_PART = re.compile(r"part-(\d{10})-(\d{10})\.parquet$")
SCHEMA = pa.schema(
    [(name, pa.from_numpy_dtype(POSITION_DTYPE[name])) for name in POSITION_DTYPE.names]
)


class ShardError(ValueError):
    """A data folder or shard that cannot be used (the message names it)."""


def generation_dir(data_dir: Path | str, generation: int) -> Path:
    return Path(data_dir) / f"gen-{generation:03d}"


def claim_folder(folder: Path, source: dict[str, Any]) -> None:
    """Creates ``folder`` for ``source`` (parent evaluation's sha256, seed, settings), or checks
    that the one there was made for the same; ShardError naming it otherwise."""
    path = folder / SOURCE_FILE
    if path.is_file():
        try:
            have = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ShardError(f"{path}: unreadable ({e})") from None
        keys = ("parent_sha256", "seed", "generation")
        if any(have.get(k) != source.get(k) for k in keys):
            raise ShardError(
                f"{path}: positions of another lineage ({ {k: have.get(k) for k in keys} }, "
                f"this run needs { {k: source.get(k) for k in keys} }): move the folder away"
            )
        return
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(source, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def _selfplay(folder: Path | str) -> dict[str, Any]:
    path = Path(folder) / SELFPLAY_FILE
    if not path.is_file():
        return {"seconds": 0.0, "sittings": 0}
    try:
        have = json.loads(path.read_text())
        return {"seconds": float(have["seconds"]), "sittings": int(have["sittings"])}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ShardError(f"{path}: unreadable ({e})") from None


def selfplay_seconds(folder: Path | str) -> float:
    """The seconds of self-play the folder's positions took, over every sitting (0 if none)."""
    return _selfplay(folder)["seconds"]


def add_selfplay_seconds(folder: Path, seconds: float) -> float:
    """Adds one sitting's self-play to the folder's total (so a generation played over several
    sittings, or regenerated on another machine, reports all of its time); returns the total."""
    have = _selfplay(folder)
    total = {"seconds": round(have["seconds"] + seconds, 1), "sittings": have["sittings"] + 1}
    path = folder / SELFPLAY_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(total) + "\n")
    tmp.replace(path)
    return total["seconds"]


def shard_files(folder: Path | str) -> list[Path]:
    """The folder's shards in stream order."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if _PART.search(p.name))


def _span(path: Path) -> tuple[int, int]:
    m = _PART.search(path.name)
    assert m is not None
    return int(m.group(1)), int(m.group(2))


def write_shard(
    folder: Path,
    rows: np.ndarray,
    first: int,
    end: int,
    store_id: str,
    row_group: int = 65_536,
) -> Path:
    table = pa.table({n: rows[n] for n in POSITION_DTYPE.names}, schema=SCHEMA)
    table = table.replace_schema_metadata({"store_id": store_id})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"part-{first:010d}-{end:010d}.parquet"
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd", row_group_size=row_group)
    tmp.replace(path)
    return path


def recover(stream: PositionStream, folder: Path) -> int:
    """Trims items this store already wrote to ``folder`` (a learner killed between writing a
    shard and trimming); returns how many."""
    state = stream.state()
    end = state.drained
    for path in shard_files(folder):
        meta = pq.read_schema(path).metadata or {}
        if meta.get(b"store_id", b"").decode() == state.store_id:
            end = max(end, _span(path)[1])
    extra = end - state.drained
    if extra > 0:
        logger.info("%d position items were on disk before a restart: trimmed now", extra)
        stream.trim(extra)
    return extra


def drain(stream: PositionStream, folder: Path, most_items: int, row_group: int = 65_536) -> int:
    """Moves up to ``most_items`` items from Redis into one shard; returns the positions moved.
    A malformed item is skipped with a warning naming its place in the stream."""
    items = stream.pending(most_items)
    if not items:
        return 0
    state = stream.state()
    parts = []
    for i, item in enumerate(items):
        try:
            parts.append(decode_item(item, f"position item {state.drained + i}"))
        except ValueError as e:
            logger.warning("skipped %s", e)
    rows = np.concatenate(parts) if parts else np.zeros(0, POSITION_DTYPE)
    if len(rows):
        write_shard(
            folder, rows, state.drained, state.drained + len(items), state.store_id, row_group
        )
    stream.trim(len(items))
    return len(rows)


def iter_rows(paths: Sequence[Path], batch_rows: int = 65_536) -> Iterator[np.ndarray]:
    """The shards' rows as ``POSITION_DTYPE`` arrays of at most ``batch_rows``, streamed."""
    for path in paths:
        try:
            f = pq.ParquetFile(path)
        except (OSError, pa.ArrowInvalid) as e:
            raise ShardError(f"{path}: not a readable Parquet shard ({e})") from None
        missing = set(POSITION_DTYPE.names) - set(f.schema_arrow.names)
        if missing:
            raise ShardError(f"{path}: columns {sorted(missing)} missing")
        for batch in f.iter_batches(batch_size=batch_rows, columns=list(POSITION_DTYPE.names)):
            out = np.empty(batch.num_rows, POSITION_DTYPE)
            for name in POSITION_DTYPE.names:
                out[name] = batch.column(name).to_numpy(zero_copy_only=False)
            yield out


def count_rows(paths: Sequence[Path]) -> int:
    return sum(pq.ParquetFile(p).metadata.num_rows for p in paths)


def bytes_per_position(paths: Sequence[Path]) -> float:
    rows = count_rows(paths)
    return sum(p.stat().st_size for p in paths) / rows if rows else 0.0
