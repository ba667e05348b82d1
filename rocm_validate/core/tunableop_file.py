"""The TunableOp side of a run: the user's results file (`--rocm-tunableop-file`, ini
`rocm_tunableop_file`, or the `PYTORCH_TUNABLEOP_FILENAME` the job itself sets), the file this
device reads from it, and whether TunableOp can be driven here at all.

Torch-free: the file is found and parsed here (`rocm_validate.workloads.tunableop_results`);
the checks that run it live in the correctness and perf suites.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rocm_validate.core import options
from rocm_validate.core.categorize import fail_as
from rocm_validate.core.plan import NODE_GPU_VARIABLE
from rocm_validate.core.requirements import not_validated
from rocm_validate.workloads.tunableop_results import (
    ResultsFile,
    candidate_files,
    missing_file_message,
    parse_results,
)

if TYPE_CHECKING:
    from rocm_validate.platform.devices import DeviceInfo

FILE = options.OptionSpec(
    "--rocm-tunableop-file",
    "rocm_tunableop_file",
    "PYTORCH_TUNABLEOP_FILENAME",
    "a PyTorch TunableOp results file to validate on this stack: its validators, and every entry's solution "
    "against float64 and against the default GEMM (each GPU reads the file TunableOp would: its ordinal inserted)",
    "PATH",
)
# TunableOp's environment switches win over its Python API (Tunable.cpp reads them first).
PINNED_ON = ("PYTORCH_TUNABLEOP_ENABLED", "1")
PINNED_UNTUNED = ("PYTORCH_TUNABLEOP_TUNING", "0")


@dataclass(frozen=True)
class DeviceResults:
    """The results file this device reads, parsed, and how it was named."""

    path: Path
    results: ResultsFile
    ordinal: int  # the GPU's index on the node: the ordinal TunableOp puts in the name
    given: str  # the name as the user gave it
    source: str  # the option, ini key or variable that gave it


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_spec(parser, FILE)


def tunableop_skip_reason(device: DeviceInfo) -> str | None:
    """Why TunableOp cannot be driven on `device`: it tunes GPU BLAS calls only."""
    if device.is_gpu:
        return None
    return (
        f"needs a CUDA or ROCm GPU for PyTorch TunableOp (torch.cuda.tunable tunes the GPU BLAS libraries' "
        f"GEMMs), found cpu ({device.name})"
    )


def tuning_skip_reason(device: DeviceInfo) -> str | None:
    """Why tuning cannot choose anything but the default GEMM on `device`. PyTorch registers its
    rocBLAS and hipBLASLt solutions only in ROCm builds (aten/src/ATen/cuda/tunable/TunableGemm.h,
    under USE_ROCM): a CUDA build's TunableOp has one GEMM solution, cuBLAS's Default, so its
    tuned path is the default path, which the GEMM checks already validate."""
    if device.backend != "cuda":
        return None
    return (
        "needs a ROCm build for TunableOp to tune (it registers rocBLAS and hipBLASLt solutions only there), found "
        "a CUDA build, whose only TunableOp GEMM solution is cuBLAS's Default: the tuned path is the default path, "
        "validated by test_gemm.py (the H100 measured tuned / default 1.000 +- 0.1% over 20 GEMMs); a results file "
        f"given with {FILE.flag} is still checked"
    )


def environment_conflict(env: Mapping[str, str], tuning: bool, default_path: bool) -> str | None:
    """Why the environment keeps a check from switching TunableOp as it must: PYTORCH_TUNABLEOP_ENABLED=1
    pins it on for every GEMM (no default path to compare with), PYTORCH_TUNABLEOP_TUNING=0 forbids tuning."""
    if default_path and env.get(PINNED_ON[0]) == PINNED_ON[1]:
        return (
            f"needs {PINNED_ON[0]} unset to run the default GEMM beside the tuned one, found {PINNED_ON[0]}=1 "
            f"(TunableOp pinned on for every GEMM of this process); pass the results file with {FILE.flag}"
        )
    if tuning and env.get(PINNED_UNTUNED[0]) == PINNED_UNTUNED[1]:
        return f"needs TunableOp tuning, found {PINNED_UNTUNED[0]}=0 (tuning pinned off for this process)"
    return None


@pytest.fixture(scope="session")
def tunableop_scratch(rocm_device: DeviceInfo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for TunableOp's own results file; skips where TunableOp cannot run (the CPU)."""
    reason = tunableop_skip_reason(rocm_device)
    if reason:
        pytest.skip(reason)
    return tmp_path_factory.mktemp("tunableop")


