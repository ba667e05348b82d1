"""`pytest --help` and unrelated runs must not import torch (it takes seconds and may touch GPUs)."""

import subprocess
import sys
from pathlib import Path


def _imported_modules(args, cwd):
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pytest", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )
    return {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def test_pytest_help_does_not_import_torch(tmp_path):
    modules = _imported_modules(["--help"], tmp_path)
    assert "rocm_validate.core.session" in modules, "the plugin was not loaded at all"
    assert "torch" not in modules


def test_a_run_of_unrelated_tests_does_not_import_torch(tmp_path):
    (tmp_path / "test_plain.py").write_text("def test_ok():\n    pass\n")
    modules = _imported_modules(["-q", "-p", "no:cacheprovider"], tmp_path)
    assert "rocm_validate.core.session" in modules
    assert "torch" not in modules


def test_pytest_help_in_this_repository_shows_no_pytester_options():
    repository = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True, cwd=repository)
    assert done.returncode == 0, done.stderr
    assert "--rocm-suite" in done.stdout
    assert "--lsof" not in done.stdout and "--runpytest" not in done.stdout
