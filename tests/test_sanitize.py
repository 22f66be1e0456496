"""The core's tests under AddressSanitizer and UBSan (slow: a separate build of the core).

scripts/sanitize_core.py builds `_core` with CHECKERZERO_SANITIZE=ON into a temporary folder and
runs the rules, perft, actions, search, alpha-beta, notation, input-checking and fuzz tests
against that build with the ASan runtime preloaded; any memory error or undefined behaviour in
the core aborts the child and fails this test.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "scripts" / "sanitize_core.py"


@pytest.mark.slow
def test_the_core_tests_pass_under_asan_and_ubsan(tmp_path: Path) -> None:
    for tool in ("cmake", "ninja", "c++"):
        if shutil.which(tool) is None:
            pytest.skip(f"the sanitizer build needs {tool} on PATH")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--build-dir", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    assert f"sanitized core: {tmp_path}" in output  # the tests ran against the sanitized build
    assert " passed" in output and " failed" not in output, output[-3000:]
    for marker in ("ERROR: AddressSanitizer", "runtime error:"):
        assert marker not in output
