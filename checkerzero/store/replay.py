"""The replay store: a window of the newest self-play games in Redis, sampled uniformly by position.

Actors call `ReplayStore.add_game(record, n_positions)` once per finished game; the learner
keeps the window decoded locally and samples batches from it (`learner.mirror`), and paces
itself with `SampleRatio`. Values are the raw record bytes the caller gives (their layout
belongs to the record codec); nothing is pickled.

Redis layout: the keys ``{ns}:game:<id>``, ``{ns}:staging:<uuid>``, ``{ns}:lengths`` (the
window's game lengths, oldest first) and ``{ns}:meta`` (first_id, last_id: the window is the
ids first_id..last_id, contiguous; window_positions, the sum of the lengths; games_added and
positions_added, ever), named in ``checkerzero.store.keys``.

Game ids are consecutive integers from 1, assigned by the add script, so the window is an id
range and a list of lengths is enough to map a position to its game. Adding and evicting happen in
one MULTI (the record's SET, then a Lua script that names it, appends its length, updates the
counters and evicts), hence atomically, and reach the append-only file together. If the reply to
an add is lost and the client's retry sends it again, the game is stored twice (at least once).
Every counter lives in Redis, so a restarted learner or actor sees the same store.

Readers see the window through `window()` (its first id and the cumulative lengths of its games;
the store keeps a local copy of the lengths and fetches only what changed since the last call, in
one round trip) and `fetch(ids)` (pipelined MGETs; a game evicted meanwhile is simply absent).
The learner's mirror (`learner.mirror`) keeps the window decoded on top of those two calls.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.retry import Retry

from checkerzero.store import keys
from game.records import MIN_BYTES_PER_DECISION, MIN_RECORD_BYTES

logger = logging.getLogger(__name__)

SOCKET_TIMEOUT_S = 30.0  # a batch of 64 KB records is MBs; far above a healthy reply time
MAX_BACKOFF_S = 30.0  # cap of the exponential backoff between connection attempts
MGET_CHUNK = 256  # keys per MGET inside one pipeline: bounds one reply (256 x 64 KB = 16 MB)
STAGING_TTL_MS = 600_000  # a staged record outlives its transaction only if that failed: then
# it expires after 10 minutes instead of leaking (the add script makes the game key persistent)


class ReplayUnavailable(ConnectionError):
    """Redis could not be reached (after the retries); the message names the URL."""


class ReplayEmpty(LookupError):
    """The window holds no game yet."""


# Query parameters of a Redis URL that carry a credential (redis-py reads ``?password=``).
SECRET_QUERY_KEYS = frozenset({"password", "pass", "passwd", "pwd", "token", "auth"})
MASK = "***"


def redact_url(url: str) -> str:
    """`url` without any password in it, in either form redis-py accepts:
    ``redis://user:secret@host`` -> ``redis://user:***@host`` and ``?password=secret`` ->
    ``?password=***``."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is not None:
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{parts.username or ''}:{MASK}@{host}"
        if parts.port is not None:
            netloc += f":{parts.port}"
        parts = parts._replace(netloc=netloc)
    if parts.query:
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if any(k.lower() in SECRET_QUERY_KEYS for k, _ in query):
            masked = [(k, MASK if k.lower() in SECRET_QUERY_KEYS else v) for k, v in query]
            parts = parts._replace(query=urllib.parse.urlencode(masked, safe="*"))
    return urllib.parse.urlunsplit(parts)


def url_has_secret(url: str) -> bool:
    """Whether `url` carries a password (either form)."""
    return redact_url(url) != url


class _SharedRetry(Retry):
    """One retry policy for a client and every connection it opens (redis-py gives each a deep
    copy otherwise), so that `stop_retrying` reaches calls already retrying."""

    def __deepcopy__(self, memo: dict[int, Any]) -> _SharedRetry:
        return self


def stop_retrying(client: redis.Redis) -> None:
    """Makes every later failure of `client` (from `connect`) final, the calls retrying now
    included (after the wait they are in): for a Redis known to be gone for good."""
    retry = client.get_retry()
    if retry is not None:
        retry.update_retries(0)