@pytest.fixture
def tunableop_switchable(tunableop_scratch: Path) -> Path:
    """tunableop_scratch, where the environment also lets a check tune and switch TunableOp off
    for the default path; not validated where it pins either (see `environment_conflict`)."""
    reason = environment_conflict(os.environ, tuning=True, default_path=True)
    if reason:
        not_validated(
            reason, "configuration", f"unset the TunableOp variables named above; pass the file with {FILE.flag}"
        )
    return tunableop_scratch


@pytest.fixture
def tunableop_tuning(tunableop_scratch: Path, rocm_device: DeviceInfo, request: pytest.FixtureRequest) -> Path:
    """tunableop_switchable, where tuning can choose a solution other than the default (ROCm);
    skips on a CUDA build (see `tuning_skip_reason`) before the environment is judged: with
    nothing to tune, a pinned TunableOp variable keeps nothing from being validated."""
    reason = tuning_skip_reason(rocm_device)
    if reason:
        pytest.skip(reason)
    switchable: Path = request.getfixturevalue("tunableop_switchable")
    return switchable


def given_file(config: pytest.Config) -> tuple[str, str, Path] | None:
    """The results file name the run was given, where from, and the folder a relative name is
    taken from (the ini file's for the ini key, else the current directory); None when none."""
    value, source = options.raw_value(config, FILE)
    if not value:
        return None
    base = config.rootpath if source.endswith("(ini)") else config.invocation_params.dir
    return value, source, base


def node_ordinal(device: DeviceInfo, env: Mapping[str, str]) -> int:
    """The GPU's index on the node: a pinned worker's own GPU (its runtime calls it 0), else the
    torch index. A job with every GPU visible reads the file of this ordinal."""
    pinned = env.get(NODE_GPU_VARIABLE)
    if pinned is not None and pinned.isdigit():
        return int(pinned)
    return device.index or 0


def device_results(config: pytest.Config, device: DeviceInfo, env: Mapping[str, str]) -> DeviceResults | None:
    """The results file `device` reads, parsed; None when the run names none. A named file that
    cannot be found or read fails as a configuration error: the job would run untuned."""
    given = given_file(config)
    if given is None:
        return None
    value, source, base = given
    ordinal = node_ordinal(device, env)
    from_environment = source.endswith("(environment)")
    tried = [(base / Path(name).expanduser()).resolve() for name in candidate_files(value, from_environment, ordinal)]
    found = next((path for path in tried if path.is_file()), None)
    name = source.removesuffix(" (environment)").removesuffix(" (ini)")
    if found is None:
        fail_as("configuration", missing_file_message(value, name, [str(p) for p in tried], ordinal))
    try:
        text = found.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail_as("configuration", f"{name}={value}: cannot read {found}: {exc}")
    return DeviceResults(found, parse_results(text, str(found)), ordinal, value, name)


@pytest.fixture(scope="session")
def tunableop_results_file(pytestconfig: pytest.Config, rocm_device: DeviceInfo) -> DeviceResults:
    """The TunableOp results file this device reads; skips when the run names none."""
    found = device_results(pytestconfig, rocm_device, os.environ)
    if found is None:
        pytest.skip(f"needs a TunableOp results file ({FILE.flag}, ini {FILE.ini} or {FILE.env}), found none given")
    return found
