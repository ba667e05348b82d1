"""Sustained-load repeatability and the memory pattern test, with negative controls: a planted
non-deterministic kernel and a flipped memory element are caught and named, and the real suite
tests fail as `hardware` when their kernel is swapped for a non-deterministic one."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch

from rocm_validate.correctness import repeatability

REPO = Path(__file__).resolve().parents[1]


def flaky_kernel(bad_call: int) -> tuple[torch.Tensor, callable]:
    """A GEMM that flips the last mantissa bit of element (3, 5) on its `bad_call`-th call
    (0 = the reference call): what a marginal compute unit or memory cell does."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 16, generator=g), torch.randn(16, 16, generator=g)
    calls = itertools.count()

    def run() -> torch.Tensor:
        out = a @ b
        if next(calls) == bad_call:
            out.view(torch.int32)[3, 5] ^= 1
        return out

    return a @ b, run


def test_a_deterministic_kernel_runs_for_the_stated_time_without_a_mismatch() -> None:
    ticks = itertools.count()
    result = repeatability.repeat_until(
        repeatability.gemm_workload("cpu", 16, torch.float32), 10.0, clock=lambda: float(next(ticks))
    )
    assert result.mismatch is None and result.seconds >= 10.0 and result.iterations >= repeatability.MIN_ITERATIONS


def test_a_planted_non_deterministic_kernel_is_caught_with_iteration_and_element() -> None:
    clean, run = flaky_kernel(bad_call=4)
    result = repeatability.repeat_until(run, seconds=60.0)
    assert result.iterations == 4 and result.mismatch is not None
    mismatch = result.mismatch
    assert (mismatch.iteration, mismatch.where, mismatch.count) == (4, "(3, 5)", 1)
    assert mismatch.expected.startswith(f"{clean[3, 5].item():.9g} (bits 0x")
    message = mismatch.describe("16x16x16 GEMM", "GPU 5 (cuda:5, AMD Instinct MI300X)")
    assert message.startswith(
        "GPU 5 (cuda:5, AMD Instinct MI300X): 16x16x16 GEMM: iteration 4, element (3, 5): expected "
    )
    assert "a hardware fault" in message


def test_bit_for_bit_means_bits_not_values() -> None:
    nan = torch.tensor([float("nan"), 0.0])
    assert repeatability.first_difference(nan, nan.clone(), 1) is None  # NaN == NaN bit for bit
    signed = repeatability.first_difference(torch.tensor([0.0]), torch.tensor([-0.0]), 2)
    assert signed is not None and signed.where == "(0,)" and "bits 0x80000000" in signed.found


def test_the_memory_pattern_passes_on_healthy_memory_and_names_a_flipped_element() -> None:
    chunks = repeatability.memory_chunks("cpu", 4 << 20, 1 << 20)
    assert len(chunks) == 4
    assert repeatability.memory_pattern(chunks) is None

    def flip(written: list[torch.Tensor]) -> None:
        written[2][12345] ^= 1 << 7

    mismatch = repeatability.memory_pattern(chunks, after_write=flip)
    assert mismatch is not None and mismatch.iteration == 1
    assert mismatch.where == "chunk 2 element 12345 (pattern zeros)" and mismatch.found.startswith(
        "128 (bits 0x00000080)"
    )


def test_the_address_pattern_differs_between_chunks_so_misplaced_writes_show() -> None:
    first = repeatability.pattern_values("address", 0, 8, "cpu")
    second = repeatability.pattern_values("address", 8, 8, "cpu")
    assert not torch.equal(first, second) and first.dtype == torch.int32
    assert repeatability.pattern_values("0xaaaaaaaa", 0, 2, "cpu").view(torch.uint8).tolist() == [0xAA] * 8


def test_the_duration_comes_from_the_level_on_a_gpu_and_stays_ci_sized_on_the_cpu() -> None:
    assert repeatability.sustained_seconds("extended", True) == 60.0
    assert repeatability.sustained_seconds("extended", False) == repeatability.CI_SECONDS
    with pytest.raises(ValueError, match="level must be one of quick, standard, extended"):
        repeatability.sustained_seconds("forever", True)


PLANT = """
import itertools

import torch

from rocm_validate.correctness import repeatability


def _flaky(device, size, dtype):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(size, size, generator=g), torch.randn(size, size, generator=g)
    calls = itertools.count()

    def run():
        out = a @ b
        if next(calls) == 7:
            out.view(torch.int32)[1, 2] ^= 1
        return out

    return run


def _leaky_memory(chunks, patterns=repeatability.PATTERNS, after_write=None):
    def flip(written):
        written[-1][99] ^= 1
    return _original(chunks, patterns, flip)


_original = repeatability.memory_pattern


def pytest_configure(config):
    repeatability.gemm_workload = _flaky
    repeatability.memory_pattern = _leaky_memory
"""


def test_the_suite_fails_a_planted_fault_as_hardware_naming_the_iteration_and_element(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(plant=PLANT)
    result = pytester.runpytest_subprocess(
        str(REPO / "suites" / "correctness" / "test_repeatability.py"),
        f"--rootdir={REPO}",
        "--rocm-device=cpu",
        "--rocm-level=extended",
        "-p",
        "plant",
        f"--rocm-report={pytester.path / 'report.json'}",
        "-p",
        "no:cacheprovider",
    )
    report = json.loads((pytester.path / "report.json").read_text())
    outcomes = {t["nodeid"].split("::")[-1]: t for t in report["tests"]}
    gemm = outcomes["test_gemm_repeatability_under_sustained_load"]
    assert (gemm["outcome"], gemm["category"]) == ("failed", "hardware"), result.stdout.str()[-3000:]
    assert "the CPU: 64x64x64 torch.float32 GEMM: iteration 7, element (1, 2): expected" in gemm["message"]
    memory = outcomes["test_memory_pattern_over_most_of_the_free_device_memory"]
    assert memory["category"] == "hardware" and "chunk 3 element 99 (pattern zeros)" in memory["message"]
    assert outcomes["test_attention_repeatability_under_sustained_load"]["outcome"] == "passed"
    assert "host hardware: drain the node and triage (hardware: 2)" in report["verdict"]
