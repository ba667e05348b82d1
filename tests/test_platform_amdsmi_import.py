"""amdsmi imported defensively: ROCm's matching copy first, the installed package next, any failure named."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rocm_validate.platform import amdsmi_import


@pytest.fixture(autouse=True)
def no_amdsmi_loaded(monkeypatch):
    """Each test imports amdsmi afresh and leaves no copy behind."""
    for name in [n for n in sys.modules if n == "amdsmi" or n.startswith("amdsmi.")]:
        monkeypatch.delitem(sys.modules, name)
    yield
    for name in [n for n in sys.modules if n == "amdsmi" or n.startswith("amdsmi.")]:
        del sys.modules[name]


def _package(folder: Path, init: str, interface: str = "ORIGIN = 'unset'\n") -> None:
    """An amdsmi package laid out like ROCm's (amdsmi/__init__.py importing its amdsmi_interface)."""
    package = folder / "amdsmi"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(init)
    (package / "amdsmi_interface.py").write_text(interface)


@pytest.fixture
def rocm(tmp_path) -> Path:
    return tmp_path / "rocm"


@pytest.fixture
def installed(tmp_path, monkeypatch) -> Path:
    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    return site


def test_rocms_own_copy_is_preferred_and_named(rocm, installed):
    _package(rocm / "share" / "amd_smi", "from .amdsmi_interface import *\n", "ORIGIN = 'rocm'\n")
    _package(installed, "ORIGIN = 'pip'\n")
    loaded = amdsmi_import.import_amdsmi({"ROCM_PATH": str(rocm)})
    assert loaded.module.ORIGIN == "rocm"
    assert loaded.origin == str(rocm / "share" / "amd_smi") and loaded.failures == ()


def test_a_rocm_copy_that_fails_to_import_falls_back_to_the_installed_package(rocm, installed):
    _package(rocm / "share" / "amd_smi", "raise AttributeError('amdsmi_get_gpu_accelerator_partition_profile')\n")
    _package(installed, "ORIGIN = 'pip'\n")
    loaded = amdsmi_import.import_amdsmi({"ROCM_PATH": str(rocm)})
    assert loaded.module.ORIGIN == "pip" and loaded.origin.startswith("amdsmi at ")
    assert loaded.failures == (
        f"{rocm / 'share' / 'amd_smi'}: AttributeError: amdsmi_get_gpu_accelerator_partition_profile",
    )


@pytest.mark.parametrize(
    "raised", ["KeyError('AMDSMI_LIB_VERSION_MAJOR')", "OSError('libamd_smi.so: cannot open shared object file')"]
)
def test_an_import_that_raises_anything_is_an_import_error_naming_each_copy(rocm, installed, raised):
    _package(rocm / "share" / "amd_smi", f"raise {raised}\n")
    _package(installed, f"raise {raised}\n")
    with pytest.raises(ImportError) as failure:
        amdsmi_import.import_amdsmi({"ROCM_PATH": str(rocm)})
    kind = raised.split("(")[0]
    assert str(failure.value).startswith(f"{rocm / 'share' / 'amd_smi'}: {kind}: ")
    assert f"; installed amdsmi package: {kind}: " in str(failure.value)
    assert "amdsmi" not in sys.modules  # nothing half-imported is left for the next attempt


def test_no_amdsmi_anywhere_is_module_not_found(rocm, installed):
    with pytest.raises(ModuleNotFoundError):
        amdsmi_import.import_amdsmi({"ROCM_PATH": str(rocm)})