def _describe(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    return f"redis://{kwargs.get('host')}:{kwargs.get('port')}/{kwargs.get('db', 0)}"


def connect(
    url: str,
    password: str | None = None,
    *,
    retries: int,
    backoff_s: float,
    socket_timeout_s: float = SOCKET_TIMEOUT_S,
) -> redis.Redis:
    """A client for `url` that answered PING, after at most `retries` retries.

    Waits `backoff_s`, 2*`backoff_s`, 4*`backoff_s`, ... (capped at MAX_BACKOFF_S) between
    attempts, then raises ReplayUnavailable naming the URL (never the password). A wrong password
    is not retried. The client itself retries each later command the same way.
    """
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    if backoff_s < 0:
        raise ValueError(f"backoff_s must be >= 0, got {backoff_s}")
    shown = redact_url(url)
    options: dict[str, Any] = {
        "password": password,
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": socket_timeout_s,
        "health_check_interval": 30,  # seconds idle before a connection is PINGed on reuse
    }
    try:
        client = redis.Redis.from_url(
            url,
            retry=_SharedRetry(
                ExponentialWithJitterBackoff(cap=MAX_BACKOFF_S, base=backoff_s), retries
            ),
            retry_on_error=[redis.ConnectionError, redis.TimeoutError],
            **options,
        )
    except ValueError as e:
        raise ValueError(f"bad replay URL {shown!r}: {e}") from None
    last_error: Exception | None = None
    for attempt in range(retries + 1):
        if attempt:
            delay = min(MAX_BACKOFF_S, backoff_s * 2 ** (attempt - 1))
            logger.warning(
                "replay store %s unreachable (%s); retry %d/%d in %.2f s",
                shown,
                last_error,
                attempt,
                retries,
                delay,
            )
            time.sleep(delay)
        # A probe without retries of its own, so that the attempts here are the only ones.
        probe = redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **options)
        try:
            probe.ping()
            return client
        except redis.AuthenticationError as e:
            client.close()
            problem = "refused the password" if password or "@" in url else "needs a password"
            raise ReplayUnavailable(f"replay store {shown} {problem}: {e}") from None
        except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
            last_error = e
        finally:
            probe.close()
    client.close()
    raise ReplayUnavailable(
        f"replay store {shown} unreachable after {retries + 1} attempts: {last_error}"
    )


# Runs in one MULTI after `SET staged record PX ttl`: the record itself never passes through Lua
# (a 64 KB script argument costs Redis ~150 us more per call than this RENAME, measured here).
_ADD_GAME = """
local staged, meta, lengths = KEYS[1], KEYS[2], KEYS[3]
local prefix = ARGV[1]
local n, window = tonumber(ARGV[2]), tonumber(ARGV[3])
local per, fixed = tonumber(ARGV[4]), tonumber(ARGV[5])
if n * per + fixed > redis.call('STRLEN', staged) then
  -- more positions than its bytes can hold: refused, counted, nothing else touched
  redis.call('DEL', staged)
  redis.call('HINCRBY', meta, 'games_refused', 1)
  return 0
end
local id = redis.call('HINCRBY', meta, 'last_id', 1)
redis.call('RENAME', staged, prefix .. id)
redis.call('PERSIST', prefix .. id)
redis.call('RPUSH', lengths, n)
redis.call('HINCRBY', meta, 'games_added', 1)
redis.call('HINCRBY', meta, 'positions_added', n)
local total = redis.call('HINCRBY', meta, 'window_positions', n)
local first = tonumber(redis.call('HGET', meta, 'first_id') or '1')
while total > window and first < id do
  local evicted = tonumber(redis.call('LPOP', lengths))
  redis.call('UNLINK', prefix .. first)
  total = redis.call('HINCRBY', meta, 'window_positions', -evicted)
  first = first + 1
end
redis.call('HSET', meta, 'first_id', first)
return id
"""

