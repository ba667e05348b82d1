"""PyTorch TunableOp driven from a check: switched on with tuning bounded, read from a user's
results file, or off for the default path, and always restored.

TunableOp's state belongs to the process: what it tunes or reads stays in its results table
until the process ends, and a key already there is never replaced (`TuningResultsManager::Add`
keeps the first solution). So a session records what each call added to the table (the
solution TunableOp picked for it), and a file whose entry conflicts with one already in the
table is reported rather than trusted. The filename is set to a scratch file before TunableOp's
first use, so it neither reads `tunableop_results<N>.csv` from the working directory nor writes
one at exit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocm_validate.workloads.tunableop_results import EntryGemm

if TYPE_CHECKING:
    import torch

Key = tuple[str, str]  # (operator signature, parameter signature)


@dataclass(frozen=True)
class TuningBudget:
    """How long TunableOp may profile each candidate solution: the smaller of a duration and a
    number of iterations (`set_max_tuning_duration` / `set_max_tuning_iterations`; PyTorch's
    defaults are 30 ms and 100)."""

    duration_ms: int = 10
    iterations: int = 20


SUITE_BUDGET = TuningBudget()


@dataclass(frozen=True)
class Selected:
    """A solution TunableOp holds for one GEMM key."""

    op_signature: str
    params_signature: str
    solution: str
    time_ms: float | None

    def describe(self) -> str:
        timed = "" if self.time_ms is None else f" ({self.time_ms:.4g} ms when tuned)"
        return f"{self.op_signature},{self.params_signature} -> {self.solution}{timed}"


def _tunable() -> Any:
    import torch.cuda.tunable as tunable

    return tunable


def results_table() -> dict[Key, Selected]:
    """Every solution in the process's TunableOp table (`torch.cuda.tunable.get_results()`)."""
    table = {}
    for row in _tunable().get_results():
        op, params, solution = str(row[0]), str(row[1]), str(row[2])
        time_ms = float(row[3]) if len(row) > 3 and row[3] is not None else None
        table[(op, params)] = Selected(op, params, solution, time_ms)
    return table


def running_validators() -> dict[str, str]:
    """The validators this stack registers (`torch.cuda.tunable.get_validators()`); ROCm registers
    its library versions and arch the first time a GEMM goes through TunableOp, so call this
    after one has (`TunableOpSession.register_validators`)."""
    return {str(key): str(value) for key, value in _tunable().get_validators()}


class TunableOpSession:
    """TunableOp switched on for one check; see `tunableop_session`."""

    def __init__(self, tuning: bool) -> None:
        self.tuning = tuning

    def call(self, fn: Callable[[], Any]) -> tuple[Any, list[Selected]]:
        """fn() through TunableOp, and what it added to the table (the solutions it tuned)."""
        before = set(results_table())
        out = fn()
        after = results_table()
        return out, [selected for key, selected in after.items() if key not in before]

    @contextlib.contextmanager
    def outside(self) -> Iterator[None]:
        """TunableOp off for the block: the golden's float64 GEMMs and the magnitudes of a check
        run on the default path, never through a tuned solution."""
        tunable = _tunable()
        tunable.enable(False)
        try:
            yield
        finally:
            tunable.enable(True)

    def register_validators(self, device: torch.device | str) -> dict[str, str]:
        """Run one small GEMM through TunableOp (without tuning) so every validator is
        registered, and return them."""
        import torch

        tunable = _tunable()
        tuning = tunable.tuning_is_enabled()
        tunable.tuning_enable(False)
        try:
            a = torch.ones(16, 16, device=device, dtype=torch.bfloat16)
            (a @ a).sum().item()
        finally:
            tunable.tuning_enable(tuning)
        return running_validators()

    def read_file(self, path: Path) -> bool:
        """Load a results file into the table; False when TunableOp rejects it (its validators)
        or cannot open it."""
        return bool(_tunable().read_file(str(path)))

    @staticmethod
    def switched(on: bool, fn: Callable[[], Any]) -> Callable[[], Any]:
        """fn with TunableOp on (the tuned path) or off (the default path) for each call, to
        time the two interleaved."""
        tunable = _tunable()

        def call() -> Any:
            tunable.enable(on)
            return fn()

        return call


@contextlib.contextmanager
def tunableop_session(scratch: Path, tuning: bool, budget: TuningBudget = SUITE_BUDGET) -> Iterator[TunableOpSession]:
    """TunableOp on (tuning on or off, each candidate bounded by `budget`) for the block, then
    every setting back as it was. `scratch` is a folder for TunableOp's own results file, so a
    first use reads and creates nothing elsewhere."""
    tunable = _tunable()
    saved = (
        tunable.is_enabled(),
        tunable.tuning_is_enabled(),
        tunable.get_max_tuning_duration(),
        tunable.get_max_tuning_iterations(),
        tunable.get_filename(),
    )
    if not saved[4]:
        scratch.mkdir(parents=True, exist_ok=True)
        tunable.set_filename(str(scratch / "tunableop_scratch.csv"), False)
    tunable.set_max_tuning_duration(budget.duration_ms)
    tunable.set_max_tuning_iterations(budget.iterations)
    tunable.tuning_enable(tuning)
    tunable.enable(True)
    try:
        yield TunableOpSession(tuning)
    finally:
        tunable.enable(saved[0])
        tunable.tuning_enable(saved[1])
        tunable.set_max_tuning_duration(saved[2])
        tunable.set_max_tuning_iterations(saved[3])
        if not saved[4]:
            tunable.set_filename("", False)


def conflicts(entries: Mapping[Key, str], table: Mapping[Key, Selected]) -> dict[Key, str]:
    """Entries whose key the table already holds with another solution: TunableOp keeps the one
    it had, so this process cannot check the file's."""
    return {
        key: table[key].solution
        for key, solution in entries.items()
        if key in table and table[key].solution != solution
    }


@dataclass(frozen=True)
class GemmOperands:
    """A [batch, M, K] (or [M, K]), B [batch, K, N] and the bias of a linear, as an entry's call
    lays them out (transposed views where the entry says so)."""

    a: Any
    b: Any
    bias: Any = None


def entry_operands(gemm: EntryGemm, device: torch.device | str, seed: int = 0) -> GemmOperands:
    """Seeded standard-normal operands for `gemm`, drawn on the device and rounded to its dtype."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    dtype = getattr(torch, gemm.dtype)
    lead = (gemm.batch,) if gemm.op == "torch.bmm" else ()

    def draw(rows: int, cols: int, transposed: bool) -> Any:
        shape = (*lead, cols, rows) if transposed else (*lead, rows, cols)
        drawn = torch.randn(*shape, generator=g, device=device).to(dtype)
        return drawn.transpose(-2, -1) if transposed else drawn

    a = draw(gemm.m, gemm.k, gemm.a_transposed)
    b = draw(gemm.k, gemm.n, gemm.b_transposed)
    bias = torch.randn(gemm.n, generator=g, device=device).to(dtype) if gemm.op.endswith("linear") else None
    return GemmOperands(a, b, bias)


def entry_call(gemm: EntryGemm, operands: GemmOperands) -> Callable[[], Any]:
    """The torch call an entry comes from, on `operands`."""
    import torch
    import torch.nn.functional as F

    a, b, bias = operands.a, operands.b, operands.bias
    if gemm.op == "torch.bmm":
        return lambda: torch.bmm(a, b)
    if gemm.op.endswith("linear"):
        weight = b.t()
        return lambda: F.linear(a, weight, bias)
    return lambda: torch.mm(a, b)
