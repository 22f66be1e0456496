"""The `precision` settings (``selfplay.precision``, ``learner.precision``), the inference
backends, and whether this CPU computes bf16 in hardware; torch-free, so the config check and
the player specs can import it cheaply. ``checkerzero.network.inference`` turns a precision into
the dtype for a device (``compute_dtype``) and runs the backends (``NetworkInference``)."""

from __future__ import annotations

import functools
from pathlib import Path

PRECISIONS = ("auto", "float32", "bfloat16")
BACKENDS = ("auto", "eager", "jit", "cpp")  # how the network runs (NetworkInference's backend)
CPU_BACKENDS = ("jit", "cpp")  # the float32, CPU-only ones
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 CPU flags of hardware bf16 dot products


@functools.cache
def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU has bf16 dot-product instructions (x86 AVX512-BF16 or AMX-BF16, read from
    Linux's /proc/cpuinfo). Without them oneDNN emulates bf16, slower than float32; other systems
    (macOS, Windows, ARM) answer False, so they keep float32."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return any(flag in flags.split() for flag in NATIVE_BF16_FLAGS)
