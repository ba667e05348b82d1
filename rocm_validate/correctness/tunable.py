"""GEMM solutions picked by PyTorch TunableOp, against float64 with the default path's comparator
and bounds (`gemm.<dtype>` rows).

TunableOp picks the fastest solution of every GEMM shape from all that rocBLAS / hipBLASLt (or
cuBLAS / cuBLASLt) offer, and with its numerical check off (PyTorch's default) nothing asks
whether that solution is right for the shape. Here every selected solution is judged as the
default GEMM is: the call under test runs inside TunableOp, the float64 golden and the
magnitudes outside it (a float64 GEMM inside would be tuned too). Two sources of solutions:

* the suite's own GEMM shapes tuned in this process (tuning bounded by `TuningBudget`);
* a user's results file (`--rocm-tunableop-file`): its validators against this stack (a
  mismatch means TunableOp ignores the whole file and the job runs untuned), then every entry
  the suite can reproduce, called as the entry's job called it, so TunableOp looks up the
  entry's own solution. A call that would tune instead (its signature is not the entry's) is
  reported as not reproduced, never judged as the entry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from rocm_validate.correctness.compare import Comparison
from rocm_validate.correctness.gemm import judge_linear, judge_product, linear_operands
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.workloads.shapes import GemmProblem, attention_size
from rocm_validate.workloads.tunableop import (
    Selected,
    TunableOpSession,
    conflicts,
    entry_call,
    entry_operands,
    results_table,
)
from rocm_validate.workloads.tunableop_results import EntryGemm, ResultsEntry, ResultsFile, entry_gemm


def selected_label(selected: Sequence[Selected]) -> str:
    """What TunableOp picked for a call, for the check's name."""
    if not selected:
        return "[TunableOp: tuned earlier in this process]"
    return "[TunableOp: " + "; ".join(s.describe() for s in selected) + "]"


def check_tuned_linear(
    problem: GemmProblem,
    dtype: str,
    bias: bool,
    device: DeviceInfo,
    torch_device: torch.device,
    session: TunableOpSession,
) -> Comparison:
    """F.linear (with or without its bias) through the solution TunableOp tunes for it, against
    float64 with the `gemm.<dtype>` row; the check names the solution."""
    operands = linear_operands(problem, dtype, torch_device)
    x, w, b = operands
    candidate, selected = session.call(lambda: F.linear(x, w, b if bias else None))
    with session.outside():
        comparison = judge_linear(problem, dtype, operands, candidate, device, bias)
    return dataclasses.replace(comparison, check=f"{comparison.check} {selected_label(selected)}")


def attention_gemms(is_gpu: bool, dtype: str) -> dict[str, EntryGemm]:
    """BERT-L attention's batched GEMMs at the suite's attention size: the scores q k^T (k read
    transposed) and the context p v."""
    size = attention_size(64, is_gpu)
    batch = size.batch * size.heads
    return {
        "scores": EntryGemm("torch.bmm", dtype, size.seq, size.seq, 64, batch, b_transposed=True),
        "context": EntryGemm("torch.bmm", dtype, size.seq, 64, size.seq, batch),
    }


def check_tuned_bmm(
    name: str, gemm: EntryGemm, device: DeviceInfo, torch_device: torch.device, session: TunableOpSession
) -> Comparison:
    """A batched GEMM of attention through the solution TunableOp tunes for it, against float64."""
    operands = entry_operands(gemm, torch_device)
    candidate, selected = session.call(entry_call(gemm, operands))
    with session.outside():
        return judge_product(
            f"gemm.{gemm.dtype} [attention {name}: {gemm.describe()}] {selected_label(selected)}",
            gemm.dtype,
            operands.a,
            operands.b,
            None,
            candidate,
            device,
        )


@dataclass(frozen=True)
class EntryOutcome:
    """What became of one results-file entry: judged (a comparison) or why not."""

    entry: ResultsEntry
    comparison: Comparison | None = None
    not_checked: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.entry.describe(),
            "passed": None if self.comparison is None else self.comparison.passed,
            "not_checked": self.not_checked,
        }


def file_conflicts(results: ResultsFile) -> dict[tuple[str, str], str]:
    """The file's entries this process's TunableOp table holds with another solution (tuned here
    earlier): TunableOp keeps its own, so those entries cannot be checked in this process."""
    return conflicts({entry.key: entry.solution for entry in results.entries}, results_table())


def check_entries(
    results: ResultsFile,
    device: DeviceInfo,
    torch_device: torch.device,
    session: TunableOpSession,
    held: dict[tuple[str, str], str],
    seed: int = 0,
) -> list[EntryOutcome]:
    """Every entry of a loaded results file, as its job calls it, against float64. `session` must
    tune (so a call that misses its entry shows as a new tuning, not as the entry); `held` are
    the conflicts found before the file was read."""
    outcomes = []
    for entry in results.entries:
        gemm = entry_gemm(entry)
        if isinstance(gemm, str):
            outcomes.append(EntryOutcome(entry, not_checked=gemm))
            continue
        if entry.key in held:
            outcomes.append(
                EntryOutcome(
                    entry,
                    not_checked=f"TunableOp already holds {held[entry.key]} for it in this process (tuned by an "
                    "earlier test); check the file on its own: pytest suites/correctness/test_tunable.py -k results_file",
                )
            )
            continue
        operands = entry_operands(gemm, torch_device, seed)
        candidate, tuned = session.call(entry_call(gemm, operands))
        if tuned:
            missed = "; ".join(s.describe() for s in tuned)
            outcomes.append(
                EntryOutcome(entry, not_checked=f"not reproduced: the suite's {gemm.describe()} tuned {missed} instead")
            )
            continue
        check = f"tunableop.entry [{results.path} {entry.describe()}; {gemm.describe()}]"
        with session.outside():
            judged = judge_product(check, gemm.dtype, operands.a, operands.b, operands.bias, candidate, device)
        outcomes.append(EntryOutcome(entry, judged))
    return outcomes
