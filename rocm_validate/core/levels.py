"""Test levels and their time budgets, and the per-test timeouts that keep a hung kernel from
hanging a CI job (as DCGM's r1-r4 and RVS's levels).

* `quick`: a smoke check of every suite's main path, at most 60 s on one GPU;
* `standard` (the default): the suites as they are;
* `extended`: longer measurement windows, sustained load and repeatability, larger shapes.

A test declares the lowest level it runs at with `@pytest.mark.rocm_level("quick")` (or
"extended"); an undeclared test is a standard test. A run at a level runs every test of that level
and below. Timeouts go through pytest-timeout: a default per suite and level (overridden by
`--rocm-timeout`, or by the user's own `--timeout` / `timeout` marker), the signal method in a
plain run (the test fails and the run goes on) and the thread method in pytest-xdist workers (a
kernel stuck in native code cannot be interrupted: the worker is ended and xdist replaces it).
The signal cannot interrupt native code either, so in a plain run a test still running
`watchdog.grace_s` (10-60 s) past its timeout ends the run with exit status 1, its name and every
thread's stack (`core/watchdog.py`); the tests after it do not run, so to keep going past a hung
kernel run with -n 1 or --rocm-device=all.
"""

from __future__ import annotations

from dataclasses import dataclass

LEVELS: tuple[str, ...] = ("quick", "standard", "extended")
DEFAULT_LEVEL = "standard"
MARKER = "rocm_level"


@dataclass(frozen=True)
class Budget:
    """The wall-clock time a level is meant to take on one device."""

    gpu_s: float  # on one GPU
    cpu_s: float  # on a CI-sized CPU (2 cores)

    def for_device(self, is_gpu: bool) -> float:
        return self.gpu_s if is_gpu else self.cpu_s


# Stated budgets, checked on the lent H100 and on the 2-core CPU CI machine (docs/levels.md).
BUDGETS: dict[str, Budget] = {
    "quick": Budget(gpu_s=60, cpu_s=90),
    "standard": Budget(gpu_s=600, cpu_s=420),
    "extended": Budget(gpu_s=2400, cpu_s=900),
}

# Per-test timeouts by suite and level, in seconds: the slowest healthy test of each suite with
# room to spare (a cold torch.compile of BERT-L takes about 100 s; a mini-BERT candidate's ten
# seeds take two minutes on a CPU).
TIMEOUTS_S: dict[str, dict[str, float]] = {
    "correctness": {"quick": 120, "standard": 300, "extended": 900},
    "perf": {"quick": 180, "standard": 420, "extended": 900},
    "convergence": {"quick": 300, "standard": 600, "extended": 1200},
}
DEFAULT_TIMEOUT_S = {"quick": 120, "standard": 300, "extended": 900}  # tests outside the suites


def parse_level(value: str, source: str) -> str:
    """'Quick ' -> 'quick'; ValueError naming the levels otherwise."""
    level = value.strip().lower()
    if level not in LEVELS:
        raise ValueError(f"{source}={value!r}: unknown level; accepted: {', '.join(LEVELS)}")
    return level


def level_of(marker_args: tuple[object, ...] | None) -> str:
    """The level a test declares with its rocm_level marker (standard without one); ValueError
    for a marker that names no level."""
    if marker_args is None:
        return DEFAULT_LEVEL
    if len(marker_args) != 1 or marker_args[0] not in LEVELS:
        found = ", ".join(repr(a) for a in marker_args) or "nothing"
        raise ValueError(f"rocm_level marker needs one of {', '.join(LEVELS)}, found {found}")
    return str(marker_args[0])


def runs_at(test_level: str, run_level: str) -> bool:
    """A test runs at its own level and every level above it."""
    return LEVELS.index(test_level) <= LEVELS.index(run_level)


def timeout_for(suite: str | None, level: str, override_s: float | None) -> float:
    """The per-test timeout of a test of `suite` in a run at `level`."""
    if override_s is not None:
        return override_s
    return TIMEOUTS_S.get(suite or "", DEFAULT_TIMEOUT_S)[level]


def describe_budget(level: str, is_gpu: bool, timeout_s: float | None) -> str:
    """'standard: budget 10 min on one GPU; per-test timeout 300-420 s by suite'."""
    budget = BUDGETS[level].for_device(is_gpu)
    where = "on one GPU" if is_gpu else "on a 2-core CPU"
    if timeout_s is not None:
        timeouts = f"per-test timeout {timeout_s:g} s"
    else:
        values = sorted({t[level] for t in TIMEOUTS_S.values()})
        timeouts = f"per-test timeout {values[0]:g}-{values[-1]:g} s by suite"
    return f"{level}: budget {_minutes(budget)} {where}; {timeouts}"


def describe_time_used(level: str, is_gpu: bool, used_s: float) -> str:
    """'standard: 5 min 12 s of its 10 min budget' (and 'OVER' when it ran longer)."""
    budget = BUDGETS[level].for_device(is_gpu)
    over = " OVER the budget" if used_s > budget else ""
    return f"{level}: {_minutes(used_s)} of its {_minutes(budget)} budget{over}"


def describe_node_budget(level: str, gpus: int, budget_s: float) -> str:
    """'standard: budget 5 min for 2 GPUs (per-GPU work on each, shared work divided, node-wide once)'."""
    return (
        f"{level}: budget {_minutes(budget_s)} for {gpus} GPUs (per-GPU work on each, shared work divided among "
        f"them, node-wide work once: docs/node.md)"
    )


def describe_node_time_used(level: str, gpus: int, used_s: float, budget_s: float) -> str:
    """'standard: 4 min 38 s of its 5 min budget for 2 GPUs' (and 'OVER' when it ran longer)."""
    over = " OVER the budget" if used_s > budget_s else ""
    return f"{level}: {_minutes(used_s)} of its {_minutes(budget_s)} budget for {gpus} GPUs{over}"


def _minutes(seconds: float) -> str:
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min" + (f" {rest} s" if rest else "")
