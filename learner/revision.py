"""The code's revision, for run records and shipped tables: ``git rev-parse HEAD``, with
``-dirty`` when the work tree has local changes, or ``unknown`` outside a git checkout (an
installed wheel)."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT_TIMEOUT_S = 5  # a git that hangs (a locked index on a network drive) must not stall a run


def git_revision() -> str:
    """The revision of the checkout this package lives in."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            cwd=here,
        )
        status = subprocess.run(
            ["git", "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            cwd=here,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    rev = head.stdout.strip() or "unknown"
    return rev + ("-dirty" if rev != "unknown" and status.stdout.strip() else "")


__all__ = ["git_revision"]
