"""The network file format: model checkpoints as safetensors files; nothing is ever unpickled.

A *model checkpoint* (``save_checkpoint``/``load_checkpoint``) is a plain safetensors file
(``8-byte header length | JSON header | tensor bytes``): the network weights, float32, plus a
JSON document under the ``checkerzero`` key of the safetensors metadata holding the model
config, the training step, the published weights version, free-form ``extra`` and a
``schema_version``. The same bytes are what the learner publishes to actors
(``encode_checkpoint`` / ``decode_checkpoint``), so one format serves disk and wire.

The learner's *training state* (``learner.training_state``) is a file of the same format with
another ``kind``; it uses this module's low-level functions (``encode_tensors``,
``decode_tensors``, ``write_atomic``, ``read_capped``, ...), which are public for that reason.

Schema versions: 2 is written; 1 (every file before the moves-left head and the weights
average existed) is still read, and means neither. Version 2 adds, both optional: a
``moves_left_head: true`` in the header's model config when the network has that head (its
tensors are named ``moves_left_head.*``; without the head the header has no such key), and in a
training state the moving average of the weights as tensors ``ema/<name>`` with an ``ema``
header entry (``updates``, ``decay``).

Integrity: the header stores a SHA-256 over every tensor's name, dtype, shape and bytes, so a
truncated, bit-flipped or foreign file raises ``ValueError`` naming the path and the problem rather
than loading silently wrong weights. Writes go to a temporary file in the same directory, are
fsynced and then renamed over the target, so a crash mid-write leaves the previous file intact.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import struct
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as safetensors_load  # plain tensors, never pickle
from safetensors.torch import save as safetensors_save
from torch import nn

from checkerzero.network.model import CheckersNet, ModelConfig
from game.files import read_regular_file
from game.json_header import parse_object
from game.notation import BOARD_SIZES

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # bump when the header layout or tensor naming changes
READABLE_SCHEMA_VERSIONS = (1, 2)  # 1: no moves-left head and no weights average possible
METADATA_KEY = "checkerzero"  # safetensors metadata key holding our JSON header
KIND_MODEL = "model"
KIND_TRAINING_STATE = "training_state"
HEADER_LENGTH_BYTES = 8  # safetensors: little-endian u64 header length, then the JSON header
MAX_HEADER_BYTES = 100 * 1024 * 1024  # safetensors' own limit; larger means a foreign/corrupt file
# Largest file or weights blob read, unless the caller passes its own cap (the run passes
# learner.max_checkpoint_mb): about 40x a training state of the large model (10x128, ~3 M
# parameters), so a damaged length or a foreign file is refused before it is read whole.
MAX_CHECKPOINT_BYTES = 1024 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class CheckpointMeta:
    """Header of a model checkpoint."""

    config: ModelConfig
    step: int
    version: int
    schema_version: int
    extra: Mapping[str, Any]


# ---------------------------------------------------------------------------------------------
# Low-level file format (shared with learner.training_state)


def _tensor_digest(tensors: Mapping[str, torch.Tensor]) -> str:
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name]
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _cpu_tensors(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # contiguous() first so channels_last weights are stored in standard layout; clone() so no two
    # entries share storage (safetensors refuses shared tensors).
    return {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}


def encode_tensors(tensors: Mapping[str, torch.Tensor], header: dict[str, Any]) -> bytes:
    tensors = _cpu_tensors(tensors)
    bad = non_finite_tensors(tensors)
    if bad:  # what _decode would refuse is never written
        raise ValueError(f"tensor {bad[0]!r} holds NaN or infinite values; not saved")
    header = {**header, "sha256": _tensor_digest(tensors)}
    metadata = {METADATA_KEY: json.dumps(header, sort_keys=True)}
    return safetensors_save(tensors, metadata=metadata)


def read_header(
    data: bytes, source: str, max_bytes: int = MAX_CHECKPOINT_BYTES
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The safetensors header of ``data`` (tensor names, dtypes, shapes, offsets), the
    checkerzero header inside it and the header's length, checked; no tensor is read."""
    if len(data) > max_bytes:
        raise ValueError(f"{source}: {len(data)} bytes is over the {max_bytes}-byte checkpoint cap")
    if len(data) < HEADER_LENGTH_BYTES:
        raise ValueError(f"{source}: {len(data)} bytes is too short for a safetensors file")
    (header_len,) = struct.unpack("<Q", data[:HEADER_LENGTH_BYTES])
    if header_len > MAX_HEADER_BYTES:
        raise ValueError(
            f"{source}: header length {header_len} is implausible; not a safetensors file"
        )
    if HEADER_LENGTH_BYTES + header_len > len(data):
        raise ValueError(
            f"{source}: truncated: header needs {header_len} bytes, "
            f"file has {len(data) - HEADER_LENGTH_BYTES} after the length field"
        )
    raw_header = parse_object(
        data[HEADER_LENGTH_BYTES : HEADER_LENGTH_BYTES + header_len],
        f"{source}: safetensors header",
    )
    metadata = raw_header.get("__metadata__") or {}
    if not isinstance(metadata, dict) or METADATA_KEY not in metadata:
        raise ValueError(f"{source}: not a checkerzero file (no '{METADATA_KEY}' metadata)")
    if not isinstance(metadata[METADATA_KEY], str):
        raise ValueError(f"{source}: '{METADATA_KEY}' metadata is not a string")
    header = parse_object(metadata[METADATA_KEY], f"{source}: '{METADATA_KEY}' metadata")
    schema = header.get("schema_version")
    if isinstance(schema, bool) or schema not in READABLE_SCHEMA_VERSIONS:
        raise ValueError(
            f"{source}: schema_version {schema!r}, this code reads "
            + " and ".join(map(str, READABLE_SCHEMA_VERSIONS))
        )
    config = header.get("model_config")
    v2_only = "ema" in header or (isinstance(config, dict) and "moves_left_head" in config)
    if schema == 1 and v2_only:
        raise ValueError(f"{source}: a schema 1 file cannot hold a moves-left head or an EMA")
    return raw_header, header, header_len


