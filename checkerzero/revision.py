"""The code's revision, for run records and shipped tables: ``git rev-parse HEAD``, with
``-dirty`` when the work tree has local changes, or ``unknown`` outside a git checkout (an
installed wheel)."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT_TIMEOUT_S = 5  # a git that hangs (a locked index on a network drive) must not stall a run


def _git(*args: str) -> str:
    """Stdout of a git command run in this package's folder."""
    here = Path(__file__).resolve().parent
    done = subprocess.run(
        ["git", *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, cwd=here
    )
    return done.stdout.strip()


def git_revision() -> str:
    """The revision of the checkout this package lives in."""
    try:
        rev = _git("rev-parse", "HEAD") or "unknown"
        dirty = rev != "unknown" and bool(_git("status", "--porcelain"))
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev + ("-dirty" if dirty else "")


__all__ = ["git_revision"]
