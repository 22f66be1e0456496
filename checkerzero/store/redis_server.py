"""A private `redis-server` for one run: loopback only, password, append-only file in the run dir.

`python -m learner` with no `replay.url` starts one of these and stops it on exit; a cluster
deployment never does (it points `replay.url` at its own Redis and takes the password from the
environment). Layout under `<run_dir>/redis/`:

    password          the generated password (mode 0600), reused on restart
    redis.conf        the server's settings (mode 0600: it holds the password, which therefore
                      never appears on a command line or in `ps`)
    appendonlydir/    Redis's append-only file; a restart on the same dir replays it
    redis.log         the server's log
    lock              held (flock) while a server of ours runs on this dir

The server is a child process: `stop()` (or leaving the `with` block, or interpreter exit) sends
SHUTDOWN, which fsyncs the append-only file, and kills it only if it does not exit in time. It
dies with its parent: on Linux it gets SIGTERM (which Redis treats as SHUTDOWN) when the thread
that started it ends, so a SIGKILLed learner leaves no server behind. `watch()` restarts a server
that died while the run goes on: same port, same password, the same append-only file replayed;
when that fails it hands the error to the caller's callback.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from checkerzero.run_files import REDIS_DIR

logger = logging.getLogger(__name__)

REDIS_SERVER_ENV = "CHECKERZERO_REDIS_SERVER"
LOOPBACK = "127.0.0.1"
PASSWORD_BYTES = 32  # secrets.token_urlsafe(32): 256 bits, 43 URL-safe characters
START_TIMEOUT_S = 30.0  # replaying a large append-only file on restart can take seconds
STOP_TIMEOUT_S = 15.0  # SHUTDOWN fsyncs the append-only file; a slow disk may need a while
PING_INTERVAL_S = 0.02  # a fresh server answers in ~70 ms here; poll finer than that
PORT_ATTEMPTS = 3  # a free port found by bind(0) can be taken before redis binds it: retry
WATCH_INTERVAL_S = 0.5  # how often `watch` looks at the server; clients' retries (0.5 s, 1 s, ..)
# outlast a death noticed this late plus a restart (~70 ms, more with a large append-only file)
RESTART_MIN_UPTIME_S = 10.0  # a server that dies again this soon after a restart is not
# restarted again: something kills it or its data, and restarting in a loop would hide that
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>: the signal a child gets when its parent thread ends
PASSWORD_PATTERN = re.compile(r"[A-Za-z0-9_\-]{16,}")  # what token_urlsafe writes, 16+ chars
INSTALL_HINT = (
    "install it (Debian/Ubuntu: `apt-get install redis-server`; macOS: `brew install redis`), "
    f"or set {REDIS_SERVER_ENV} or replay.redis_server to its path, "
    "or set replay.url to an existing Redis"
)


class RedisServerError(RuntimeError):
    """The embedded redis-server could not be found, started or stopped."""


def find_redis_server(binary: str | os.PathLike[str] | None = None) -> str:
    """Path of the redis-server to run: `binary`, else $CHECKERZERO_REDIS_SERVER, else PATH."""
    for source, candidate in (
        ("the binary argument", binary),
        (f"${REDIS_SERVER_ENV}", os.environ.get(REDIS_SERVER_ENV) or None),
    ):
        if candidate is None:
            continue
        path = Path(candidate).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise RedisServerError(f"redis-server from {source} ({path}) is not an executable file")
        return str(path)
    found = shutil.which("redis-server")
    if found is None:
        raise RedisServerError(f"redis-server not found on PATH: {INSTALL_HINT}")
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _read_or_create_password(path: Path) -> str:
    """The password stored at `path`, or a new one written there with mode 0600."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_password(path)
    password = secrets.token_urlsafe(PASSWORD_BYTES)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(password + "\n")
    return password


