"""Test levels and the per-test timeouts that keep a hung kernel from hanging a CI job (as DCGM's r1-r4 and RVS's levels).

* `quick`: a smoke check of every suite's main path, at most 60 s on one GPU (every level's budget:
  `rocm_validate.node.budget`);
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

LEVELS: tuple[str, ...] = ("quick", "standard", "extended")
DEFAULT_LEVEL = "standard"
MARKER = "rocm_level"

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


def minutes(seconds: float) -> str:
    """'5 min 12 s', '42 s'."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    whole_minutes, rest = divmod(whole, 60)
    return f"{whole_minutes} min" + (f" {rest} s" if rest else "")
