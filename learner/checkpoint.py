"""Checkpoints and resumable training state as safetensors files; nothing is ever unpickled.

Two kinds of file, both plain safetensors (``8-byte header length | JSON header | tensor bytes``):

- A *model checkpoint* (``save_checkpoint``/``load_checkpoint``): the network weights, float32,
  plus a JSON document under the ``checkerzero`` key of the safetensors metadata holding the model
  config, the training step, the published weights version, free-form ``extra`` and a
  ``schema_version``. The same bytes are what the learner publishes to actors
  (``encode_checkpoint`` / ``decode_checkpoint``), so one format serves disk and wire.
- A *training state* (``save_training_state``/``load_training_state``): the weights plus the
  optimizer and scheduler state, counters and the RNG states, enough to resume bit-exactly. The
  nested state dicts are split by a small tree codec: every tensor or NumPy array goes into the
  safetensors body under a generated name and the rest (floats, ints, strings, tuples, dicts with
  integer keys) becomes JSON with typed markers, so loading never executes anything.

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
import random
import struct
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load as safetensors_load  # plain tensors, never pickle
from safetensors.torch import save as safetensors_save
from torch import nn

from learner.network import CheckersNet, ModelConfig

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1  # bump when the header layout or tensor naming changes
METADATA_KEY = "checkerzero"  # safetensors metadata key holding our JSON header
KIND_MODEL = "model"
KIND_TRAINING_STATE = "training_state"
HEADER_LENGTH_BYTES = 8  # safetensors: little-endian u64 header length, then the JSON header
MAX_HEADER_BYTES = 100 * 1024 * 1024  # safetensors' own limit; larger means a foreign/corrupt file

# Name prefixes of tensors inside a training-state file.
MODEL_PREFIX = "model/"
TREE_PREFIX = "tree/"

# Markers of the JSON tree codec (keys that never occur in torch/numpy/random state dicts).
_TENSOR = "__tensor__"
_NDARRAY = "__ndarray__"
_TUPLE = "__tuple__"
_ITEMS = "__items__"


@dataclasses.dataclass(frozen=True)
class CheckpointMeta:
    """Header of a model checkpoint."""

    config: ModelConfig
    step: int
    version: int
    schema_version: int
    extra: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class TrainingState:
    """What ``load_training_state`` returns besides restoring model, optimizer and scheduler."""

    step: int
    counters: Mapping[str, Any]
    rng: dict[str, Any]


# ---------------------------------------------------------------------------------------------
# Low-level file format


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


def _encode(tensors: Mapping[str, torch.Tensor], header: dict[str, Any]) -> bytes:
    tensors = _cpu_tensors(tensors)
    header = {**header, "sha256": _tensor_digest(tensors)}
    metadata = {METADATA_KEY: json.dumps(header, sort_keys=True)}
    return safetensors_save(tensors, metadata=metadata)


def _decode(data: bytes, source: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Parse and verify; ``source`` names the file (or stream) in error messages."""
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
    try:
        raw_header = json.loads(data[HEADER_LENGTH_BYTES : HEADER_LENGTH_BYTES + header_len])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{source}: safetensors header is not valid JSON ({exc})") from exc
    if not isinstance(raw_header, dict):
        raise ValueError(f"{source}: safetensors header is not a JSON object")
    metadata = raw_header.get("__metadata__") or {}
    if METADATA_KEY not in metadata:
        raise ValueError(f"{source}: not a checkerzero file (no '{METADATA_KEY}' metadata)")
    try:
        header = json.loads(metadata[METADATA_KEY])
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{source}: '{METADATA_KEY}' metadata is not valid JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise ValueError(f"{source}: '{METADATA_KEY}' metadata is not a JSON object")
    schema = header.get("schema_version")
    if schema != SCHEMA_VERSION:
        raise ValueError(f"{source}: schema_version {schema!r}, this code reads {SCHEMA_VERSION}")
    try:
        tensors = safetensors_load(data)
    except Exception as exc:  # SafetensorError is not exported under a stable name
        raise ValueError(f"{source}: corrupt safetensors body ({exc})") from exc
    if _tensor_digest(tensors) != header.get("sha256"):
        raise ValueError(f"{source}: tensor checksum mismatch; the file is corrupt")
    return tensors, header


