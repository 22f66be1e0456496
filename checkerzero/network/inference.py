"""Batched network inference for self-play, evaluation and play.

``NetworkInference`` is the network behind the ``game.mcts.Inference`` protocol: NumPy in
(planes ``(N, C, S, S)`` float32, legal mask ``(N, A)`` bool), NumPy out (priors ``(N, A)`` float32
that are a softmax over the legal actions only, exactly 0 on illegal ones; WDL probabilities
``(N, 3)`` float32 from the mover's view). The search stays free of torch and of devices.

``NetworkInference`` choices:

- Device ``"auto"``: CUDA, else Apple MPS, else CPU (the DESIGN's embedded default).
- Precision (``precision``, :func:`compute_dtype`): ``auto`` is bf16 autocast on CUDA (same
  exponent range as float32, so no scaling and no overflow, and tensor-core speed) and on a CPU
  that computes bf16 in hardware (x86 AVX512-BF16 or AMX: :func:`cpu_has_native_bf16`), where
  oneDNN runs the default network about twice as fast as in float32 (one core of this machine's
  AMD EPYC: self-play 300 positions/s against 148, training 15 steps/s against 10, measured);
  float32 elsewhere, where bf16 is emulated and slower. ``float32`` and ``bfloat16`` force one.
  The softmaxes run in float32 either way.
- On CUDA, host->device copies from a reused pinned staging buffer so the copy is a single DMA
  with no pageable bounce.
- channels_last layout on CUDA (cuDNN's fast layout for bf16 convolutions) and on CPU, where
  oneDNN was measured 0-15% faster with it than with NCHW for the default and large models at
  batch 64-256 (never slower); MPS keeps the default layout.
- The legal-move masking and both softmaxes run on the device, in float32, so one small array per
  head comes back; ``-inf`` fill makes illegal priors exactly zero.
- ``torch.inference_mode`` (no autograd bookkeeping); optional ``torch.compile``.
- Weights are hot-swapped in place with ``load_state(state_dict, version)`` between batches, so an
  actor picks up new weights without rebuilding the model or recompiling.
- ``num_threads`` sets torch's intra-op threads for the whole process (it is a global setting);
  with one self-play actor per core, 1 is usually right; ``None`` leaves torch's default.
- Backend (``backend``, :data:`BACKENDS`): ``eager`` runs the module as written; ``jit`` (CPU,
  float32 only) folds every BatchNorm into the convolution before it, traces the network with
  the masked softmaxes into one channels_last TorchScript graph and freezes it (weights become
  constants), so a batch costs one call into the graph instead of some 300 dispatched
  operators; on one core of this machine's AMD EPYC it made 1.1-2.5x the evaluations per
  CPU-second of the eager path at every batch size from 1 to 256. ``cpp`` (CPU, float32 only)
  runs the folded network in the compiled core (``game._core.ConvNet``, game/cpp/convnet.h):
  no torch per batch, Winograd 3x3 convolutions, AVX2+FMA where the CPU has them, on the
  calling thread (one core: ``num_threads`` is torch's and does not apply); it is the fastest
  at every batch size measured, most of all at the small batches a timed player's search sends
  (benchmarks/cpu_backend.py; docs/results.md). Both give the eager path's priors and values to
  about 1e-6 (float rounding of the folded and transformed weights). ``auto``, the default, is
  ``cpp`` on a CPU computing float32 without ``compile`` that has AVX2+FMA (``jit`` on one
  without, :func:`auto_cpu_backend`) and ``eager`` elsewhere (CUDA, MPS, bf16). ``load_state``
  re-folds (and re-traces or re-packs: milliseconds), so weights still hot-swap.
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from checkerzero.network.checkpoint import CheckpointMeta, load_checkpoint
from checkerzero.network.model import CheckersNet, ResidualBlock, policy_gather_index
from checkerzero.network.precision import (
    BACKENDS,
    CPU_BACKENDS,
    PRECISIONS,
    cpu_has_native_bf16,
)
from game import _core
from game.encoding import NUM_WDL
from game.mcts import check_mask

logger = logging.getLogger(__name__)

_TRACE_BATCH = 8  # the example batch the jit backend traces with (any batch runs afterwards)
_WARMUP_BATCHES = (8, 8, 3, 1)  # batch sizes the jit graph runs once when built (all <= 8)


def select_device(spec: str | torch.device = "auto") -> torch.device:
    """``"auto"`` -> CUDA if available, else MPS, else CPU; anything else is passed to torch."""
    if isinstance(spec, torch.device):
        return spec
    if spec == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        return torch.device(spec)
    except RuntimeError as exc:
        raise ValueError(f"unknown device {spec!r} (use auto, cpu, cuda, cuda:N or mps)") from exc


def compute_dtype(precision: str, device: str | torch.device) -> torch.dtype:
    """The autocast dtype of a `precision` setting on `device`: ``auto`` is bf16 on CUDA and on
    a CPU with native bf16, float32 elsewhere; ``float32`` and ``bfloat16`` as named."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r} (use {', '.join(PRECISIONS)})")
    if precision == "float32":
        return torch.float32
    if precision == "bfloat16":
        return torch.bfloat16
    device = select_device(device)
    if device.type == "cuda" or (device.type == "cpu" and cpu_has_native_bf16()):
        return torch.bfloat16
    return torch.float32


