"""The rocm-validate command."""

import json
import subprocess
import sys

import pytest

from rocm_validate.cli import main as cli
from rocm_validate.results import jsonfile
from rocm_validate.results.report import DEVICES_SCHEMA


def test_devices_json_lists_this_machines_cpu_in_schema(capsys):
    assert cli.main(["devices", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert jsonfile.schema_errors(data, DEVICES_SCHEMA) == []
    cpu = data["devices"][-1]
    assert cpu["backend"] == "cpu" and cpu["fp8_formats"] == ["e4m3fn", "e5m2"]


def test_devices_text_names_each_device_and_its_stack(capsys):
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "key cpu-" in out and "torch " in out


def test_the_console_script_is_installed_and_runs():
    done = subprocess.run([sys.executable, "-m", "rocm_validate.cli.main", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("rocm-validate ")


def test_an_unknown_command_exits_2_with_usage(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["frobnicate"])
    assert exited.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err
