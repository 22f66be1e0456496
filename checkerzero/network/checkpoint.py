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

Schema versions: 2 is written; 1 (every file before the moves-left head and the weights
average existed) is still read, and means neither. Version 2 adds, both optional: a
``moves_left_head: true`` in the header's model config when the network has that head (its
tensors are named ``moves_left_head.*``; without the head the header has no such key), and in a
training state the moving average of the weights (``learner.ema``) as tensors ``ema/<name>``
with an ``ema`` header entry (``updates``, ``decay``). A training state without an average
resumes with one started from its weights.

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
import math
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

from game.notation import BOARD_SIZES
from learner.ema import WeightsEma
from learner.network import CheckersNet, ModelConfig

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

# Name prefixes of tensors inside a training-state file.
MODEL_PREFIX = "model/"
EMA_PREFIX = "ema/"  # the moving average of the weights (schema 2)
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
    ema_updates: int | None = None  # updates of the restored weights average; None: none saved


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
    bad = non_finite_tensors(tensors)
    if bad:  # what _decode would refuse is never written
        raise ValueError(f"tensor {bad[0]!r} holds NaN or infinite values; not saved")
    header = {**header, "sha256": _tensor_digest(tensors)}
    metadata = {METADATA_KEY: json.dumps(header, sort_keys=True)}
    return safetensors_save(tensors, metadata=metadata)


def _decode(
    data: bytes, source: str, max_bytes: int = MAX_CHECKPOINT_BYTES
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Parse and verify; ``source`` names the file (or stream) in error messages.

    Besides the format and the checksum, every floating-point tensor must be finite: a network
    (or optimizer state) holding NaN or infinity is refused by name, never loaded.
    """
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
    if isinstance(schema, bool) or schema not in READABLE_SCHEMA_VERSIONS:
        raise ValueError(
            f"{source}: schema_version {schema!r}, this code reads "
            + " and ".join(map(str, READABLE_SCHEMA_VERSIONS))
        )
    config = header.get("model_config")
    v2_only = "ema" in header or (isinstance(config, dict) and "moves_left_head" in config)
    if schema == 1 and v2_only:
        raise ValueError(f"{source}: a schema 1 file cannot hold a moves-left head or an EMA")
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


def _read(path: Path, max_bytes: int = MAX_CHECKPOINT_BYTES) -> bytes:
    """The file's bytes; its size is checked against ``max_bytes`` before it is read."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ValueError(f"{path}: {size} bytes is over the {max_bytes}-byte checkpoint cap")
        return path.read_bytes()
    except IsADirectoryError as exc:
        raise ValueError(f"{path}: is a directory, not a checkpoint file") from exc


def _expect_kind(header: Mapping[str, Any], kind: str, source: str) -> None:
    if header.get("kind") != kind:
        raise ValueError(f"{source}: holds a {header.get('kind')!r}, expected a {kind!r}")


def _int_field(header: Mapping[str, Any], key: str, source: str, default: int = 0) -> int:
    value = header.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{source}: header's {key!r} is {value!r}, not an integer")
    return value


def _config_from_header(header: Mapping[str, Any], source: str) -> ModelConfig:
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
    config: ModelConfig, tensors: Mapping[str, torch.Tensor], source: str
) -> dict[str, torch.Tensor]:
    """The state dict (shapes only, on the meta device) of the network ``config`` describes.

    Nothing is allocated; the header's board size must be one the rules support and its block
    count within the file's tensor count (each block holds tensors of its own), so a header
    cannot make even this step expensive."""
    if config.board_size not in BOARD_SIZES:
        raise ValueError(
            f"{source}: header's board_size {config.board_size} is not one of {BOARD_SIZES}"
        )
    if config.blocks > len(tensors):
        raise ValueError(
            f"{source}: header names {config.blocks} residual blocks, but the file holds only "
            f"{len(tensors)} tensors"
        )
    try:
        with torch.device("meta"):
            return CheckersNet(config).state_dict()
    except (RuntimeError, OverflowError) as exc:  # sizes past what torch can even describe
        raise ValueError(f"{source}: header's model {config} cannot be built ({exc})") from exc


