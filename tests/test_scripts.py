"""The console scripts pyproject.toml declares exist once installed and answer --help."""

import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
DECLARED = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]


def test_every_declared_script_is_installed_and_loads():
    installed = {ep.name: ep for ep in entry_points(group="console_scripts")}
    for name, target in DECLARED.items():
        assert name in installed, f"{name} is not installed: reinstall the project"
        assert installed[name].value == target
        assert callable(installed[name].load())


@pytest.mark.parametrize("name", ["checkerzero-match", "checkerzero-egdb", "checkerzero-learn"])
def test_scripts_answer_help(name):
    script = Path(sys.executable).parent / name
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "usage" in out.stdout.lower() or "python -m" in out.stdout