def _write_atomic(path: Path, data: bytes) -> None:
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


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except IsADirectoryError as exc:
        raise ValueError(f"{path}: is a directory, not a checkpoint file") from exc


def _expect_kind(header: Mapping[str, Any], kind: str, source: str) -> None:
    if header.get("kind") != kind:
        raise ValueError(f"{source}: holds a {header.get('kind')!r}, expected a {kind!r}")


def _config_from_header(header: Mapping[str, Any], source: str) -> ModelConfig:
    try:
        return ModelConfig.from_dict(header["model_config"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{source}: bad model_config in header ({exc})") from exc


def _load_weights(model: nn.Module, weights: Mapping[str, torch.Tensor], source: str) -> None:
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
        return _encode(model.state_dict(), header)
    except TypeError as exc:
        raise ValueError(f"checkpoint extra must be JSON-serialisable ({exc})") from exc


def decode_checkpoint(
    data: bytes, device: str | torch.device = "cpu", *, source: str = "<bytes>"
) -> tuple[CheckersNet, CheckpointMeta]:
    """Inverse of ``encode_checkpoint``: a new model in eval mode on ``device`` and its header."""
    tensors, header = _decode(data, source)
    _expect_kind(header, KIND_MODEL, source)
    config = _config_from_header(header, source)
    model = CheckersNet(config)
    _load_weights(model, tensors, source)
    model.to(device).eval()
    meta = CheckpointMeta(
        config=config,
        step=int(header.get("step", 0)),
        version=int(header.get("version", 0)),
        schema_version=int(header["schema_version"]),
        extra=header.get("extra", {}),
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
    _write_atomic(path, encode_checkpoint(model, step=step, version=version, extra=extra))
    logger.debug("saved checkpoint %s (step %d, version %d)", path, step, version)


def load_checkpoint(
    path: str | os.PathLike[str], device: str | torch.device = "cpu"
) -> tuple[CheckersNet, CheckpointMeta]:
    """Read a model checkpoint; ``ValueError`` naming ``path`` if truncated, corrupt or foreign."""
    path = Path(path)
    return decode_checkpoint(_read(path), device, source=str(path))


def read_checkpoint_meta(path: str | os.PathLike[str]) -> CheckpointMeta:
    """The header of a model checkpoint (verifies the whole file, builds no model on a device)."""
    return load_checkpoint(path, "cpu")[1]


# ---------------------------------------------------------------------------------------------
# Tree codec for optimizer/scheduler/RNG state


def _flatten_tree(obj: Any, tensors: dict[str, torch.Tensor], where: str) -> Any:
    """JSON-able copy of ``obj`` with tensors/arrays moved into ``tensors``."""
    if isinstance(obj, torch.Tensor):
        name = f"{TREE_PREFIX}{len(tensors)}"
        tensors[name] = obj
        return {_TENSOR: name}
    if isinstance(obj, np.ndarray):
        name = f"{TREE_PREFIX}{len(tensors)}"
        contiguous = np.ascontiguousarray(obj)
        tensors[name] = torch.frombuffer(bytearray(contiguous.tobytes()), dtype=torch.uint8)
        return {_NDARRAY: name, "dtype": contiguous.dtype.str, "shape": list(contiguous.shape)}
    if isinstance(obj, np.generic):
        return _flatten_tree(obj.item(), tensors, where)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (list, tuple)):
        items = [_flatten_tree(v, tensors, f"{where}[{i}]") for i, v in enumerate(obj)]
        return {_TUPLE: items} if isinstance(obj, tuple) else items
    if isinstance(obj, Mapping):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: _flatten_tree(v, tensors, f"{where}.{k}") for k, v in obj.items()}
        pairs = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)):
                raise ValueError(f"cannot store dict key {k!r} at {where}: only str/int keys")
            pairs.append([k, _flatten_tree(v, tensors, f"{where}[{k!r}]")])
        return {_ITEMS: pairs}
    raise ValueError(
        f"cannot store {type(obj).__name__} at {where}: not a tensor, array or JSON value"
    )


