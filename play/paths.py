"""The folders the server may read, and the check every path from a request goes through.

A request names a network or a run file by a path *relative to a root* (the runs folder or the
models folder), and every message about a path names it so, never by its absolute path. The
path is refused when it is absolute, has a ``..`` or empty part, a backslash or a NUL, or
resolves (symbolic links followed) outside its root. Nothing here ever writes.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from checkerzero.network.header import read_model_shape

CHECKPOINT_SUFFIX = ".safetensors"
MAX_PATH_CHARS = 400  # a longer relative path is not one a root holds
MAX_REMEMBERED_FILES = 1000  # network files whose kind is remembered (forgotten all at once)
_is_network: dict[tuple[str, int, int], bool] = {}  # by (path, mtime, size)


class PathRefused(ValueError):
    """A path from a request that names nothing the server may read."""


class NotFound(ValueError):
    """A well-formed path that names no file or run."""


def _clean(text: str, what: str) -> PurePosixPath:
    if not isinstance(text, str) or not text.strip():
        raise PathRefused(f"{what}: empty path")
    if len(text) > MAX_PATH_CHARS:
        raise PathRefused(f"{what}: path longer than {MAX_PATH_CHARS} characters")
    if "\x00" in text or "\\" in text:
        raise PathRefused(f"{what} {text!r}: NUL and backslash are not allowed")
    path = PurePosixPath(text)
    if path.is_absolute() or text.startswith("~"):
        raise PathRefused(
            f"{what} {text!r}: absolute paths are not accepted; give a path "
            "relative to the runs or models folder"
        )
    if any(part in ("..", ".", "") for part in text.split("/")):
        raise PathRefused(f"{what} {text!r}: '..', '.' and empty parts are not allowed")
    return path


class Roots:
    """The runs folder and the models folder, resolved once."""

    def __init__(self, runs: str | Path, models: str | Path) -> None:
        self.runs = Path(runs).resolve()
        self.models = Path(models).resolve()

    def _inside(self, root: Path, rel: PurePosixPath) -> Path | None:
        candidate = (root / rel).resolve()
        if candidate != root and not candidate.is_relative_to(root):
            return None
        return candidate

    def checkpoint(self, text: str) -> Path:
        """The network file that ``text`` names, looked up in the models folder, then in runs."""
        rel = _clean(text, "network")
        if not rel.name.endswith(CHECKPOINT_SUFFIX):
            raise PathRefused(f"network {text!r}: only {CHECKPOINT_SUFFIX} checkpoints are loaded")
        escaped = False
        for root in (self.models, self.runs):
            path = self._inside(root, rel)
            if path is None:
                escaped = escaped or (root / rel).exists()
                continue
            if path.is_file():
                return path
        if escaped:
            raise PathRefused(f"network {text!r} leads outside the models and runs folders")
        raise NotFound(f"network {text!r}: no such file in the models or runs folder")

    def run(self, name: str) -> Path:
        """The folder of the run ``name`` (one path component) inside the runs folder."""
        rel = _clean(name, "run")
        if len(rel.parts) != 1:
            raise PathRefused(f"run {name!r}: a run is named by its folder, without '/'")
        path = self._inside(self.runs, rel)
        if path is None:
            raise PathRefused(f"run {name!r} leads outside the runs folder")
        if not path.is_dir():
            raise NotFound(f"run {name!r}: no such run in the runs folder")
        return path

    def run_file(self, name: str, rel_text: str) -> Path:
        """A file inside the run ``name``; refused if it resolves outside that run's folder."""
        run = self.run(name)
        rel = _clean(rel_text, "file")
        path = self._inside(run, rel)
        if path is None:
            raise PathRefused(f"file {rel_text!r} leads outside run {name!r}")
        if not path.is_file():
            raise NotFound(f"file {rel_text!r}: not in run {name!r}")
        return path

    def relative(self, path: Path) -> str:
        """How a request names ``path`` (relative to the models folder, else to runs)."""
        path = path.resolve()
        for root in (self.models, self.runs):
            if path.is_relative_to(root):
                return path.relative_to(root).as_posix()
        raise PathRefused(f"{path.name}: outside the models and runs folders")


def is_network(path: Path) -> bool:
    """Whether ``path`` is a network checkpoint (its header says so), not another safetensors
    file such as the alpha-beta's learned evaluation: only those are offered to play."""
    try:
        st = path.stat()
    except OSError:
        return False
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _is_network:
        if len(_is_network) >= MAX_REMEMBERED_FILES:
            _is_network.clear()
        try:
            read_model_shape(path)
            _is_network[key] = True
        except (OSError, ValueError, RecursionError):
            _is_network[key] = False
    return _is_network[key]


__all__ = ["CHECKPOINT_SUFFIX", "NotFound", "PathRefused", "Roots", "is_network"]
