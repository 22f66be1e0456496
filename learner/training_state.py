"""The learner's resumable training state as a safetensors file; nothing is ever unpickled.

A *training state* (``save_training_state``/``load_training_state``) is a file of the network
file format (``checkerzero.network.checkpoint``) of kind ``training_state``: the weights plus
the optimizer and scheduler state, counters and the RNG states, enough to resume bit-exactly.
The nested state dicts are split by a small tree codec: every tensor or NumPy array goes into
the safetensors body under a generated name and the rest (floats, ints, strings, tuples, dicts
with integer keys) becomes JSON with typed markers, so loading never executes anything.

Schema 2 adds the moving average of the weights (``learner.ema``) as tensors ``ema/<name>``
with an ``ema`` header entry (``updates``, ``decay``); a training state without an average
resumes with one started from its weights.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from checkerzero.network.checkpoint import (
    KIND_TRAINING_STATE,
    MAX_CHECKPOINT_BYTES,
    SCHEMA_VERSION,
    config_from_header,
    decode_tensors,
    encode_tensors,
    expect_kind,
    int_field,
    load_weights,
    read_capped,
    write_atomic,
)
from checkerzero.network.model import CheckersNet
from learner.ema import WeightsEma

logger = logging.getLogger(__name__)

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
class TrainingState:
    """What ``load_training_state`` returns besides restoring model, optimizer and scheduler."""

    step: int
    counters: Mapping[str, Any]
    rng: dict[str, Any]
    ema_updates: int | None = None  # updates of the restored weights average; None: none saved


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
    write_atomic(path, encode_tensors(tensors, header))
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
    tensors, header = decode_tensors(read_capped(path, max_bytes), source, max_bytes)
    expect_kind(header, KIND_TRAINING_STATE, source)
    config = config_from_header(header, source)
    if config != model.config:
        raise ValueError(f"{source}: saved for {config}, but the model is {model.config}")
    weights = {k[len(MODEL_PREFIX) :]: v for k, v in tensors.items() if k.startswith(MODEL_PREFIX)}
    load_weights(model, weights, source)
    ema_updates = _ema_updates(header, tensors, source)
    if ema is not None and ema_updates is not None:
        averaged = {k[len(EMA_PREFIX) :]: v for k, v in tensors.items() if k.startswith(EMA_PREFIX)}
        load_weights(ema.model, averaged, f"{source} (weights average)")
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
        step=int_field(header, "step", source),
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
    updates = int_field(entry, "updates", source, default=-1)
    if updates < 0:
        raise ValueError(f"{source}: the 'ema' header entry's updates is {updates}, not >= 0")
    return updates
