"""The learned alpha-beta evaluation's weights file: its format, its checks, and a reference.

The network (game/cpp/nneval.h) scores a board from piece-square features seen from each side:
its own men, own kings, the opponent's men, the opponent's kings on the board's squares (4 x 32
inputs on 8x8), White's view turned half a turn. A first layer of width ``hidden`` is kept per side
as an int16 accumulator that the search updates move by move; the side to move's and the other
side's accumulators, clipped to [0, 1], feed two small dense layers (int8 weights) and one output,
scaled to centi-men.

File format (safetensors, version 1), all tensors little-endian integers:

===========  =====  ===================  ============================================
name         dtype  shape                meaning (units in game/cpp/nneval.h)
===========  =====  ===================  ============================================
ft_w         int16  (4*squares, hidden)  first-layer column per feature, 1.0 = 127
ft_b         int16  (hidden,)            first-layer bias
l1_w         int8   (dense1, 2*hidden)   dense weights, 1.0 = 64
l1_b         int32  (dense1,)            bias, 1.0 = 127*64
l2_w         int8   (dense2, dense1)
l2_b         int32  (dense2,)
out_w        int16  (dense2,)            output weights, 1.0 = 64
out_b        int32  (1,)                 output bias, 1.0 = 127*64
pol_w        int8   (4*squares, 2*hidden)  optional move-ordering head: a row per action
pol_b        int32  (4*squares,)         its bias (logits on a scale the file chooses)
===========  =====  ===================  ============================================

The move-ordering head (``pol_w`` and ``pol_b``, both or neither) scores each action of the mover
(square * 4 + direction in the mover's frame, as the MCTS network's policy) from the same
clipped accumulators the first dense layer reads; the ``policy`` search switch orders quiet moves
by it. It never changes a score.

Metadata: ``format`` = ``checkerzero-nneval``, ``version`` = ``1``, ``board_size`` (6 or 8),
``output_scale`` (centi-men per unit of logit, 1..2000), and free-text provenance keys. A file is
refused with one line naming it when it is larger than :data:`MAX_FILE_BYTES`, not safetensors,
of another format or version, has a missing/extra tensor, a wrong dtype or shape, a metadata
number that is not a finite integer, or weights the core rejects (int16 overflow bounds).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from safetensors.numpy import save as st_save

from game import _core
from game.files import FileRefused, read_regular_file
from game.json_header import int_value, parse_object

FORMAT = "checkerzero-nneval"
VERSION = 1
# The largest file the format allows: the widest network (hidden 256, dense 64) is about 100 KB.
MAX_FILE_BYTES = 1 << 20
# The shipped evaluation of the ab+nn players: the best generation of `python -m learner
# preset=nneval` (docs/results/nneval-generations). The first file, fitted once to human games,
# stays beside it as the yardstick later evaluations are measured against.
DEFAULT_PATH = Path(__file__).resolve().parent / "data" / "nneval-v2.safetensors"
FIRST_PATH = Path(__file__).resolve().parent / "data" / "nneval-v1.safetensors"

ACTIVATION_ONE: int = _core.NNEVAL_ACTIVATION_ONE  # 1.0 in activation units
WEIGHT_SHIFT: int = _core.NNEVAL_WEIGHT_SHIFT  # dense weights are scaled by 2**WEIGHT_SHIFT
SCORE_LIMIT: int = _core.NNEVAL_SCORE_LIMIT  # |score| cap, centi-men
FEATURE_KINDS = 4  # own men, own kings, opponent's men, opponent's kings
TENSORS: dict[str, np.dtype] = {
    "ft_w": np.dtype("<i2"),
    "ft_b": np.dtype("<i2"),
    "l1_w": np.dtype("i1"),
    "l1_b": np.dtype("<i4"),
    "l2_w": np.dtype("i1"),
    "l2_b": np.dtype("<i4"),
    "out_w": np.dtype("<i2"),
    "out_b": np.dtype("<i4"),
}
# The optional move-ordering head: both tensors or neither.
POLICY_TENSORS: dict[str, np.dtype] = {"pol_w": np.dtype("i1"), "pol_b": np.dtype("<i4")}
_HEADER_LEN = struct.Struct("<Q")
_MAX_DIMS = 4  # the file's tensors are vectors and matrices
_MAX_DIM = MAX_FILE_BYTES  # no dimension of an int8 tensor exceeds the file's size
_MAX_INT_TEXT = 20  # a metadata integer (version, board size, scale) in at most 20 digits


class NNEvalFileError(ValueError):
    """A learned-evaluation file that cannot be used (the message names the file)."""


@dataclass(frozen=True)
class NNEvalNet:
    """Quantised weights as NumPy arrays (the file's tensors) plus the board size and scale."""

    size: int
    output_scale: int
    tensors: dict[str, np.ndarray]
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def hidden(self) -> int:
        return int(self.tensors["ft_b"].shape[0])

    @property
    def has_policy(self) -> bool:
        return "pol_w" in self.tensors

    def core(self) -> _core.NNEvalWeights:
        """The core's checked weights (ValueError naming the fault)."""
        t = self.tensors
        return _core.NNEvalWeights(
            self.size,
            self.output_scale,
            np.ascontiguousarray(t["ft_w"], np.int16),
            np.ascontiguousarray(t["ft_b"], np.int16),
            np.ascontiguousarray(t["l1_w"], np.int8),
            np.ascontiguousarray(t["l1_b"], np.int32),
            np.ascontiguousarray(t["l2_w"], np.int8),
            np.ascontiguousarray(t["l2_b"], np.int32),
            np.ascontiguousarray(t["out_w"], np.int16),
            int(t["out_b"][0]),
            *(
                (
                    np.ascontiguousarray(t["pol_w"], np.int8),
                    np.ascontiguousarray(t["pol_b"], np.int32),
                )
                if self.has_policy
                else ()
            ),
        )


def expected_shapes(size: int, hidden: int, dense1: int, dense2: int) -> dict[str, tuple[int, ...]]:
    squares = size * size // 2
    return {
        "ft_w": (FEATURE_KINDS * squares, hidden),
        "ft_b": (hidden,),
        "l1_w": (dense1, 2 * hidden),
        "l1_b": (dense1,),
        "l2_w": (dense2, dense1),
        "l2_b": (dense2,),
        "out_w": (dense2,),
        "out_b": (1,),
        "pol_w": (FEATURE_KINDS * squares, 2 * hidden),
        "pol_b": (FEATURE_KINDS * squares,),
    }


def save(net: NNEvalNet, path: Path | str) -> Path:
    """Write ``net`` (checked by the core first) as a version-1 file."""
    net.core()
    meta = {str(k): str(v) for k, v in net.metadata.items()}
    meta.update(
        format=FORMAT,
        version=str(VERSION),
        board_size=str(net.size),
        output_scale=str(net.output_scale),
    )
    kinds = {**TENSORS, **(POLICY_TENSORS if net.has_policy else {})}
    tensors = {k: np.ascontiguousarray(net.tensors[k], kinds[k]) for k in kinds}
    data = st_save(tensors, metadata=meta)
    if len(data) > MAX_FILE_BYTES:
        raise NNEvalFileError(
            f"learned evaluation {path}: {len(data)} bytes, over {MAX_FILE_BYTES}"
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return path


def _int_field(meta: Mapping[str, str], key: str, where: str) -> int:
    text = meta.get(key)
    if text is None:
        raise NNEvalFileError(f"{where}: metadata has no {key!r}")
    try:
        if len(text) > _MAX_INT_TEXT:
            raise ValueError
        value = int(text)
    except ValueError:
        shown = text if len(text) <= _MAX_INT_TEXT else f"{text[:20]}... ({len(text):,} characters)"
        raise NNEvalFileError(
            f"{where}: metadata {key}={shown!r} is not a finite integer "
            f"of at most {_MAX_INT_TEXT} digits"
        ) from None
    return value


def load(path: Path | str) -> NNEvalNet:
    """Read and check a learned-evaluation file; NNEvalFileError naming it on any fault."""
    path = Path(path)
    where = f"learned evaluation {path}"
    try:  # a regular file only: a FIFO or device given as the path would block or stream
        data = read_regular_file(path, MAX_FILE_BYTES, "learned evaluation")
    except FileRefused as err:
        raise NNEvalFileError(str(err)) from None
    except OSError as err:
        raise NNEvalFileError(f"{where}: cannot read: {err.strerror or err}") from None
    return loads(data, where)


def loads(data: bytes, where: str) -> NNEvalNet:
    """``load`` of a file's bytes (from Redis, say); ``where`` names them in every error."""
    if len(data) > MAX_FILE_BYTES:
        raise NNEvalFileError(f"{where}: larger than the {MAX_FILE_BYTES}-byte cap")
    tensors, meta = _parse(data, where)
    if meta.get("format") != FORMAT:
        raise NNEvalFileError(f"{where}: format {meta.get('format')!r}, expected {FORMAT!r}")
    version = _int_field(meta, "version", where)
    if version != VERSION:
        raise NNEvalFileError(f"{where}: version {version}, this code reads version {VERSION}")
    size = _int_field(meta, "board_size", where)
    if size not in (6, 8):
        raise NNEvalFileError(f"{where}: board_size {size}, expected 6 or 8")
    scale = _int_field(meta, "output_scale", where)
    kinds = {**TENSORS, **{k: v for k, v in POLICY_TENSORS.items() if k in tensors}}
    missing = sorted(set(TENSORS) - set(tensors))
    extra = sorted(set(tensors) - set(kinds))
    if missing or extra:
        raise NNEvalFileError(f"{where}: missing tensors {missing}, unexpected tensors {extra}")
    if len(set(POLICY_TENSORS) & set(tensors)) == 1:
        raise NNEvalFileError(
            f"{where}: the move-ordering head needs both pol_w and pol_b, "
            f"the file has only {sorted(set(POLICY_TENSORS) & set(tensors))[0]}"
        )
    for name, dtype in kinds.items():
        if tensors[name].dtype != dtype:
            raise NNEvalFileError(f"{where}: {name} is {tensors[name].dtype}, expected {dtype}")
    hidden = tensors["ft_b"].shape[0] if tensors["ft_b"].ndim == 1 else -1
    dense1 = tensors["l1_b"].shape[0] if tensors["l1_b"].ndim == 1 else -1
    dense2 = tensors["l2_b"].shape[0] if tensors["l2_b"].ndim == 1 else -1
    for name, shape in expected_shapes(size, hidden, dense1, dense2).items():
        if name in tensors and tuple(tensors[name].shape) != shape:
            raise NNEvalFileError(
                f"{where}: {name} has shape {tuple(tensors[name].shape)}, expected {shape}"
            )
    net = NNEvalNet(size, scale, tensors, dict(meta))
    try:
        net.core()
    except ValueError as err:
        raise NNEvalFileError(f"{where}: {err}") from None
    return net


def _parse(data: bytes, where: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Tensors and metadata of safetensors bytes, checked by hand so every fault names the file."""
    if len(data) < _HEADER_LEN.size:
        raise NNEvalFileError(f"{where}: truncated ({len(data)} bytes), not a safetensors file")
    (n,) = _HEADER_LEN.unpack_from(data)
    if n > len(data) - _HEADER_LEN.size:
        raise NNEvalFileError(
            f"{where}: header of {n} bytes in a {len(data)}-byte file (truncated?)"
        )
    header = parse_object(
        data[_HEADER_LEN.size : _HEADER_LEN.size + n],
        f"{where}: unreadable safetensors header",
        error=NNEvalFileError,
    )
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise NNEvalFileError(f"{where}: metadata must map names to strings")
    body = memoryview(data)[_HEADER_LEN.size + n :]
    dtypes = {"I8": np.dtype("i1"), "I16": np.dtype("<i2"), "I32": np.dtype("<i4")}
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        try:
            kind, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            if not isinstance(shape, list) or len(shape) > _MAX_DIMS:
                raise TypeError
            what, bad = f"tensor {name!r}", NNEvalFileError
            shape = tuple(
                int_value(d, f"{what} shape", where, lo=0, hi=_MAX_DIM, error=bad) for d in shape
            )
            ends = [
                int_value(x, f"{what} offset", where, lo=0, hi=MAX_FILE_BYTES, error=bad)
                for x in (begin, end)
            ]
            begin, end = ends
        except NNEvalFileError:
            raise
        except (KeyError, TypeError, ValueError):
            raise NNEvalFileError(f"{where}: tensor {name!r} has a malformed entry") from None
        if not isinstance(kind, str) or kind not in dtypes:
            raise NNEvalFileError(f"{where}: {name} is {kind}, only integer tensors are allowed")
        count = math.prod(shape)  # Python ints: a crafted shape cannot wrap around
        if min(shape, default=1) < 0 or not 0 <= begin <= end <= len(body):
            raise NNEvalFileError(f"{where}: tensor {name} lies outside the file (truncated?)")
        if end - begin != count * dtypes[kind].itemsize:
            raise NNEvalFileError(
                f"{where}: tensor {name} has {end - begin} bytes for shape {shape}"
            )
        arr = np.frombuffer(body[begin:end], dtype=dtypes[kind]).reshape(shape)
        tensors[str(name)] = arr.copy()
    return tensors, meta


# ---- the reference: the same integer arithmetic in NumPy, for tests and for training checks ----


def feature_planes(
    black: np.ndarray, white: np.ndarray, kings: np.ndarray, size: int
) -> np.ndarray:
    """(n, 2, 4*squares) uint8 features of n boards: Black's view, then White's (turned)."""
    squares = size * size // 2
    bits = np.arange(squares, dtype=np.uint32)
    black = np.asarray(black, np.uint32)[:, None]
    white = np.asarray(white, np.uint32)[:, None]
    kings = np.asarray(kings, np.uint32)[:, None]

    def plane(b: np.ndarray) -> np.ndarray:
        return ((b >> bits) & 1).astype(np.uint8)

    bm, bk = plane(black & ~kings), plane(black & kings)
    wm, wk = plane(white & ~kings), plane(white & kings)
    black_view = np.concatenate([bm, bk, wm, wk], axis=1)
    white_view = np.concatenate([wm[:, ::-1], wk[:, ::-1], bm[:, ::-1], bk[:, ::-1]], axis=1)
    return np.stack([black_view, white_view], axis=1)


def reference_accumulators(net: NNEvalNet, black: int, white: int, kings: int) -> np.ndarray:
    """(2, hidden) int64 accumulators of one board (Black's view first), as the core keeps them."""
    x = feature_planes(np.array([black]), np.array([white]), np.array([kings]), net.size)[0]
    acc = x.astype(np.int64) @ net.tensors["ft_w"].astype(np.int64)
    return acc + net.tensors["ft_b"].astype(np.int64)


def reference_evaluate(
    net: NNEvalNet, black: int, white: int, kings: int, white_to_move: bool
) -> int:
    """The core's score of one board, computed independently with NumPy integers."""
    t = {k: v.astype(np.int64) for k, v in net.tensors.items()}
    acc = reference_accumulators(net, black, white, kings)
    us = 1 if white_to_move else 0
    x = np.clip(np.concatenate([acc[us], acc[1 - us]]), 0, ACTIVATION_ONE)
    h1 = np.clip((t["l1_w"] @ x + t["l1_b"]) >> WEIGHT_SHIFT, 0, ACTIVATION_ONE)
    h2 = np.clip((t["l2_w"] @ h1 + t["l2_b"]) >> WEIGHT_SHIFT, 0, ACTIVATION_ONE)
    out = int(t["out_w"] @ h2 + t["out_b"][0])
    num = out * net.output_scale
    den = ACTIVATION_ONE << WEIGHT_SHIFT
    score = abs(num) // den * (1 if num >= 0 else -1)  # truncation towards zero, as in C++
    return max(-SCORE_LIMIT, min(SCORE_LIMIT, score))


def reference_policy(
    net: NNEvalNet, black: int, white: int, kings: int, white_to_move: bool
) -> np.ndarray:
    """The core's move-ordering logits of one board (int64, one per action), with NumPy."""
    acc = reference_accumulators(net, black, white, kings)
    us = 1 if white_to_move else 0
    x = np.clip(np.concatenate([acc[us], acc[1 - us]]), 0, ACTIVATION_ONE)
    return net.tensors["pol_w"].astype(np.int64) @ x + net.tensors["pol_b"].astype(np.int64)


def with_policy(
    net: NNEvalNet, weight: np.ndarray, bias: np.ndarray, metadata: Mapping[str, str] | None = None
) -> NNEvalNet:
    """``net`` with a move-ordering head from float weights over inputs in [0, 1] (``weight``
    (actions, 2*hidden), ``bias`` (actions,)): scaled so the largest weight is 127 (only the
    logits' order counts), rounded, the bias in the same units."""
    weight, bias = np.asarray(weight, np.float64), np.asarray(bias, np.float64)
    if not (np.isfinite(weight).all() and np.isfinite(bias).all()):
        raise ValueError("move-ordering head: non-finite float weights")
    scale = 127.0 / max(float(np.abs(weight).max()), 1e-12)
    pol_w = np.clip(np.rint(weight * scale), -127, 127).astype("i1")
    limit = 1 << 24
    pol_b = np.clip(np.rint(bias * scale * ACTIVATION_ONE), -limit, limit).astype("<i4")
    tensors = {**net.tensors, "pol_w": pol_w, "pol_b": pol_b}
    out = NNEvalNet(net.size, net.output_scale, tensors, {**net.metadata, **(metadata or {})})
    out.core()  # checked by the core
    return out


def quantise(
    floats: Mapping[str, np.ndarray],
    *,
    size: int,
    output_scale: int,
    metadata: Mapping[str, str] | None = None,
) -> NNEvalNet:
    """Integer weights from a float model's (``ft_w`` (inputs, hidden), ``ft_b``, ``l1_w``
    (out, in), ``l1_b``, ``l2_w``, ``l2_b``, ``out_w`` (dense2,), ``out_b`` (1,)), rounding to the
    nearest step and clipping to each type's range."""
    one, w_one = ACTIVATION_ONE, 1 << WEIGHT_SHIFT

    def q(name: str, scale: float, lo: int, hi: int, dtype: str) -> np.ndarray:
        a = np.asarray(floats[name], np.float64)
        if not np.isfinite(a).all():
            raise ValueError(f"float weights {name} hold non-finite values")
        return np.clip(np.rint(a * scale), lo, hi).astype(dtype)

    squares = size * size // 2
    pieces = 2 * (size // 2) * (size // 2 - 1)
    # Leave the accumulator room for a full board at the bias's worst (see check_weights).
    ft_limit = (32767 - 4 * one) // pieces
    tensors = {
        "ft_w": q("ft_w", one, -ft_limit, ft_limit, "<i2"),
        "ft_b": q("ft_b", one, -4 * one, 4 * one, "<i2"),
        "l1_w": q("l1_w", w_one, -128, 127, "i1"),
        "l1_b": q("l1_b", one * w_one, -(1 << 24), 1 << 24, "<i4"),
        "l2_w": q("l2_w", w_one, -128, 127, "i1"),
        "l2_b": q("l2_b", one * w_one, -(1 << 24), 1 << 24, "<i4"),
        "out_w": q("out_w", w_one, -32768, 32767, "<i2"),
        "out_b": q("out_b", one * w_one, -(1 << 24), 1 << 24, "<i4").reshape(1),
    }
    if tensors["ft_w"].shape[0] != FEATURE_KINDS * squares:
        raise ValueError(
            f"ft_w has {tensors['ft_w'].shape[0]} rows, expected {FEATURE_KINDS * squares}"
        )
    return NNEvalNet(size, output_scale, tensors, dict(metadata or {}))


def load_core(path: Path | str | None = None) -> _core.NNEvalWeights:
    """The core's weights from a file (the shipped one by default)."""
    return load(DEFAULT_PATH if path is None else path).core()