def decode_tensors(
    data: bytes, source: str, max_bytes: int = MAX_CHECKPOINT_BYTES
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Parse and verify; ``source`` names the file (or stream) in error messages.

    Besides the format and the checksum, every floating-point tensor must be finite: a network
    (or optimizer state) holding NaN or infinity is refused by name, never loaded.
    """
    raw_header, header, header_len = read_header(data, source, max_bytes)
    body = len(data) - HEADER_LENGTH_BYTES - header_len
    ends = [
        entry["data_offsets"][1]
        for name, entry in raw_header.items()
        if name != "__metadata__"
        and isinstance(entry, dict)
        and isinstance(entry.get("data_offsets"), list)
        and len(entry["data_offsets"]) == 2
        and isinstance(entry["data_offsets"][1], int)
    ]
    if ends and max(ends) > body:
        raise ValueError(
            f"{source}: truncated: the tensors need {max(ends)} bytes after the header, "
            f"the file has {body}"
        )
    try:
        tensors = safetensors_load(data)
    except Exception as exc:  # SafetensorError is not exported under a stable name
        raise ValueError(f"{source}: corrupt safetensors body ({exc})") from exc
    if _tensor_digest(tensors) != header.get("sha256"):
        raise ValueError(f"{source}: tensor checksum mismatch; the file is corrupt")
    bad = non_finite_tensors(tensors)
    if bad:
        raise ValueError(
            f"{source}: tensor {bad[0]!r} holds NaN or infinite values"
            + (f" (and {len(bad) - 1} more tensors)" if len(bad) > 1 else "")
            + "; refusing to load it"
        )
    return tensors, header


def non_finite_tensors(tensors: Mapping[str, torch.Tensor]) -> list[str]:
    """Names of the floating-point tensors of ``tensors`` holding a NaN or an infinity, sorted."""
    flags = {
        name: torch.isfinite(t).all()
        for name, t in tensors.items()
        if t.is_floating_point() and t.numel()
    }
    if not flags:
        return []
    finite = torch.stack(list(flags.values())).cpu().tolist()  # one device sync
    return sorted(name for name, ok in zip(flags, finite, strict=True) if not ok)


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_capped(path: Path, max_bytes: int = MAX_CHECKPOINT_BYTES) -> bytes:
    """The file's bytes; its size is checked against ``max_bytes`` before it is read."""
    return read_regular_file(path, max_bytes, "checkpoint")  # no FIFO, device or folder


def expect_kind(header: Mapping[str, Any], kind: str, source: str) -> None:
    if header.get("kind") != kind:
        raise ValueError(f"{source}: holds a {header.get('kind')!r}, expected a {kind!r}")


def int_field(header: Mapping[str, Any], key: str, source: str, default: int = 0) -> int:
    value = header.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{source}: header's {key!r} is {value!r}, not an integer")
    return value


def config_from_header(header: Mapping[str, Any], source: str) -> ModelConfig:
    try:
        return ModelConfig.from_dict(header["model_config"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{source}: bad model_config in header ({exc})") from exc


def _check_shapes(
    expected: Mapping[str, torch.Tensor], weights: Mapping[str, torch.Tensor], source: str
) -> None:
    """Every tensor of ``expected`` (a state dict, possibly on the meta device) is in
    ``weights`` with its shape and dtype, and nothing else is."""
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"{source}: weights do not fit the model: missing {missing[:5]}"
            f"{' ...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}"
            f"{' ...' if len(unexpected) > 5 else ''}"
        )
    for name, want in expected.items():
        got = weights[name]
        if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
            raise ValueError(
                f"{source}: tensor {name!r} is {got.dtype} {tuple(got.shape)}, the header's "
                f"model needs {want.dtype} {tuple(want.shape)}"
            )


def _expected_state(
    config: ModelConfig, tensors: Mapping[str, Any], source: str
) -> dict[str, torch.Tensor]:
    """The state dict (shapes only, on the meta device) of the network ``config`` describes,
    checked against ``tensors`` (the file's tensors, or its header's entries) by count first.

    Nothing is allocated and no module is built per block: the network is built with at most
    one block and the block's tensors repeated by name, after the count the header's model
    needs (known from that one block) matched the file's, so a header claiming thousands of
    blocks or channels is refused at once."""
    if config.board_size not in BOARD_SIZES:
        raise ValueError(
            f"{source}: header's board_size {config.board_size} is not one of {BOARD_SIZES}"
        )
    try:
        with torch.device("meta"):
            state = CheckersNet(dataclasses.replace(config, blocks=min(config.blocks, 1)))
            state = state.state_dict()
    except (RuntimeError, OverflowError) as exc:  # sizes past what torch can even describe
        raise ValueError(f"{source}: header's model {config} cannot be built ({exc})") from exc
    first = "tower.0."
    block = {k[len(first) :]: v for k, v in state.items() if k.startswith(first)}
    rest = {k: v for k, v in state.items() if not k.startswith(first)}
    count = len(rest) + config.blocks * len(block)
    if count != len(tensors):
        raise ValueError(
            f"{source}: header's model ({config.blocks} residual blocks) has {count} tensors, "
            f"the file holds {len(tensors)}"
        )
    for b in range(config.blocks):
        rest.update({f"tower.{b}.{name}": t for name, t in block.items()})
    return rest


def _check_header_fits(config: ModelConfig, raw_header: Mapping[str, Any], source: str) -> None:
    """The file's tensor names and shapes, as its safetensors header declares them, are those
    of the header's model: checked before any tensor is read or any model built."""
    entries = {k: v for k, v in raw_header.items() if k != "__metadata__"}
    expected = _expected_state(config, entries, source)
    for name, want in expected.items():
        entry = entries.get(name)
        if not isinstance(entry, dict):
            raise ValueError(f"{source}: the file has no tensor {name!r} the header's model needs")
        if entry.get("shape") != list(want.shape):
            raise ValueError(
                f"{source}: tensor {name!r} is declared {entry.get('shape')!r}, the header's "
                f"model needs {list(want.shape)}"
            )


def load_weights(model: nn.Module, weights: Mapping[str, torch.Tensor], source: str) -> None:
    _check_shapes(model.state_dict(), weights, source)  # nothing copied unless all fit
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as exc:
        raise ValueError(f"{source}: weights do not fit the model ({exc})") from exc


# ---------------------------------------------------------------------------------------------
# Model checkpoints


def encode_checkpoint(
    model: CheckersNet, *, step: int, version: int, extra: Mapping[str, Any] | None = None
) -> bytes:
    """Weights and header as safetensors bytes (what ``save_checkpoint`` writes)."""
    header = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND_MODEL,
        "model_config": model.config.to_dict(),
        "step": int(step),
        "version": int(version),
        "extra": dict(extra or {}),
    }
    try:
        return encode_tensors(model.state_dict(), header)
    except TypeError as exc:
        raise ValueError(f"checkpoint extra must be JSON-serialisable ({exc})") from exc


def decode_checkpoint(
    data: bytes,
    device: str | torch.device = "cpu",
    *,
    source: str = "<bytes>",
    max_bytes: int = MAX_CHECKPOINT_BYTES,
) -> tuple[CheckersNet, CheckpointMeta]:
    """Inverse of ``encode_checkpoint``: a new model in eval mode on ``device`` and its header.

    The header's model is checked against the tensors the file's header declares (count,
    names, shapes) before a tensor is read, and against the tensors read (dtypes too) before
    the network is built, so a header that names another network than the file holds is
    refused at once and allocates nothing; more than ``max_bytes`` is refused unread.
    """
    raw_header, header, _ = read_header(data, source, max_bytes)
    expect_kind(header, KIND_MODEL, source)
    config = config_from_header(header, source)
    _check_header_fits(config, raw_header, source)  # before any tensor is read
    tensors, header = decode_tensors(data, source, max_bytes)
    _check_shapes(_expected_state(config, tensors, source), tensors, source)
    model = CheckersNet(config)
    load_weights(model, tensors, source)
    model.to(device).eval()
    extra = header.get("extra", {})
    if not isinstance(extra, dict):
        raise ValueError(f"{source}: header's 'extra' is {extra!r}, not a JSON object")
    meta = CheckpointMeta(
        config=config,
        step=int_field(header, "step", source),
        version=int_field(header, "version", source),
        schema_version=int(header["schema_version"]),
        extra=extra,
    )
    return model, meta


def save_checkpoint(
    path: str | os.PathLike[str],
    model: CheckersNet,
    *,
    step: int,
    version: int,
    extra: dict[str, Any] | None = None,
) -> None:
    """Write ``model``'s weights and header to ``path`` atomically."""
    path = Path(path)
    write_atomic(path, encode_checkpoint(model, step=step, version=version, extra=extra))
    logger.debug("saved checkpoint %s (step %d, version %d)", path, step, version)


def load_checkpoint(
    path: str | os.PathLike[str],
    device: str | torch.device = "cpu",
    *,
    max_bytes: int = MAX_CHECKPOINT_BYTES,
) -> tuple[CheckersNet, CheckpointMeta]:
    """Read a model checkpoint; ``ValueError`` naming ``path`` if truncated, corrupt, foreign,
    non-finite or over ``max_bytes``."""
    path = Path(path)
    return decode_checkpoint(
        read_capped(path, max_bytes), device, source=str(path), max_bytes=max_bytes
    )


def read_checkpoint_meta(path: str | os.PathLike[str]) -> CheckpointMeta:
    """The header of a model checkpoint (verifies the whole file, builds no model on a device)."""
    return load_checkpoint(path, "cpu")[1]
