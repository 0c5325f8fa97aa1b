"""The package's style, checked by the tools CONTRIBUTING.md names: ruff (lint and format, lines at
most 100 characters) and mypy, with the settings in pyproject.toml.

A finding fails with the tool's own report; `ruff format recommender` and `ruff check --fix
recommender` fix most of them.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def require(module: str) -> None:
    """Skip without the tool (the test extra installs it); under CI=true, fail instead."""
    if importlib.util.find_spec(module) is None:
        message = f"{module} is not installed: pip install -e '.[test]' installs it"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} (CI is set, so it must be there)", pytrace=False)
        pytest.skip(message)


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_ruff_finds_nothing_in_the_package():
    require("ruff")
    result = run("ruff", "check", "--no-cache", "recommender")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_package_is_formatted_as_ruff_formats_it():
    require("ruff")
    result = run("ruff", "format", "--no-cache", "--check", "recommender")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing_in_the_package():
    require("mypy")
    result = run("mypy", "--no-incremental", "recommender")
    assert result.returncode == 0, result.stdout + result.stderr
