"""--rocm-device=all and lists: parsing, choosing the devices, and the commands hints repeat."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import fake_devices
import pytest

from rocm_validate.core.commands import Commands
from rocm_validate.core.options import Settings
from rocm_validate.errors import DeviceError, UsageError
from rocm_validate.node import facts as node_facts
from rocm_validate.platform.selection import DeviceSelection, select_devices

ALL = DeviceSelection("all")


def _listed(*indices: int) -> DeviceSelection:
    return DeviceSelection("list", indices)


@pytest.mark.parametrize(
    "text, parsed",
    [
        ("all", ("all", ())),
        ("ALL", ("all", ())),
        ("0,3,5", ("list", (0, 3, 5))),
        ("cuda:1, 2", ("list", (1, 2))),
        ("4", ("gpu", (4,))),
        ("cpu", ("cpu", ())),
        ("auto", ("auto", ())),
    ],
)
def test_a_device_value_parses_to_an_index_a_list_all_or_cpu(text, parsed):
    selection = DeviceSelection.parse(text)
    assert (selection.kind, selection.indices) == parsed


@pytest.mark.parametrize(
    "text, message",
    [
        ("0,x", r"'x' is not a GPU index"),
        ("0,", r"'' is not a GPU index"),
        ("1,2,1", r"GPU 1 is listed twice"),
        ("every", r"expected a GPU index .*'all'"),
    ],
)
def test_a_bad_device_list_is_a_usage_error_naming_the_bad_part(text, message):
    with pytest.raises(UsageError, match=message):
        DeviceSelection.parse(text)


def test_only_all_and_lists_select_a_whole_node():
    values = ("all", "0,1", "0", "cpu", "auto")
    assert [DeviceSelection.parse(v).node_run for v in values] == [True, True, False, False, False]


def test_a_selection_read_from_the_environment_names_its_variable():
    selection = DeviceSelection.parse("3", "ROCM_VALIDATE_DEVICE (environment)")
    assert (selection.source, selection.argument) == ("ROCM_VALIDATE_DEVICE", "3")


def _gpus(count: int) -> list:
    return [dataclasses.replace(fake_devices.mi300x(), index=i, pci_bus_id=f"0000:{i:02x}:00.0") for i in range(count)]


def test_all_selects_every_gpu_and_a_list_selects_those_in_its_order():
    devices = [*_gpus(8), fake_devices.cpu()]
    assert [d.index for d in select_devices(devices, ALL)] == list(range(8))
    assert [d.index for d in select_devices(devices, _listed(5, 0, 3))] == [5, 0, 3]


def test_a_listed_index_that_does_not_exist_is_a_device_error_naming_it():
    with pytest.raises(DeviceError, match=r"--rocm-device=0,9: no GPU 9; found 8: 0 \(AMD Instinct MI300X\)"):
        select_devices([*_gpus(8), fake_devices.cpu()], _listed(0, 9))


def test_all_on_a_machine_with_no_gpu_is_the_cpu_once():
    assert select_devices([fake_devices.cpu()], ALL, env={}) == [fake_devices.cpu()]


def test_all_with_a_gpu_build_of_torch_and_no_gpu_is_the_broken_gpu_error_not_the_cpu():
    cpu = dataclasses.replace(fake_devices.cpu(), runtime_version="HIP 7.0")
    with pytest.raises(DeviceError, match=r"this torch is a GPU build \(HIP 7.0\), but no usable GPU"):
        select_devices([cpu], ALL, env={})


def test_a_list_with_no_gpu_at_all_names_the_gpus_it_asked_for():
    with pytest.raises(DeviceError, match=r"--rocm-device=0,1 names GPUs, but no usable GPU"):
        select_devices([fake_devices.cpu()], _listed(0, 1), env={})


def _settings(suites: set[str], device: str = "auto", **changes: object) -> Settings:
    return Settings(frozenset(suites), False, Path("/b"), DeviceSelection.parse(device), None, False, True, **changes)


def test_the_update_hint_records_the_suites_this_run_measures_on_its_devices():
    cpu = fake_devices.cpu()
    assert Commands(_settings({"perf"}), cpu).record() == (
        "pytest --rocm-suite=perf --rocm-device=cpu --rocm-baselines=/b --update-baselines"
    )
    assert Commands(_settings({"correctness"}, "0")).record() == (
        "pytest --rocm-suite=perf --rocm-device=0 --rocm-baselines=/b --update-baselines"
    )
    assert Commands(_settings({"collectives"})).record() == (
        "pytest --rocm-suite=collectives --rocm-baselines=/b --update-baselines"
    )
    assert Commands(_settings({"perf", "collectives"}, "0,3")).record() == (
        "pytest --rocm-suite=collectives,perf --rocm-device=0,3 --rocm-baselines=/b --update-baselines"
    )


def test_every_command_carries_the_users_device_folder_and_level():
    commands = Commands(_settings({"perf"}, "2", level="extended", accept_regressions=False), fake_devices.h100())
    for command in (commands.repeat(), commands.record(), commands.accept(), commands.refusal("slower") or ""):
        assert "--rocm-device=2" in command and "--rocm-baselines=/b" in command
        assert "--rocm-level=extended" in command


def test_a_regression_is_refused_naming_the_command_that_accepts_it_unless_accepted():
    refused = Commands(_settings({"perf"}), fake_devices.cpu()).refusal("700 -> 600 TFLOP/s")
    assert refused == (
        "refused: 700 -> 600 TFLOP/s; not written. If the stack really changed, record it with "
        "pytest --rocm-suite=perf --rocm-device=cpu --rocm-baselines=/b --update-baselines --rocm-accept-regressions"
    )
    assert Commands(_settings({"perf"}, accept_regressions=True)).refusal("700 -> 600 TFLOP/s") is None


def test_a_list_is_repeated_as_the_user_wrote_it():
    assert _settings({"perf"}, "2,0").device.argument == "2,0"
    assert _settings({"perf"}, "2,0").summary()["device"] == "2,0"


def test_the_main_process_of_a_node_run_discovers_in_a_child_and_gets_the_same_devices():
    found = node_facts.discover_in_child()
    assert found and not found[-1].is_gpu and all(d.is_gpu for d in found[:-1])


def test_a_discovery_child_that_fails_is_a_device_error_with_its_last_words(monkeypatch):
    monkeypatch.setattr(node_facts, "_DISCOVER", "raise SystemExit('amdgpu: no such device')")
    with pytest.raises(
        DeviceError, match=r"device discovery failed in its child process \(exit 1\): amdgpu: no such device"
    ):
        node_facts.discover_in_child()


def test_a_discovery_child_that_hangs_is_stopped_and_named(monkeypatch):
    monkeypatch.setattr(node_facts, "_DISCOVER", "import time\ntime.sleep(60)")
    with pytest.raises(
        DeviceError, match=r"device discovery did not finish in 0.5 s \(a hung driver or vendor tool\?\)"
    ):
        node_facts.discover_in_child(timeout_s=0.5)