def _read_password(path: Path) -> str:
    if path.stat().st_mode & 0o077:
        raise RedisServerError(f"{path} is readable by other users; chmod 600 it or delete it")
    password = path.read_text(encoding="ascii").strip()
    if not PASSWORD_PATTERN.fullmatch(password):
        raise RedisServerError(
            f"{path} does not hold a password made of URL-safe characters; delete it to "
            "generate a new one"
        )
    return password


def _config_text(data_dir: Path, port: int, password: str) -> str:
    """The redis.conf for one start (quoted values; Redis unescapes them like a shell)."""
    settings = [
        ("bind", LOOPBACK),  # never listen beyond loopback
        ("protected-mode", "yes"),
        ("port", str(port)),
        ("requirepass", password),
        ("dir", str(data_dir)),
        ("logfile", str(data_dir / "redis.log")),
        ("daemonize", "no"),  # our child: we own its lifetime
        ("appendonly", "yes"),  # every write is logged; a restart replays it
        ("appendfsync", "everysec"),  # at most ~1 s of writes lost on a power cut
        ("save", ""),  # no RDB snapshots: the append-only file is the persistence
    ]
    return "".join(f"{key} {_quote(value)}\n" for key, value in settings)


def _quote(value: str) -> str:
    """A redis.conf argument: double-quoted, with backslash and quote escaped."""
    if any(ch in value for ch in "\n\r\0"):
        raise ValueError(f"redis.conf values cannot contain line breaks or NUL: {value!r}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _local_client(port: int, password: str, *, timeout_s: float) -> redis.Redis:
    """A client for our own server that never retries by itself (the callers poll or give up)."""
    return redis.Redis(
        host=LOOPBACK,
        port=port,
        password=password,
        socket_connect_timeout=timeout_s,
        socket_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
    )


def _dies_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` giving the child SIGTERM when the thread that started it ends (Linux's
    PR_SET_PDEATHSIG; Redis treats SIGTERM as SHUTDOWN and flushes its append-only file); None
    where there is no such call (the next start shuts down a server a killed run left)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: no signal would come
            os._exit(1)

    return preexec


def _how_it_ended(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name}"
    return f"exit status {returncode}"


def _answers(port: int) -> bool:
    """Whether anything accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((LOOPBACK, port)) == 0


class EmbeddedRedis:
    """A redis-server child process for one run directory.

    Usage: `with EmbeddedRedis(run_dir) as server: client = connect(server.url, server.password)`.
    Start it from a thread that outlives it (the main thread, or the one that stops it): on Linux
    the server gets SIGTERM when that thread ends.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        binary: str | os.PathLike[str] | None = None,
        port: int | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        stop_timeout_s: float = STOP_TIMEOUT_S,
    ) -> None:
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"port must be in 1..65535, got {port}")
        self._binary = binary
        self._requested_port = port
        self._start_timeout_s = start_timeout_s
        self._stop_timeout_s = stop_timeout_s
        # Absolute: redis-server changes into `dir` before it opens the (relative) logfile.
        self.data_dir = Path(run_dir).resolve() / REDIS_DIR
        self._port: int | None = None
        self._password: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._lock_file: int | None = None
        self._state = threading.RLock()  # the process and port, between `watch` and `stop`
        self._stopping = False  # set by stop(): the watcher restarts nothing from then on
        self._watcher: threading.Thread | None = None
        self._watch_done = threading.Event()
        self._restarted_at: float | None = None  # monotonic time of the watcher's last restart
        self.restarts = 0  # times the watcher brought the server back

    # -- properties -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._port is None:
            raise RedisServerError("the embedded redis-server is not running")
        return self._port

    @property
    def url(self) -> str:
        """redis://127.0.0.1:PORT/0 (no password in it: pass `password` separately)."""
        return f"redis://{LOOPBACK}:{self.port}/0"

    @property
    def password(self) -> str:
        if self._password is None:
            raise RedisServerError("the embedded redis-server has not been started")
        return self._password

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> EmbeddedRedis:
        """Start the server and wait until it answers PING (it replays its append-only file)."""
        if self.running:
            return self
        self._stopping = False
        executable = find_redis_server(self._binary)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            self._password = _read_or_create_password(self.data_dir / "password")
            self._stop_orphan()
            attempts = 1 if self._requested_port is not None else PORT_ATTEMPTS
            for attempt in range(1, attempts + 1):
                port = self._requested_port or free_port()
                if self._launch(executable, port):
                    break
                if attempt == attempts:
                    raise RedisServerError(
                        f"redis-server could not start on {LOOPBACK}:{port}: "
                        f"see {self.data_dir / 'redis.log'}"
                    )
                logger.info("redis-server did not start on port %d; trying another", port)
        except BaseException:
            self._unlock()
            raise
        atexit.register(self.stop)
        logger.info(
            "redis-server %s pid %d on %s, data in %s",
            executable,
            self.pid,
            self.url,
            self.data_dir,
        )
        return self

    def _stop_orphan(self) -> None:
        """Shut down a server that a killed run left on this dir (SIGKILL gave it no chance).

        Two servers must never append to one file. The last redis.conf names the old port; a
        server there that knows our password and serves our dir is that orphan.
        """
        conf = self.data_dir / "redis.conf"
        if not conf.exists():
            return
        match = re.search(r'^port "(\d+)"$', conf.read_text(encoding="utf-8"), re.MULTILINE)
        if match is None:
            return
        port = int(match.group(1))
        client = _local_client(port, self.password, timeout_s=self._stop_timeout_s)
        try:
            try:
                served = Path(client.config_get("dir")["dir"])
            except redis.RedisError:
                return  # nothing there, or not ours
            if served.resolve() != self.data_dir.resolve():
                return
            logger.warning("shutting down redis-server left running on port %d on %s", port, served)
            try:
                client.shutdown()  # flushes its append-only file
            except redis.RedisError as e:
                raise RedisServerError(
                    f"a redis-server left running on port {port} serves {served} and refused "
                    f"SHUTDOWN ({e}); stop it before starting another"
                ) from e
        finally:
            client.close()
        deadline = time.monotonic() + self._stop_timeout_s
        while _answers(port):
            if time.monotonic() > deadline:
                raise RedisServerError(f"the redis-server left on port {port} does not exit")
            time.sleep(PING_INTERVAL_S)

    def _launch(self, executable: str, port: int) -> bool:
        """Run the server on `port`; True once it answers PING, False if it exited."""
        conf = self.data_dir / "redis.conf"
        conf.unlink(missing_ok=True)
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(_config_text(self.data_dir, port, self.password))
        process = subprocess.Popen(
            [executable, str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C in the terminal goes to us; we shut it down
            preexec_fn=_dies_with_parent(),  # and a SIGKILL of ours takes it down too
        )
        self._process, self._port = process, port
        client = _local_client(port, self.password, timeout_s=1.0)
        deadline = time.monotonic() + self._start_timeout_s
        try:
            while True:
                if process.poll() is not None:
                    self._process, self._port = None, None
                    return False
                try:
                    if client.ping():
                        return True
                except redis.BusyLoadingError:
                    pass  # replaying the append-only file
                except redis.AuthenticationError as e:
                    self._kill()
                    raise RedisServerError(f"something else answers on port {port}: {e}") from e
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                if time.monotonic() > deadline:
                    self._kill()
                    raise RedisServerError(
                        f"redis-server did not answer PING within {self._start_timeout_s} s: "
                        f"see {self.data_dir / 'redis.log'}"
                    )
                time.sleep(PING_INTERVAL_S)
        finally:
            client.close()

    # -- watching -----------------------------------------------------------------------------
    def watch(
        self,
        on_failure: Callable[[RedisServerError], None],
        *,
        interval_s: float = WATCH_INTERVAL_S,
    ) -> None:
        """Restarts the server whenever it dies, until `stop()`: on the same port with the same
        password, replaying its append-only file, so clients that retry find their data again;
        one warning line per restart. When a restart fails (or the server dies again within
        RESTART_MIN_UPTIME_S of one) it calls `on_failure` once, from the watching thread, with
        an error whose message is one line, and watches no more.

        The watching thread starts the new server, so it lives until `stop()` (a server dies
        with the thread that started it)."""
        if self._watcher is not None and self._watcher.is_alive():
            return
        self._watch_done = threading.Event()
        self._watcher = threading.Thread(
            target=self._watch, args=(on_failure, interval_s), name="redis-watch", daemon=True
        )
        self._watcher.start()

    def _watch(self, on_failure: Callable[[RedisServerError], None], interval_s: float) -> None:
        while not self._watch_done.wait(interval_s):
            with self._state:
                process = self._process
                if self._stopping or process is None or process.poll() is None:
                    continue
                error = self._restart(process)
            if error is not None:
                on_failure(error)
                return

    def _restart(self, dead: subprocess.Popen[bytes]) -> RedisServerError | None:
        """A new server in place of `dead` (same port); the error if there is none."""
        port, how = self.port, _how_it_ended(dead.returncode)
        now = time.monotonic()
        if self._restarted_at is not None and now - self._restarted_at < RESTART_MIN_UPTIME_S:
            self._process, self._port = None, None
            return RedisServerError(
                f"the private redis-server on port {port} died again ({how}) "
                f"{now - self._restarted_at:.0f} s after a restart: see "
                f"{self.data_dir / 'redis.log'}"
            )
        try:
            started = self._launch(find_redis_server(self._binary), port)
        except RedisServerError as e:
            self._process, self._port = None, None
            return RedisServerError(
                f"the private redis-server on port {port} died ({how}) and could not be "
                f"restarted: {e}"
            )
        if not started:
            return RedisServerError(
                f"the private redis-server on port {port} died ({how}) and could not be "
                f"restarted on that port: see {self.data_dir / 'redis.log'}"
            )
        self._restarted_at = time.monotonic()
        self.restarts += 1
        logger.warning(
            "the private redis-server (pid %d) died (%s); restarted it on %s from its "
            "append-only file (pid %d)",
            dead.pid,
            how,
            self.url,
            self.pid,
        )
        return None

    def stop(self) -> None:
        """SHUTDOWN (fsyncs the append-only file); SIGTERM, then SIGKILL, if it hangs."""
        with self._state:
            self._stopping = True  # the watcher must not bring back what SHUTDOWN ends
            process = self._process
        try:
            self._stop_process(process)
        finally:
            self._watch_done.set()
            watcher = self._watcher
            if watcher is not None and watcher is not threading.current_thread():
                watcher.join()
            self._watcher = None

    def _stop_process(self, process: subprocess.Popen[bytes] | None) -> None:
        atexit.unregister(self.stop)
        if process is None:  # never started, or died and not restarted: only the lock to free
            self._unlock()
            return
        if process.poll() is None:
            client = _local_client(self.port, self.password, timeout_s=self._stop_timeout_s)
            try:
                client.shutdown()
            except redis.RedisError as e:
                logger.warning("SHUTDOWN failed (%s); sending SIGTERM", e)
                process.terminate()  # redis treats SIGTERM as SHUTDOWN, AOF flush included
            finally:
                client.close()
            try:
                process.wait(timeout=self._stop_timeout_s)
            except subprocess.TimeoutExpired:
                logger.error("redis-server pid %d did not exit; killing it", process.pid)
                self._kill()
        logger.info("redis-server pid %d stopped (exit %s)", process.pid, process.returncode)
        self._process, self._port = None, None
        self._unlock()

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process, self._port = None, None

    def _lock(self) -> None:
        """Refuse to run two servers on one append-only file."""
        fd = os.open(self.data_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RedisServerError(
                f"another embedded redis-server is running on {self.data_dir}"
            ) from None
        self._lock_file = fd

    def _unlock(self) -> None:
        if self._lock_file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            os.close(self._lock_file)
            self._lock_file = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
