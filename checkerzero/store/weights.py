"""Weights publication: versioned network weights that actors pick up between moves.

The channel is the run's Redis, beside the replay store, so it reaches every node of a cluster
and survives the restart of any process. Weights are the checkpoint bytes of
`checkerzero.network.checkpoint.encode_checkpoint` (safetensors + JSON header, never pickled).
Keys (named in ``checkerzero.store.keys``):

- ``<ns>:weights:<version>``  the bytes of each published version (the newest few are kept)
- ``<ns>:weights:latest``     the newest version number the learner published
- ``<ns>:weights:best``       the version the gate promoted (what actors play with when gating)
- ``<ns>:weights:meta:<version>``  JSON of where the run stood when it was published
  (``step``, ``positions`` of self-play so far, ``t`` unix seconds); absent for weights
  published before the field existed, so readers treat every key as optional

Actors poll one small integer per move; the bytes travel only when the version they follow
changes (STYLE.md: weights travel by version, not to every actor every game).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis

from checkerzero.store.keys import weights_key

logger = logging.getLogger(__name__)

KEEP_VERSIONS = (
    8  # published versions kept in Redis (the evaluator may still be testing older ones)
)


@dataclass(frozen=True)
class Published:
    version: int
    data: bytes


class WeightsChannel:
    """Publish (learner, evaluator) and follow (actors) versioned weights in Redis."""

    def __init__(
        self, client: redis.Redis, *, namespace: str = "cz", follow: str = "latest"
    ) -> None:
        if follow not in ("latest", "best"):
            raise ValueError(f"weights channel follows 'latest' or 'best', not {follow!r}")
        self._r = client
        self._ns = namespace
        self._follow = follow
        self._seen = -1

    def _key(self, name: str | int) -> str:
        return weights_key(self._ns, name)

    def publish(self, data: bytes, version: int, meta: Mapping[str, Any] | None = None) -> None:
        """Stores ``data`` as ``version`` and makes it the latest (versions must increase);
        ``meta`` (JSON values: step, positions, t) goes beside it for the evaluator."""
        latest = self.version("latest")
        if version <= latest:
            raise ValueError(f"weights version {version} is not above the latest {latest}")
        pipe = self._r.pipeline(transaction=True)
        pipe.set(self._key(version), data)
        if meta is not None:
            pipe.set(self._key(f"meta:{version}"), json.dumps(dict(meta), sort_keys=True))
        pipe.set(self._key("latest"), version)
        pipe.delete(self._key(version - KEEP_VERSIONS))
        pipe.delete(self._key(f"meta:{version - KEEP_VERSIONS}"))
        pipe.execute()
        logger.debug("published weights version %d (%d bytes)", version, len(data))

    def promote(self, version: int) -> None:
        """Makes a published version the one actors play with under gating."""
        if not self._r.exists(self._key(version)):
            raise ValueError(f"cannot promote weights version {version}: not in the store")
        self._r.set(self._key("best"), version)
        # Keep the promoted bytes even when they age out of the newest-KEEP_VERSIONS window.
        self._r.copy(self._key(version), self._key("best_data"), replace=True)

    def version(self, which: str = "latest") -> int:
        value = self._r.get(self._key(which))
        return int(value) if value is not None else -1

    def meta(self, version: int) -> dict[str, Any]:
        """What ``publish`` stored beside ``version`` ({} when nothing, or nothing readable)."""
        raw = self._r.get(self._key(f"meta:{version}"))
        try:
            value = json.loads(raw) if raw is not None else {}
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def get(self, version: int) -> bytes | None:
        return self._r.get(self._key(version))

    def best_data(self) -> bytes | None:
        """The bytes of the promoted version, kept even after they age out of the window."""
        return self._r.get(self._key("best_data"))

    def oldest_stored(self) -> int | None:
        """The oldest published version whose bytes are still stored, None with none."""
        latest = self.version("latest")
        if latest < 0:
            return None
        return next(
            (
                v
                for v in range(max(0, latest - KEEP_VERSIONS), latest + 1)
                if self._r.exists(self._key(v))
            ),
            None,
        )

    def poll(self) -> Published | None:
        """The followed weights if their version changed since the last poll, else None."""
        version = self.version(self._follow)
        if version < 0 or version == self._seen:
            return None
        data = self._r.get(self._key(version))
        if data is None and self._follow == "best":
            data = self._r.get(self._key("best_data"))
        if data is None:  # evicted between the two reads; the next poll sees a newer one
            return None
        self._seen = version
        return Published(version, data)