def preferred_memory_format(device: torch.device) -> torch.memory_format:
    """channels_last on CUDA and CPU (faster, see the module docstring), default layout on MPS."""
    if device.type in ("cuda", "cpu"):
        return torch.channels_last
    return torch.contiguous_format


def fold_batchnorm(model: CheckersNet) -> CheckersNet:
    """A copy of ``model`` (in eval mode) with every BatchNorm folded into the convolution
    before it: the same function up to float rounding, a third fewer operators. The copy is for
    inference only (its state dict no longer has the BatchNorm keys)."""

    def fold(seq: nn.Sequential) -> nn.Sequential:
        layers, out = list(seq), []
        while layers:
            layer = layers.pop(0)
            if isinstance(layer, nn.Conv2d) and layers and isinstance(layers[0], nn.BatchNorm2d):
                layer = fuse_conv_bn_eval(layer, layers.pop(0))
            out.append(layer)
        return nn.Sequential(*out)

    folded = copy.deepcopy(model).eval()
    folded.stem = fold(folded.stem)
    folded.policy_head = fold(folded.policy_head)
    folded.value_head = fold(folded.value_head)
    folded.moves_left_head = None  # training only; forward never reads it
    for block in folded.tower:
        assert isinstance(block, ResidualBlock)
        block.conv1 = fuse_conv_bn_eval(block.conv1, block.bn1)
        block.conv2 = fuse_conv_bn_eval(block.conv2, block.bn2)
        block.bn1 = nn.Identity()
        block.bn2 = nn.Identity()
    return folded


class _MaskedHeads(nn.Module):
    """The network and both softmaxes as one module, so the jit backend traces them together:
    ``(planes, mask) -> (priors, wdl)`` exactly as ``NetworkInference.evaluate`` computes them."""

    def __init__(self, model: nn.Module, memory_format: torch.memory_format) -> None:
        super().__init__()
        self.model = model
        self.memory_format = memory_format

    def forward(
        self, planes: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logits, wdl_logits = self.model(planes.contiguous(memory_format=self.memory_format))
        priors = torch.softmax(logits.float().masked_fill(~mask, float("-inf")), dim=-1)
        return priors, torch.softmax(wdl_logits.float(), dim=-1)


def trace_for_cpu(model: CheckersNet) -> torch.jit.ScriptModule:
    """The jit backend's graph of ``model``: BatchNorm folded, channels_last, traced with the
    masked softmaxes (``(planes, mask) -> (priors, wdl)``, any batch size) and frozen, float32
    on the CPU."""
    cfg = model.config
    # channels_last: 1.1-1.5x the frozen NCHW graph's speed at batch 1-32 on one core here
    layout = torch.channels_last
    folded = fold_batchnorm(model).to("cpu", memory_format=layout).float()
    planes = torch.zeros(_TRACE_BATCH, cfg.in_planes, cfg.board_size, cfg.board_size)
    mask = torch.ones(_TRACE_BATCH, cfg.num_actions, dtype=torch.bool)
    # torch marks TorchScript deprecated in favour of torch.compile, which took minutes per
    # batch size to compile here; tracing takes tens of milliseconds and runs on every torch 2.x.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        traced = torch.jit.trace(
            _MaskedHeads(folded, layout).eval(), (planes, mask), check_trace=False
        )
        frozen = torch.jit.freeze(traced.eval())
        # TorchScript profiles and optimises a graph on its first calls (60-70 ms here): pay it
        # now, not in a timed player's first move; a few sizes, as a search sends.
        for n in _WARMUP_BATCHES:
            frozen(planes[:n].contiguous(), mask[:n].contiguous())
        return frozen


def auto_cpu_backend() -> str:
    """The backend ``auto`` means on a CPU computing float32: ``cpp`` where the compiled core
    runs its AVX2+FMA copy (x86-64 since about 2013), ``jit`` elsewhere, where the core's
    portable copy is correct but slower than torch (ARM, older x86)."""
    return "cpp" if _core.ConvNet.kernel() == "avx2+fma" else "jit"