def _unflatten_tree(obj: Any, tensors: Mapping[str, torch.Tensor], source: str) -> Any:
    if isinstance(obj, list):
        return [_unflatten_tree(v, tensors, source) for v in obj]
    if not isinstance(obj, dict):
        return obj
    try:
        if _TENSOR in obj:
            return tensors[obj[_TENSOR]]
        if _NDARRAY in obj:
            raw = tensors[obj[_NDARRAY]].numpy().tobytes()
            return np.frombuffer(raw, dtype=np.dtype(obj["dtype"])).reshape(obj["shape"]).copy()
        if _TUPLE in obj:
            return tuple(_unflatten_tree(v, tensors, source) for v in obj[_TUPLE])
        if _ITEMS in obj:
            return {k: _unflatten_tree(v, tensors, source) for k, v in obj[_ITEMS]}
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{source}: malformed state entry {str(obj)[:80]} ({exc})") from exc
    return {k: _unflatten_tree(v, tensors, source) for k, v in obj.items()}


# ---------------------------------------------------------------------------------------------
# RNG state


def capture_rng_state() -> dict[str, Any]:
    """States of Python's ``random``, NumPy's legacy global RNG and torch (CPU and CUDA)."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Inverse of ``capture_rng_state`` (accepts what ``load_training_state`` returns)."""
    if "python" in state:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in state:
        np.random.set_state(tuple(state["numpy"]))
    if "torch" in state:
        torch.set_rng_state(state["torch"])
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(list(state["torch_cuda"]))


# ---------------------------------------------------------------------------------------------
# Training state


def save_training_state(
    path: str | os.PathLike[str],
    model: CheckersNet,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    *,
    step: int,
    counters: dict[str, Any],
    rng: dict[str, Any],
) -> None:
    """Write everything needed to resume training bit-exactly to ``path`` atomically.

    ``rng`` is normally ``capture_rng_state()``, plus any generator states of the caller's own
    (values may be tensors, arrays, tuples and JSON scalars). ``counters`` must be JSON-able.
    """
    path = Path(path)
    tensors: dict[str, torch.Tensor] = {MODEL_PREFIX + k: v for k, v in model.state_dict().items()}
    tree_tensors: dict[str, torch.Tensor] = {}
    tree = {
        "optimizer": _flatten_tree(optimizer.state_dict(), tree_tensors, "optimizer"),
        "scheduler": (
            None
            if scheduler is None
            else _flatten_tree(scheduler.state_dict(), tree_tensors, "scheduler")
        ),
        "rng": _flatten_tree(rng, tree_tensors, "rng"),
        "counters": _flatten_tree(counters, tree_tensors, "counters"),
    }
    tensors.update(tree_tensors)
    header = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND_TRAINING_STATE,
        "model_config": model.config.to_dict(),
        "step": int(step),
        "tree": tree,
    }
    _write_atomic(path, _encode(tensors, header))
    logger.debug("saved training state %s (step %d)", path, step)


def load_training_state(
    path: str | os.PathLike[str],
    model: CheckersNet,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
) -> TrainingState:
    """Restore ``model``, ``optimizer`` and ``scheduler`` in place from ``path``.

    The optimizer must have been built over ``model``'s parameters in the same order as when saved
    (torch moves its state onto the parameters' device). RNG states are returned, not applied:
    call ``restore_rng_state(result.rng)`` when resuming.
    """
    path = Path(path)
    source = str(path)
    tensors, header = _decode(_read(path), source)
    _expect_kind(header, KIND_TRAINING_STATE, source)
    config = _config_from_header(header, source)
    if config != model.config:
        raise ValueError(f"{source}: saved for {config}, but the model is {model.config}")
    weights = {k[len(MODEL_PREFIX) :]: v for k, v in tensors.items() if k.startswith(MODEL_PREFIX)}
    _load_weights(model, weights, source)
    tree = header.get("tree")
    if not isinstance(tree, dict):
        raise ValueError(f"{source}: training state has no 'tree' section")
    state = _unflatten_tree(tree, tensors, source)
    try:
        optimizer.load_state_dict(state["optimizer"])
    except (KeyError, ValueError, RuntimeError) as exc:
        raise ValueError(f"{source}: optimizer state does not fit ({exc})") from exc
    if scheduler is not None:
        if state.get("scheduler") is None:
            raise ValueError(f"{source}: no scheduler state saved, but a scheduler was given")
        scheduler.load_state_dict(state["scheduler"])
    return TrainingState(
        step=int(header["step"]), counters=state.get("counters", {}), rng=state.get("rng", {})
    )
