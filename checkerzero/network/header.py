"""A network file's model shape, read from its header alone: no torch, no tensor bytes.

The config check (``checkerzero.config``) compares ``learner.init_weights`` with the run's model
keys before anything starts; loading the file (``checkpoint.load_checkpoint``) would import torch
and read up to a gigabyte to learn what the first few kilobytes say. The full load still
verifies the checksum and every tensor when the run starts.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from game.files import open_regular
from game.json_header import parse_object

ANY_SIZE = 1 << 50  # the file's size is the loader's to cap; the header has its own cap

HEADER_LENGTH_BYTES = 8  # safetensors: little-endian u64 length, then the JSON header
# A model file's header lists ~60 tensors in a few KB; a megabyte is far beyond any of ours, and
# reading no more bounds what a crafted length field can cost.
MAX_MODEL_HEADER_BYTES = 1 << 20
METADATA_KEY = "checkerzero"  # as checkpoint.METADATA_KEY (that module imports torch)
KIND_MODEL = "model"  # as checkpoint.KIND_MODEL
SHAPE_KEYS = (  # the model keys that decide the tensors' shapes (the moves-left head may differ)
    "board_size",
    "in_planes",
    "blocks",
    "channels",
    "policy_channels",
    "value_channels",
    "value_hidden",
)


def read_model_shape(path: str | Path) -> dict[str, Any]:
    """The model config a network file's header holds; ValueError saying why it has none."""
    path = Path(path)
    # A regular file only (a FIFO would block the open, a device stream); only the header is read.
    with open_regular(path, ANY_SIZE, "network file") as f:
        head = f.read(HEADER_LENGTH_BYTES)
        if len(head) < HEADER_LENGTH_BYTES:
            raise ValueError(f"{len(head)} bytes is too short for a network file")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_MODEL_HEADER_BYTES:
            raise ValueError(f"its header claims {length} bytes: not a network file")
        raw = f.read(length)
    if len(raw) < length:
        raise ValueError("truncated inside its header")
    outer = parse_object(raw, "its header")
    try:
        inner = outer["__metadata__"][METADATA_KEY]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a checkerzero network file ({type(exc).__name__})") from None
    if not isinstance(inner, str):
        raise ValueError("not a checkerzero network file (its metadata is not a string)")
    header = parse_object(inner, f"its '{METADATA_KEY}' metadata")
    if not isinstance(header, dict) or header.get("kind") != KIND_MODEL:
        kind = header.get("kind") if isinstance(header, dict) else None
        raise ValueError(f"holds a {kind!r}, not a network ({KIND_MODEL!r})")
    config = header.get("model_config")
    if not isinstance(config, dict) or any(key not in config for key in SHAPE_KEYS):
        raise ValueError("its header has no complete model_config")
    return config


def shape_text(config: Any) -> str:
    """``4x16 (policy 32, value 8/128, 8x8 board, 15 planes)``: a network's shape in one phrase."""
    return (
        f"{config['blocks']}x{config['channels']} (policy {config['policy_channels']}, "
        f"value {config['value_channels']}/{config['value_hidden']}, "
        f"{config['board_size']}x{config['board_size']} board, {config['in_planes']} planes)"
    )