def folded_layers(model: CheckersNet) -> list[tuple[np.ndarray, np.ndarray]]:
    """``model`` with BatchNorm folded, as float32 (weight, bias) pairs of every convolution and
    dense layer in the order the compiled core runs them: stem, tower, policy head, value head."""
    folded = fold_batchnorm(model).to("cpu").float()
    blocks = [conv for block in folded.tower for conv in (block.conv1, block.conv2)]
    heads = [
        layer
        for head in (folded.policy_head, folded.value_head)
        for layer in head
        if isinstance(layer, (nn.Conv2d, nn.Linear))
    ]
    layers = []
    for layer in [folded.stem[0], *blocks, *heads]:
        weight = layer.weight.detach()
        bias = layer.bias.detach() if layer.bias is not None else torch.zeros(weight.shape[0])
        layers.append((weight.contiguous().numpy(), bias.contiguous().numpy()))
    return layers


def compile_for_cpu(model: CheckersNet) -> _core.ConvNet:
    """The cpp backend's network of ``model`` (:func:`folded_layers` handed to the core)."""
    cfg = model.config
    return _core.ConvNet(
        cfg.board_size,
        cfg.in_planes,
        cfg.channels,
        cfg.blocks,
        cfg.policy_channels,
        cfg.value_channels,
        cfg.value_hidden,
        folded_layers(model),
        policy_gather_index(cfg.board_size).to(torch.int32).numpy(),
    )


