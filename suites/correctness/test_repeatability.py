"""Sustained-load repeatability (the extended level): a GEMM and an attention forward run for a
stated time per GPU with every result compared bit for bit with the first, and a pattern written
over most of the free device memory and read back. A single differing element fails as
`hardware`, naming the GPU, the iteration and the element. On the CPU the same code runs on tiny
sizes for a second, so CI exercises it. The logic: rocm_validate.correctness.repeatability."""

from __future__ import annotations

import pytest
import torch

from rocm_validate.core.categorize import fail_as
from rocm_validate.correctness import repeatability

pytestmark = pytest.mark.rocm_level("extended")

LEVEL = "extended"  # the level these tests belong to; it sets how long each workload runs


@pytest.fixture
def sustained_seconds(rocm_device) -> float:
    """Seconds each workload runs on this device (60 per GPU at the extended level)."""
    return repeatability.sustained_seconds(LEVEL, rocm_device.is_gpu)


def _gpu(rocm_device) -> str:
    return (
        f"GPU {rocm_device.index} ({rocm_device.torch_device}, {rocm_device.name})" if rocm_device.is_gpu else "the CPU"
    )


def _settle(result: repeatability.RepeatResult, what: str, rocm_device, record_rocm_metric, name: str) -> None:
    """Record how long and how often the workload ran; fail as hardware on a mismatch."""
    __tracebackhide__ = True
    record_rocm_metric(f"repeatability.{name}.iterations", result.iterations, "iterations")
    record_rocm_metric(f"repeatability.{name}.seconds", result.seconds, "s", better="lower")
    if result.mismatch is not None:
        fail_as("hardware", result.mismatch.describe(what, _gpu(rocm_device)))


def test_gemm_repeatability_under_sustained_load(
    rocm_device, torch_device, sustained_seconds, record_rocm_metric
) -> None:
    size, dtype = (8192, torch.bfloat16) if rocm_device.is_gpu else (64, torch.float32)
    run = repeatability.gemm_workload(torch_device, size, dtype)
    result = repeatability.repeat_until(run, sustained_seconds)
    _settle(result, f"{size}x{size}x{size} {dtype} GEMM", rocm_device, record_rocm_metric, "gemm")


def test_attention_repeatability_under_sustained_load(
    rocm_device, torch_device, sustained_seconds, record_rocm_metric
) -> None:
    shape, dtype = ((8, 32, 4096, 128), torch.bfloat16) if rocm_device.is_gpu else ((1, 2, 16, 8), torch.float32)
    run = repeatability.attention_workload(torch_device, shape, dtype)
    result = repeatability.repeat_until(run, sustained_seconds)
    _settle(
        result, f"causal SDPA forward {'x'.join(map(str, shape))} {dtype}", rocm_device, record_rocm_metric, "attention"
    )


def test_memory_pattern_over_most_of_the_free_device_memory(rocm_device, torch_device, record_rocm_metric) -> None:
    if rocm_device.is_gpu:
        free, _ = torch.cuda.mem_get_info(torch_device)
        total, chunk = int(free * repeatability.MEMORY_SHARE), repeatability.CHUNK_BYTES
    else:
        total, chunk = repeatability.CI_MEMORY_BYTES, repeatability.CI_MEMORY_BYTES // 4
    chunks = repeatability.memory_chunks(torch_device, total, chunk)
    if not chunks:
        pytest.skip(
            f"needs {chunk / 2**20:.0f} MiB of free device memory for one chunk, found {total / 2**20:.0f} MiB to use"
        )
    checked = sum(c.numel() * 4 for c in chunks)
    mismatch = repeatability.memory_pattern(chunks)
    record_rocm_metric("memory_pattern.checked_gib", checked / 2**30, "GiB")
    del chunks
    if mismatch is not None:
        fail_as("hardware", mismatch.describe(f"memory pattern over {checked / 2**30:.1f} GiB", _gpu(rocm_device)))
