"""Which weights files a run keeps under ``checkpoints/weights/``.

Every checkpoint also writes the network alone as ``weights/step_<step>.safetensors`` (a model
checkpoint: what ``evaluation.match`` and ``scripts/strength_curve.py`` take); the
``learner.keep_weights`` newest of those are kept. Every version the gate promoted (the run's
"best" networks) is kept whatever its age, as ``weights/best_v<version>.safetensors``: the exact
bytes the actors played with, written from the weights channel while it still holds them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from pathlib import Path

from checkerzero.network.checkpoint import decode_checkpoint
from checkerzero.run_files import STEP_PATTERN, best_name

logger = logging.getLogger(__name__)


def step_files(weights_dir: Path) -> list[Path]:
    """The per-checkpoint weights files, oldest step first."""
    if not weights_dir.is_dir():
        return []
    found = [
        (int(m.group(1)), p) for p in weights_dir.iterdir() if (m := STEP_PATTERN.match(p.name))
    ]
    return [p for _, p in sorted(found)]


def prune_weights(weights_dir: Path, keep: int) -> list[Path]:
    """Deletes the per-checkpoint weights files beyond the ``keep`` newest (0: keeps all);
    returns the files deleted. Promoted copies (``best_v*``) are never touched."""
    if keep <= 0:
        return []
    removed = step_files(weights_dir)[:-keep]
    for path in removed:
        path.unlink(missing_ok=True)
    if removed:
        logger.debug("deleted %d old weights files under %s", len(removed), weights_dir)
    return removed


def save_promoted(
    weights_dir: Path, versions: Collection[int], fetch: Callable[[int], bytes | None]
) -> list[Path]:
    """Writes each promoted version not on disk yet as ``best_v<version>`` from
    ``fetch(version)`` (its published checkpoint bytes; None when the store no longer holds
    them); returns the files written. Bytes that do not decode are logged and skipped."""
    written = []
    for version in sorted(set(versions)):
        path = weights_dir / best_name(version)
        if path.exists():
            continue
        data = fetch(version)
        if data is None:
            logger.warning("promoted weights v%d are no longer in the store; not kept", version)
            continue
        try:
            _, meta = decode_checkpoint(data, source=f"weights v{version}")
        except ValueError as e:
            logger.warning("promoted weights v%d do not decode (%s); not kept", version, e)
            continue
        weights_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        written.append(path)
        logger.debug("kept promoted weights v%d (step %d) as %s", version, meta.step, path)
    return written