class NetworkInference:
    """Runs a ``CheckersNet`` on batches of positions; see the module docstring for the choices."""

    def __init__(
        self,
        model: CheckersNet,
        device: str | torch.device = "auto",
        compile: bool = False,
        dtype: torch.dtype | str | None = None,
        *,
        num_threads: int | None = None,
        version: int = 0,
        backend: str = "auto",
    ) -> None:
        """Take ownership of ``model`` (moved to ``device``, put in eval mode).

        ``dtype`` is the compute dtype: ``None`` is :func:`compute_dtype`'s ``auto`` (bf16
        autocast on CUDA and on a CPU with native bf16, float32 elsewhere); a precision name
        (``"auto"``, ``"float32"``, ``"bfloat16"``) as there; ``torch.float32`` disables
        autocast; ``torch.bfloat16``/``torch.float16`` force autocast.

        ``backend``: ``auto``, ``eager``, ``jit`` or ``cpp`` (:data:`BACKENDS`; ``jit`` and
        ``cpp`` need the CPU, float32 arithmetic, which a precision of ``auto`` then means, and
        no ``compile``; ``auto`` is :func:`auto_cpu_backend` where one of them can run,
        ``eager`` elsewhere).
        """
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r} (use {', '.join(BACKENDS)})")
        if num_threads is not None:
            if num_threads < 1:
                raise ValueError(f"num_threads must be >= 1, got {num_threads}")
            torch.set_num_threads(num_threads)
        self.device = select_device(device)
        self.config = model.config
        self.num_actions = model.config.num_actions
        self.version = version
        cuda = self.device.type == "cuda"
        if backend in CPU_BACKENDS and dtype in (None, "auto"):
            dtype = torch.float32  # jit and cpp compute float32 (auto means that with them)
        if dtype is None or isinstance(dtype, str):
            dtype = compute_dtype(dtype or "auto", self.device)
        self._autocast_dtype = dtype
        self._use_autocast = dtype != torch.float32
        if backend == "auto":
            cpu_runs = self.device.type == "cpu" and not self._use_autocast and not compile
            backend = auto_cpu_backend() if cpu_runs else "eager"
        if backend in CPU_BACKENDS and (self.device.type != "cpu" or self._use_autocast or compile):
            raise ValueError(
                f"backend {backend} runs float32 on the CPU without compile; got device "
                f"{self.device}, dtype {dtype}, compile={compile}"
            )
        self.backend = backend
        self._memory_format = preferred_memory_format(self.device)
        self._pin = cuda
        model = model.to(self.device, memory_format=self._memory_format).eval()
        self._module = model  # the plain module: weights are loaded into it
        self._forward = torch.compile(model) if compile else model
        self._traced = trace_for_cpu(model) if backend == "jit" else None
        self._compiled = compile_for_cpu(model) if backend == "cpp" else None
        self._staging_planes: torch.Tensor | None = None
        self._staging_mask: torch.Tensor | None = None
        logger.info(
            "NetworkInference on %s, dtype %s, compile=%s, backend %s%s, threads=%d",
            self.device,
            dtype,
            compile,
            backend,
            f" ({_core.ConvNet.kernel()})" if backend == "cpp" else "",
            torch.get_num_threads(),
        )

    @property
    def compute_dtype(self) -> torch.dtype:
        """The dtype the network computes in (float32: no autocast)."""
        return self._autocast_dtype

    def load_state(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Copy new weights into the model in place (keeps device, layout and compiled graph)."""
        try:
            self._module.load_state_dict(state_dict, strict=True)
        except RuntimeError as exc:
            raise ValueError(f"weights version {version} do not fit the model ({exc})") from exc
        if self._traced is not None:
            self._traced = trace_for_cpu(self._module)  # the frozen graph holds the old weights
        if self._compiled is not None:
            self._compiled = compile_for_cpu(self._module)  # so does the compiled copy
        self.version = version
        logger.debug("loaded weights version %d", version)

    def _host_to_device(
        self, planes: np.ndarray, mask: np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self._pin:
            planes_t = torch.from_numpy(planes).to(self.device)
            mask_t = torch.from_numpy(mask).to(self.device)
            return planes_t.contiguous(memory_format=self._memory_format), mask_t
        n = len(planes)
        if self._staging_planes is None or self._staging_planes.shape[0] < n:
            # Grow to the next power of two so a slowly growing batch does not re-pin every call.
            capacity = 1 << max(n - 1, 1).bit_length()
            self._staging_planes = torch.empty(
                (capacity, *planes.shape[1:]), dtype=torch.float32
            ).pin_memory()
            self._staging_mask = torch.empty(
                (capacity, mask.shape[1]), dtype=torch.bool
            ).pin_memory()
        assert self._staging_mask is not None
        # Safe to overwrite: the previous call synchronised when it copied its results back.
        self._staging_planes[:n].numpy()[...] = planes
        self._staging_mask[:n].numpy()[...] = mask
        planes_t = self._staging_planes[:n].to(self.device, non_blocking=True)
        mask_t = self._staging_mask[:n].to(self.device, non_blocking=True)
        return planes_t.contiguous(memory_format=self._memory_format), mask_t

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.config
        expected = (cfg.in_planes, cfg.board_size, cfg.board_size)
        if not isinstance(planes, np.ndarray) or planes.dtype != np.float32:
            raise ValueError(
                f"planes must be a float32 array, got {getattr(planes, 'dtype', type(planes))}"
            )
        if planes.ndim != 4 or planes.shape[1:] != expected:
            raise ValueError(
                f"planes must be (N, {', '.join(map(str, expected))}), got {planes.shape}"
            )
        check_mask(mask, self.num_actions)
        if len(planes) != len(mask):
            raise ValueError(f"planes has {len(planes)} rows but mask has {len(mask)}")
        if len(planes) == 0:
            return np.zeros((0, self.num_actions), np.float32), np.zeros((0, NUM_WDL), np.float32)
        if self._compiled is not None:
            return self._compiled.evaluate(planes, mask)
        if self._traced is not None:
            with torch.no_grad():  # a frozen TorchScript graph: no inference_mode needed
                priors, wdl = self._traced(torch.from_numpy(planes), torch.from_numpy(mask))
            return priors.numpy(), wdl.numpy()
        with torch.inference_mode():
            planes_t, mask_t = self._host_to_device(planes, mask)
            with torch.autocast(
                device_type=self.device.type, dtype=self._autocast_dtype, enabled=self._use_autocast
            ):
                logits, wdl_logits = self._forward(planes_t)
            priors = torch.softmax(logits.float().masked_fill(~mask_t, float("-inf")), dim=-1)
            wdl = torch.softmax(wdl_logits.float(), dim=-1)
            return priors.cpu().numpy(), wdl.cpu().numpy()


def load_for_play(
    checkpoint: str | Path,
    size: int | None,
    *,
    device: str | torch.device = "auto",
    dtype: torch.dtype | str | None = None,
    threads: int | None = None,
    backend: str = "auto",
) -> tuple[NetworkInference, CheckpointMeta]:
    """A checkpoint's network ready to play: its inference (carrying the checkpoint's weights
    version; ``device``, ``dtype``, ``threads`` and ``backend`` as for ``NetworkInference``) and
    its header.

    The one way a player, a command line or the play server loads a network. ``size``: the
    board the game is played on; None when the caller plays whatever board the network plays
    (``inference.config.board_size``). ValueError naming the file when it is not a checkpoint
    (truncated, corrupt, foreign, non-finite) or its network plays another board than ``size``.
    """
    model, meta = load_checkpoint(checkpoint)
    side = model.config.board_size
    if size is not None and side != size:
        raise ValueError(f"{checkpoint} is a {side}x{side} network; this game is {size}x{size}")
    inference = NetworkInference(
        model,
        device=device,
        dtype=dtype,
        num_threads=threads,
        version=meta.version,
        backend=backend,
    )
    return inference, meta
