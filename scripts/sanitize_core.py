"""Builds the compiled core with AddressSanitizer and UBSan and runs the core's tests against it.

The build (CMake option CHECKERZERO_SANITIZE=ON) goes into a scratch folder, never into the
installed package. The tests then run in a child Python that imports `game` from a copy of the
package holding the sanitized `_core` (the editable install's own finder is taken out of the
way), with the ASan runtime preloaded: Python is not instrumented, so the runtime must come
first, and libstdc++ with it (ASan wraps __cxa_throw and must find the real one when it starts,
or the core's first C++ exception aborts). Any out-of-bounds access, use after free, signed
overflow, bad shift, etc. in the core aborts the run; the sanitizers' reports are written to
files in the work folder (pytest would swallow them on stderr) and printed at the end. Leak
checking is off: CPython keeps memory until exit by design.

    python scripts/sanitize_core.py                      # build in a temporary folder, run
    python scripts/sanitize_core.py --build-dir /tmp/san -- tests/test_fuzz_core.py   # pytest args

Exit status 0 when the build succeeds and every test passes with no sanitizer report.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# The core's own tests: rules, shallow perft, actions and encoding, the search, alpha-beta,
# notation (whose parsers feed the core) and the fuzz suite. The default lane of each (no slow).
CORE_TESTS = (
    "tests/test_rules.py",
    "tests/test_perft.py",
    "tests/test_actions.py",
    "tests/test_mcts.py",
    "tests/test_alphabeta.py",
    "tests/test_notation.py",
    "tests/test_notation_strict.py",
    "tests/test_core_inputs.py",
    "tests/test_fuzz_core.py",
)
# Sanitizer settings for the child: leaks off (see above), reports with stack traces into files
# named <log_path>.<pid>, and the first finding ends the process with a non-zero status.
ASAN_OPTIONS = "detect_leaks=0:abort_on_error=1:halt_on_error=1:symbolize=1:log_path={log}"
UBSAN_OPTIONS = "print_stacktrace=1:halt_on_error=1:log_path={log}"
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "SUMMARY: UndefinedBehavior")

# Run in the child before pytest: import `game` from the sanitized copy, and prove it.
BOOTSTRAP = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("_editable")]
sys.path[:0] = [{package!r}, {repo!r}]
import game._core
assert game._core.__file__.startswith({package!r}), game._core.__file__
with open("/proc/self/maps") as maps:
    assert "libasan" in maps.read(), "the ASan runtime is not loaded"
print("sanitized core:", game._core.__file__, flush=True)
import pytest
sys.exit(pytest.main({args!r}))
"""


def runtime(library: str, compiler: str = "c++") -> Path:
    """A shared runtime library of the compiler (libasan.so, libstdc++.so), links resolved."""
    out = subprocess.run(
        [compiler, f"-print-file-name={library}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = Path(out)
    if not path.is_absolute() or not path.exists():
        raise FileNotFoundError(f"{compiler} has no shared {library} (got {out!r})")
    return path.resolve()


def build(build_dir: Path, jobs: int = 2) -> Path:
    """Configures and builds the sanitized `_core` in build_dir; returns the module's path."""
    configure = [
        "cmake", "-S", str(REPO_ROOT), "-B", str(build_dir), "-G", "Ninja",
        "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DCHECKERZERO_SANITIZE=ON",
        f"-DPython_EXECUTABLE={sys.executable}",
    ]  # fmt: skip
    subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["cmake", "--build", str(build_dir), "--target", "_core", "-j", str(jobs)], check=True
    )
    (module,) = build_dir.glob("_core*.so")
    return module


def stage(module: Path, package_root: Path) -> Path:
    """A copy of the `game` package (Python files and data) with the sanitized module in it."""
    target = package_root / "game"
    ignore = shutil.ignore_patterns("cpp", "_core*.so", "__pycache__")
    shutil.copytree(REPO_ROOT / "game", target, ignore=ignore, dirs_exist_ok=True)
    shutil.copy2(module, target / module.name)
    return package_root


def run_tests(package_root: Path, pytest_args: list[str], reports: Path) -> int:
    """Runs pytest in a child against the staged package; non-zero on a failure or a report."""
    reports.mkdir(parents=True, exist_ok=True)
    log = reports / "sanitizer"
    env = dict(os.environ)
    env["LD_PRELOAD"] = f"{runtime('libasan.so')} {runtime('libstdc++.so')}"
    env["ASAN_OPTIONS"] = ASAN_OPTIONS.format(log=log)
    env["UBSAN_OPTIONS"] = UBSAN_OPTIONS.format(log=log)
    env.setdefault("OMP_NUM_THREADS", "1")
    args = ["-q", "-p", "no:cacheprovider", "-m", "not slow", *pytest_args]
    code = BOOTSTRAP.format(package=str(package_root), repo=str(REPO_ROOT), args=args)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    print(proc.stdout + proc.stderr, end="")
    found = sorted(reports.glob("sanitizer.*"))
    for report in found:
        print(f"--- {report.name}\n{report.read_text(errors='replace')}", end="")
    if found or any(m in proc.stdout + proc.stderr for m in SANITIZER_MARKERS):
        print(f"sanitizer reports: {len(found)} (above)", file=sys.stderr)
        return proc.returncode or 1
    return proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--build-dir", type=Path, help="where to build, kept (default: a temporary one)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="parallel compile jobs")
    parser.add_argument(
        "pytest_args", nargs="*", help="after --: pytest arguments (default: core tests)"
    )
    args = parser.parse_args(argv)
    work = args.build_dir or Path(tempfile.mkdtemp(prefix="checkerzero-sanitize-"))
    try:
        module = build(work / "build", args.jobs)
        package_root = stage(module, work / "package")
        return run_tests(package_root, args.pytest_args or list(CORE_TESTS), work / "reports")
    finally:
        if args.build_dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
