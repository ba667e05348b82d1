"""PyTorch TunableOp against the default GEMM: the speedup of the solution TunableOp tunes for
each benchmark GEMM (a gated metric), and every entry of a user's results file timed against the
default path. A tuned solution slower than the default fails, naming the shape or the entry.
GPU only: TunableOp tunes GPU BLAS libraries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rocm_validate.core.categorize import fail_as
from rocm_validate.core.requirements import not_validated, scaled_mm_skip_reason
from rocm_validate.perf.kernels import check_gemm_tile, gemm_kernel, gemm_operands, gemm_set_bytes
from rocm_validate.perf.timing import sustained_changes
from rocm_validate.perf.tuning import TIMED_ENTRIES, slower_message, tuned_speedup
from rocm_validate.workloads.shapes import GEMM_BENCHMARKS, GemmBenchmark
from rocm_validate.workloads.tunableop import (
    conflicts,
    entry_call,
    entry_operands,
    results_table,
    tunableop_session,
)
from rocm_validate.workloads.tunableop_results import EntryGemm, entry_gemm, validator_mismatches

TUNED_DTYPES = ("bf16", "fp16", "fp8")  # the training dtypes; fp32 GEMMs are not what jobs tune
ENTRY_WINDOW = {"warmup_min_s": 0.5, "window_s": 0.5}  # per entry, after the first has warmed the clocks


def _selected(selected) -> str:
    return "; ".join(s.describe() for s in selected) or "tuned earlier in this process"


def _interleaved(perf, session, call: Callable[[], Any], plan: dict[str, Any]):
    """The default and the tuned path of one call, timed in alternating rounds."""
    return perf.measure_interleaved(
        {"default": session.switched(False, call), "tuned": session.switched(True, call)}, **plan
    )


def _rotating(gemm: EntryGemm, rotation) -> Callable[[], Any]:
    return lambda: entry_call(gemm, rotation.next())()


def _entry_bytes(gemm: EntryGemm) -> int:
    element = 4 if gemm.dtype == "float32" else 2
    return element * gemm.batch * (gemm.m * gemm.k + gemm.k * gemm.n + gemm.n)


def test_tunableop_results_file_entries_are_not_slower_than_default(
    tunableop_scratch, perf, record_rocm_metric, rocm_device, torch_device, tunableop_switchable, tunableop_results_file
):
    found = tunableop_results_file
    held = conflicts({e.key: e.solution for e in found.results.entries}, results_table())
    runnable = [(e, g) for e in found.results.entries if e.key not in held and not isinstance(g := entry_gemm(e), str)]
    runnable.sort(key=lambda pair: -pair[1].batch * pair[1].m * pair[1].n * pair[1].k)
    slower, timed = [], 0
    with tunableop_session(tunableop_switchable, tuning=True) as session:
        running = session.register_validators(torch_device)
        if validator_mismatches(found.results.validator_map, running) or not session.read_file(found.path):
            not_validated(f"{found.path} is ignored by TunableOp on this stack (the correctness suite says why)")
        for entry, gemm in runnable[:TIMED_ENTRIES]:
            rotation = perf.rotation(lambda i, g=gemm: entry_operands(g, torch_device, seed=i), _entry_bytes(gemm))
            _, missed = session.call(entry_call(gemm, rotation.sets[0]))
            if missed:
                continue  # not the entry's call: the correctness suite reports it as not reproduced
            plan = dict(sustained_changes(rocm_device.backend), **ENTRY_WINDOW)
            measured = _interleaved(perf, session, _rotating(gemm, rotation), plan)
            speedup, spread = tuned_speedup(measured["tuned"], measured["default"])
            record_rocm_metric(f"gemm.tunableop.file.line{entry.line}", speedup, "x", dispersion=spread)
            timed += 1
            message = slower_message(f"{found.path} {entry.describe()} ({gemm.describe()})", speedup, spread)
            if message:
                slower.append(message)
    if slower:
        fail_as("performance", "\n".join(slower))
    if not timed:
        not_validated(f"no entry of {found.path} could be timed here (none reproduced, or all held by earlier tuning)")


@pytest.mark.parametrize(
    "dtype, case",
    [pytest.param(dtype, case, id=f"{dtype}-{case.label}") for dtype in TUNED_DTYPES for case in GEMM_BENCHMARKS],
)
def test_tunableop_speedup_over_the_default_gemm(
    perf, rocm_device, torch_device, tunableop_tuning, dtype: str, case: GemmBenchmark
) -> None:
    reason = scaled_mm_skip_reason(rocm_device) if dtype == "fp8" else None
    if reason:
        pytest.skip(f"FP8 GEMM {reason}")
    m, n, k = case.shape(perf.scale)
    fp8_format = rocm_device.fp8_formats[0] if dtype == "fp8" else None
    rotation = perf.rotation(
        lambda _i: gemm_operands(dtype, m, n, k, torch_device, fp8_format), gemm_set_bytes(dtype, m, n, k)
    )
    kernel = gemm_kernel(dtype, torch_device)
    a, b = rotation.sets[0]
    with tunableop_session(tunableop_tuning, tuning=True) as session:
        tuned, selected = session.call(lambda: kernel(a, b))
        measured = _interleaved(perf, session, lambda: kernel(*rotation.next()), sustained_changes(rocm_device.backend))
    check_gemm_tile(tuned, a, b, dtype)  # the timed solution computes the right thing (float64 outside TunableOp)
    metric = perf.speedup(f"gemm.tunableop.{dtype}.{m}x{n}x{k}", measured["tuned"], measured["default"])
    message = slower_message(f"{dtype} {m}x{n}x{k} [TunableOp: {_selected(selected)}]", metric.value, metric.dispersion)
    if message:
        fail_as("performance", message)