# Returns {first_id, last_id, from, lengths of ids from..last_id}; `from` is the caller's
# ARGV[1] unless that is outside first_id..last_id+1 (then first_id: the caller reloads).
_WINDOW = """
local meta, lengths = KEYS[1], KEYS[2]
local from = tonumber(ARGV[1])
local v = redis.call('HMGET', meta, 'first_id', 'last_id')
local first, last = tonumber(v[1] or '1'), tonumber(v[2] or '0')
if from < first or from > last + 1 then from = first end
return {first, last, from, redis.call('LRANGE', lengths, from - first, -1)}
"""


@dataclass(frozen=True)
class ReplayStats:
    window_positions: int  # positions in the window now
    window_games: int  # games in the window now
    games_added: int  # games ever added to this namespace
    positions_added: int  # positions ever added to this namespace
    games_refused: int = 0  # records refused: more positions claimed than their bytes hold


class ReplayStore:
    """A bounded window of game records in Redis. Thread-safe; one per process is enough."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        namespace: str = "cz",
        window_positions: int,
        record_bytes: tuple[int, int] = (MIN_RECORD_BYTES, MIN_BYTES_PER_DECISION),
    ):
        """``record_bytes``: (fixed, per position), the fewest bytes a record of n positions
        takes (the record codec's, game.records); a record claiming more positions than its
        bytes can hold is refused (`add_game`) and counted in `ReplayStats.games_refused`."""
        if window_positions < 1:
            raise ValueError(f"window_positions must be >= 1, got {window_positions}")
        if not namespace or any(ch in namespace for ch in "{}: \n"):
            raise ValueError(
                f"namespace must be non-empty without braces, colons or spaces: {namespace!r}"
            )
        self._client = client
        self.namespace = namespace
        self.window_positions = window_positions
        self.record_fixed_bytes, self.record_bytes_per_position = map(int, record_bytes)
        self._meta = keys.replay_meta_key(namespace)
        self._lengths = keys.replay_lengths_key(namespace)
        self._game_prefix = keys.replay_game_prefix(namespace)
        self._staging_prefix = keys.replay_staging_prefix(namespace)
        self._window_script = client.register_script(_WINDOW)
        self._lock = threading.Lock()  # guards the local copy of the window below
        self._cache_first = 1  # game id of _cache_lengths[0]
        self._cache_lengths = np.zeros(0, dtype=np.int64)

    def game_key(self, game_id: int) -> str:
        return f"{self._game_prefix}{game_id}"

    def add_game(self, record: bytes, n_positions: int) -> int:
        """Append one game; evict the oldest whole games beyond the window. Returns its id.

        ValueError when ``n_positions`` is more than ``record`` can hold (its length bounds it:
        `__init__`'s ``record_bytes``); the store is then untouched but for its refusal count.
        """
        if not isinstance(record, bytes | bytearray | memoryview):
            raise TypeError(f"record must be bytes, got {type(record).__name__}")
        if len(record) == 0:
            raise ValueError("record is empty")
        if n_positions < 1:
            raise ValueError(f"n_positions must be >= 1, got {n_positions}")
        staged = f"{self._staging_prefix}{uuid.uuid4().hex}"
        with self._unavailable_as_error("add a game"):
            pipe = self._client.pipeline(transaction=True)  # MULTI ... EXEC: all or nothing
            pipe.set(staged, bytes(record), px=STAGING_TTL_MS)
            # EVAL, not EVALSHA: a script missing after a Redis restart would fail inside the
            # transaction after the SET had run; Redis caches the compiled body either way.
            pipe.eval(
                _ADD_GAME,
                3,
                staged,
                self._meta,
                self._lengths,
                self._game_prefix,
                int(n_positions),
                self.window_positions,
                self.record_bytes_per_position,
                self.record_fixed_bytes,
            )
            _, game_id = pipe.execute()
        if int(game_id) == 0:
            raise ValueError(
                f"replay record of {len(record):,} bytes claims {n_positions:,} positions, more "
                f"than it can hold ({self.record_fixed_bytes} + "
                f"{self.record_bytes_per_position} bytes a position); refused"
            )
        return int(game_id)

    def get(self, game_id: int) -> bytes | None:
        """The record of `game_id`, or None when it is not (or no longer) in the window."""
        with self._unavailable_as_error("read a game"):
            value = self._client.get(self.game_key(game_id))
        return None if value is None else bytes(value)

    def stats(self) -> ReplayStats:
        with self._unavailable_as_error("read the counters"):
            v = self._client.hmget(
                self._meta,
                [
                    "first_id",
                    "last_id",
                    "window_positions",
                    "games_added",
                    "positions_added",
                    "games_refused",
                ],
            )
        first, last, window, games, positions, refused = (
            int(x) if x is not None else None for x in v
        )
        first = 1 if first is None else first
        last = 0 if last is None else last
        return ReplayStats(
            window_positions=window or 0,
            window_games=last - first + 1,
            games_added=games or 0,
            positions_added=positions or 0,
            games_refused=refused or 0,
        )

    def window(self) -> tuple[int, np.ndarray]:
        """First game id of the window and the cumulative lengths of its games (one round trip).

        The lengths are kept locally between calls, so only those of new games cross the wire.
        """
        with self._lock, self._unavailable_as_error("read the window"):
            cache_next = self._cache_first + len(self._cache_lengths)
            first, last, start, new = self._window_script(
                keys=[self._meta, self._lengths], args=[cache_next]
            )
            first, last, start = int(first), int(last), int(start)
            new_lengths = np.array([int(x) for x in new], dtype=np.int64)
            if start == cache_next and len(new_lengths) == last - cache_next + 1:
                keep = self._cache_lengths[max(0, first - self._cache_first) :]
                self._cache_lengths = np.concatenate((keep, new_lengths))
            else:  # the store was emptied or rewritten under us: take the window as it is
                self._cache_lengths = new_lengths
            self._cache_first = first
            if len(self._cache_lengths) != max(0, last - first + 1):
                raise RuntimeError(
                    f"replay store {self.namespace!r} is inconsistent: ids {first}..{last} but "
                    f"{len(self._cache_lengths)} lengths"
                )
            return first, np.cumsum(self._cache_lengths)

    def fetch(self, game_ids: Sequence[int]) -> dict[int, bytes]:
        """Records of the given games (absent ones left out), in one pipelined round trip."""
        pipe = self._client.pipeline(transaction=False)
        for lo in range(0, len(game_ids), MGET_CHUNK):
            pipe.mget([self.game_key(g) for g in game_ids[lo : lo + MGET_CHUNK]])
        with self._unavailable_as_error("read games"):
            values = [v for chunk in pipe.execute() for v in chunk]
        return {g: bytes(v) for g, v in zip(game_ids, values, strict=True) if v is not None}

    @contextlib.contextmanager
    def _unavailable_as_error(self, what: str) -> Iterator[None]:
        """Turns a connection failure (after the client's own retries) into ReplayUnavailable."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise ReplayUnavailable(
                f"replay store {_describe(self._client)}: cannot {what}: {e}"
            ) from e


class SampleRatio:
    """Paces training against self-play: at most `ratio` samples per position ever added.

    With `positions_added` from `ReplayStore.stats()` and the learner's own count of samples
    trained on (kept in its checkpoint), `allowed()` is how many samples it may draw now;
    `should_wait()` says to wait for self-play rather than train another batch. Until the store
    has `min_positions` positions no sample is allowed (a first batch from a handful of games
    would be trained on over and over).
    """

    def __init__(self, ratio: float, *, min_positions: int = 0):
        if not (ratio > 0 and math.isfinite(ratio)):
            raise ValueError(f"sample ratio must be a positive finite number, got {ratio}")
        if min_positions < 0:
            raise ValueError(f"min_positions must be >= 0, got {min_positions}")
        self.ratio = ratio
        self.min_positions = min_positions

    def allowed(self, positions_added: int, samples_drawn: int) -> int:
        """Samples the learner may still draw given the data so far (never negative)."""
        if positions_added < max(self.min_positions, 1):
            return 0
        return max(0, math.floor(self.ratio * positions_added) - samples_drawn)

    def should_wait(self, positions_added: int, samples_drawn: int, batch_size: int) -> bool:
        """True when one more batch of `batch_size` would exceed the ratio."""
        return self.allowed(positions_added, samples_drawn) < batch_size