def _load_weights(model: nn.Module, weights: Mapping[str, torch.Tensor], source: str) -> None:
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
        return _encode(model.state_dict(), header)
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

    The header's model is checked against the file's tensors (names, shapes, dtypes) before the
    network is built, so a header that names a larger network than the file holds allocates
    nothing; more than ``max_bytes`` is refused unread.
    """
    tensors, header = _decode(data, source, max_bytes)
    _expect_kind(header, KIND_MODEL, source)
    config = _config_from_header(header, source)
    _check_shapes(_expected_state(config, tensors, source), tensors, source)
    model = CheckersNet(config)
    _load_weights(model, tensors, source)
    model.to(device).eval()
    extra = header.get("extra", {})
    if not isinstance(extra, dict):
        raise ValueError(f"{source}: header's 'extra' is {extra!r}, not a JSON object")
    meta = CheckpointMeta(
        config=config,
        step=_int_field(header, "step", source),
        version=_int_field(header, "version", source),
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
    _write_atomic(path, encode_checkpoint(model, step=step, version=version, extra=extra))
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
    return decode_checkpoint(_read(path, max_bytes), device, source=str(path), max_bytes=max_bytes)


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


def _check_like(saved: Any, fresh: Any, source: str, where: str = "optimizer") -> None:
    """``saved`` has the form of ``fresh`` (what this code's own optimizer or scheduler holds):
    the same kind of value at every key both have, numbers finite, lists of the same length.
    Torch accepts nearly any mapping in ``load_state_dict`` and fails later, in a training step."""

    def kind(v: Any) -> str:
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, (int, float)):
            return "number"
        if isinstance(v, (list, tuple)):
            return "list"
        if isinstance(v, Mapping):
            return "mapping"
        if isinstance(v, torch.Tensor):
            return "tensor"
        return type(v).__name__

    if kind(saved) != kind(fresh):
        raise ValueError(f"{source}: {where} is {str(saved)[:60]!r}, expected a {kind(fresh)}")
    if kind(fresh) == "number":
        try:
            finite = math.isfinite(float(saved))
        except OverflowError:
            finite = False
        if not finite:
            raise ValueError(f"{source}: {where} is {str(saved)[:60]}, not a finite number")
    if kind(fresh) == "list":
        if len(saved) != len(fresh):
            raise ValueError(f"{source}: {where} has {len(saved)} entries, expected {len(fresh)}")
        for i, (a, b) in enumerate(zip(saved, fresh, strict=True)):
            _check_like(a, b, source, f"{where}[{i}]")
    elif kind(fresh) == "mapping":
        for key in fresh.keys() & saved.keys():
            _check_like(saved[key], fresh[key], source, f"{where}.{key}")


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
    ema: WeightsEma | None = None,
) -> None:
    """Write everything needed to resume training bit-exactly to ``path`` atomically.

    ``rng`` is normally ``capture_rng_state()``, plus any generator states of the caller's own
    (values may be tensors, arrays, tuples and JSON scalars). ``counters`` must be JSON-able.
    ``ema``: the moving average of the weights, saved beside them when given.
    """
    path = Path(path)
    tensors: dict[str, torch.Tensor] = {MODEL_PREFIX + k: v for k, v in model.state_dict().items()}
    if ema is not None:
        tensors.update({EMA_PREFIX + k: v for k, v in ema.model.state_dict().items()})
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
    if ema is not None:
        header["ema"] = {"updates": int(ema.updates), "decay": float(ema.decay)}
    _write_atomic(path, _encode(tensors, header))
    logger.debug("saved training state %s (step %d)", path, step)


def load_training_state(
    path: str | os.PathLike[str],
    model: CheckersNet,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    *,
    max_bytes: int = MAX_CHECKPOINT_BYTES,
    ema: WeightsEma | None = None,
) -> TrainingState:
    """Restore ``model``, ``optimizer`` and ``scheduler`` in place from ``path``.

    The optimizer must have been built over ``model``'s parameters in the same order as when saved
    (torch moves its state onto the parameters' device). RNG states are returned, not applied:
    call ``restore_rng_state(result.rng)`` when resuming. ``ema``: restored in place (weights
    and update count) when the file holds an average (``result.ema_updates`` is then its count),
    left untouched when it holds none (``result.ema_updates`` None); an average in the file is
    ignored when ``ema`` is None.
    """
    path = Path(path)
    source = str(path)
    tensors, header = _decode(_read(path, max_bytes), source, max_bytes)
    _expect_kind(header, KIND_TRAINING_STATE, source)
    config = _config_from_header(header, source)
    if config != model.config:
        raise ValueError(f"{source}: saved for {config}, but the model is {model.config}")
    weights = {k[len(MODEL_PREFIX) :]: v for k, v in tensors.items() if k.startswith(MODEL_PREFIX)}
    _load_weights(model, weights, source)
    ema_updates = _ema_updates(header, tensors, source)
    if ema is not None and ema_updates is not None:
        averaged = {k[len(EMA_PREFIX) :]: v for k, v in tensors.items() if k.startswith(EMA_PREFIX)}
        _load_weights(ema.model, averaged, f"{source} (weights average)")
        ema.updates = ema_updates
    tree = header.get("tree")
    if not isinstance(tree, dict):
        raise ValueError(f"{source}: training state has no 'tree' section")
    state = _unflatten_tree(tree, tensors, source)
    if not isinstance(state, dict):
        raise ValueError(f"{source}: training state's 'tree' section is not a JSON object")
    saved_opt = state.get("optimizer")
    if not isinstance(saved_opt, dict):
        raise ValueError(f"{source}: training state holds no optimizer state")
    _check_like(saved_opt.get("param_groups"), optimizer.state_dict()["param_groups"], source)
    try:
        optimizer.load_state_dict(saved_opt)
    except Exception as exc:  # torch raises what the damage leads to; all mean "does not fit"
        raise ValueError(f"{source}: optimizer state does not fit ({exc})") from exc
    for param, slots in optimizer.state.items():  # per-parameter buffers (momentum, ...)
        if not isinstance(param, torch.Tensor) or not isinstance(slots, Mapping):
            raise ValueError(f"{source}: optimizer state {str(slots)[:60]!r} is for no parameter")
        for name, value in slots.items():
            if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
                continue
            if not isinstance(value, torch.Tensor) or (value.dim() and value.shape != param.shape):
                raise ValueError(
                    f"{source}: optimizer state {name!r} ({str(value)[:40]}) does not fit a "
                    f"parameter of shape {tuple(param.shape)}"
                )
    if scheduler is not None:
        saved = state.get("scheduler")
        if not isinstance(saved, dict):
            raise ValueError(f"{source}: no scheduler state saved, but a scheduler was given")
        _check_like(saved, scheduler.state_dict(), source, "scheduler")
        scheduler.load_state_dict(saved)
    counters, rng = state.get("counters", {}), state.get("rng", {})
    if not isinstance(counters, dict) or not isinstance(rng, dict):
        raise ValueError(f"{source}: the counters and RNG states must be JSON objects")
    return TrainingState(
        step=_int_field(header, "step", source),
        counters=counters,
        rng=rng,
        ema_updates=ema_updates,
    )


def _ema_updates(
    header: Mapping[str, Any], tensors: Mapping[str, torch.Tensor], source: str
) -> int | None:
    """The saved average's update count, None when the file holds no average; ValueError when
    the header and the tensors disagree about it."""
    has_tensors = any(k.startswith(EMA_PREFIX) for k in tensors)
    entry = header.get("ema")
    if entry is None:
        if has_tensors:
            raise ValueError(f"{source}: holds weights-average tensors but no 'ema' header entry")
        return None
    if not isinstance(entry, dict) or not has_tensors:
        raise ValueError(f"{source}: bad 'ema' header entry {str(entry)[:60]!r}")
    updates = _int_field(entry, "updates", source, default=-1)
    if updates < 0:
        raise ValueError(f"{source}: the 'ema' header entry's updates is {updates}, not >= 0")
    return updates
