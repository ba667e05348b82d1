"""pytest side of the collectives suite: its options, the world it runs on, and the fixtures its
tests use. Imports no torch at module level (the launcher does, when a world starts).

Why the busbw and P2P metrics are recorded through the `perf` fixture from the suite's test
files (suites/collectives), not gated here: the perf suite owns the baseline store, the gate and
`--update-baselines`, and a suite package never imports another; a fixture is their public
interface, so collectives metrics are gated, stored and updated exactly like every perf metric
(same device-key file, same band, same refusal of regressions). The band that decides a
bandwidth dip or a slow pair comes from the same gate through the `pytest_rocm_noise_band` hook.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from rocm_validate.collectives.formats import split
from rocm_validate.collectives.outcome import PairOutcome, StepOutcome, WorldOutcome, group_failure
from rocm_validate.collectives.plan import (
    DEFAULT_CPU_RANKS,
    Plan,
    WorldSpec,
    cpu_world,
    gpu_world,
    plan_for,
    world_skip_reason,
)
from rocm_validate.collectives.steps import Plant, StepsPlan, chosen_jobs
from rocm_validate.collectives.steps import plan_for as steps_plan_for
from rocm_validate.core import options
from rocm_validate.core.categorize import fail_as
from rocm_validate.core.oom import free_device_memory
from rocm_validate.core.plan import NodePlan, gpu_ref
from rocm_validate.core.session import RunState, run_state
from rocm_validate.node.facts import outer_visibility, pinning
from rocm_validate.results.plots import BYTES_KEY, COLLECTIVE_KEY
from rocm_validate.results.sizes import size_label

if TYPE_CHECKING:
    from rocm_validate.platform.devices import DeviceInfo

MAX_CPU_RANKS = 16
CPU_RANKS = options.OptionSpec(
    "--rocm-cpu-ranks",
    "rocm_cpu_ranks",
    "ROCM_VALIDATE_CPU_RANKS",
    "world size of the collectives suite on the CPU: gloo ranks on this host (default 2)",
    "N",
)
COLLECTIVE_TIMEOUT = options.OptionSpec(
    "--rocm-collective-timeout",
    "rocm_collective_timeout",
    "ROCM_VALIDATE_COLLECTIVE_TIMEOUT",
    "seconds a collective may wait for its peers before the rank that is missing is named and the group "
    "is ended (default 60 on GPUs, 20 on the CPU)",
    "SECONDS",
)


@dataclass(frozen=True)
class CollectiveSettings:
    cpu_ranks: int = DEFAULT_CPU_RANKS
    timeout_s: float | None = None  # None: the plan's default for the device


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_spec(parser, CPU_RANKS)
    options.add_spec(parser, COLLECTIVE_TIMEOUT)


def parse_ranks(value: str, source: str = CPU_RANKS.flag) -> int:
    """'2' -> 2: a whole number of gloo ranks, 2 to 16 (a group needs two)."""
    return options.whole_number(value, source, "ranks", f"{CPU_RANKS.flag}=2", low=2, high=MAX_CPU_RANKS)


def parse_timeout(value: str, source: str = COLLECTIVE_TIMEOUT.flag) -> float:
    """'30' -> 30.0 seconds, more than 0 and at most a week."""
    example = f"{COLLECTIVE_TIMEOUT.flag}=60"
    return options.within_a_week(options.positive_number(value, source, "seconds", example), value, source, example)


def pytest_configure(config: pytest.Config) -> None:
    settings = CollectiveSettings(
        cpu_ranks=options.parse_or_default(config, CPU_RANKS, parse_ranks, DEFAULT_CPU_RANKS),
        timeout_s=options.parse_or_default(config, COLLECTIVE_TIMEOUT, parse_timeout, None),
    )
    run_state(config).put(settings)  # the collectives suite's part of the run context


def world_for(state: RunState, settings: CollectiveSettings) -> tuple[WorldSpec | None, str | None]:
    """The world this run's devices make (one rank per selected GPU, or gloo ranks on the CPU),
    or the reason they make none."""
    devices: list[DeviceInfo] = state.node_devices()
    gpus = [d for d in devices if d.is_gpu and d.index is not None]
    if not gpus:
        return cpu_world(settings.cpu_ranks), None
    pairs = [(d.index, gpu_ref(d).label) for d in gpus if d.index is not None]
    reason = world_skip_reason([label for _, label in pairs], cpu=False)
    if reason:
        return None, reason
    plan = state.node or NodePlan(tuple(gpus), outer_visibility(os.environ))
    return gpu_world(pairs, pinning(plan, tuple(index for index, _ in pairs)).env()), None


@dataclass(frozen=True)
class CollectiveRun:
    """A finished collectives run, as the suite's tests read it."""

    plan: Plan
    world: WorldSpec
    outcome: WorldOutcome

    def require_complete(self, op: str) -> None:
        """Fail naming the rank that died or hung when `op` was not measured everywhere."""
        __tracebackhide__ = True
        problem = self.outcome.incomplete(op, len(self.plan.sizes_of(op)))
        if problem:
            self.fail_for_group(problem)

    def fail_for_group(self, message: str) -> NoReturn:
        """Fail as what stopped the group (`outcome.group_failure`): a rank that could not join is the
        run's configuration, one that hung a timeout, one that died a crash; never a wrong result."""
        __tracebackhide__ = True
        category, fix = group_failure(self.outcome.problems)
        fail_as(category, message, fix)

    def metric_name(self, step: StepOutcome) -> str:
        """'collective.all_reduce.8ranks.256mib'; 'collective.all_reduce_bf16.8ranks.256mib' in bf16."""
        return f"collective.{step.op}.{self.world.size}ranks.{size_label(step.nbytes).lower()}"

    def pair_name(self, pair: PairOutcome) -> str:
        """'p2p.gpu2-gpu5.256mib'."""
        return f"p2p.{self.world.name(pair.src)}-{self.world.name(pair.dst)}.{size_label(pair.nbytes).lower()}"

    def pair_subject(self, pair: PairOutcome) -> str:
        """'GPU 2 -> GPU 5' (or 'rank 0 -> rank 1' on the CPU), as a slow pair is named."""
        return f"{self.world.subjects[pair.src]} -> {self.world.subjects[pair.dst]}"

    def step_extra(self, step: StepOutcome) -> dict[str, Any]:
        """What a busbw metric carries besides its value (the plots read op and size), and a
        training reduction's margin (its largest error / bound)."""
        extra = {
            COLLECTIVE_KEY: step.op,
            BYTES_KEY: step.nbytes,
            "world": step.world,
            "library": self.world.library,
            "dtype": split(step.op)[1].dtype,
            "algbw_gbps": step.algbw,
            "seconds": list(step.seconds),
        }
        if step.error_ratio is not None:
            extra["error_ratio"] = step.error_ratio
        return extra


@pytest.fixture(scope="session")
def collective_world(pytestconfig: pytest.Config) -> WorldSpec:
    """The ranks this run's devices make; skips (need vs found) when they make no group."""
    state = run_state(pytestconfig)
    world, reason = world_for(state, state.part(CollectiveSettings))
    if world is None:
        pytest.skip(reason or "the selected devices make no collectives group")
    return world


@pytest.fixture(scope="session")
def collective_plan(pytestconfig: pytest.Config, collective_world: WorldSpec) -> Plan:
    """What the world runs: the GPU or CPU plan of the run's level, with --rocm-collective-timeout."""
    state = run_state(pytestconfig)
    timeout_s = state.part(CollectiveSettings).timeout_s
    base = plan_for(collective_world.library, collective_world.size, state.settings.level)
    return base if timeout_s is None else replace(base, timeout_s=timeout_s)


@pytest.fixture(scope="session")
def collectives(
    collective_world: WorldSpec, collective_plan: Plan, tmp_path_factory: pytest.TempPathFactory
) -> CollectiveRun:
    """One collectives run over this run's devices, shared by the suite's tests (started on first use)."""
    from rocm_validate.collectives.launch import launch

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():  # a pinned worker: give rank 0 its GPU's cached memory
        free_device_memory()
    outcome = launch(collective_plan, collective_world, os.environ, tmp_path_factory.mktemp("collectives"))
    return CollectiveRun(collective_plan, collective_world, outcome)


# Negative controls of the training steps (steps.py `Plant`), comma-separated: grad:1:1.01 (rank 1's
# gradient contribution 1% off), slow:1:5 (rank 1's all-gathers 5 ms late).
PLANTS_VARIABLE = "ROCM_VALIDATE_TRAINING_PLANTS"
# The training steps' jobs to run, comma-separated (steps.py JOBS; the level's by default), e.g.
# fsdp,fsdp-float8 to record the Float8 step's baselines without the level's other jobs.
JOBS_VARIABLE = "ROCM_VALIDATE_TRAINING_JOBS"


@dataclass(frozen=True)
class StepsRun:
    """A finished training-steps run (steps.py), as the suite's tests read it: every rank's
    result (None where a rank gave none) and what stopped the group, culprits first."""

    plan: StepsPlan
    world: WorldSpec
    results: tuple[dict[str, Any] | None, ...]
    problems: tuple[str, ...]

    def require(self, job: str) -> list[dict[str, Any]]:
        """Every rank's result, or a failure naming the rank that died, hung or stopped before
        finishing `job` (a later job's failure leaves it standing)."""
        __tracebackhide__ = True
        if job not in self.plan.jobs:
            pytest.skip(
                f"the {job} step is not among this run's jobs ({', '.join(self.plan.jobs)}; {JOBS_VARIABLE} sets them)"
            )
        complete = [r for r in self.results if r is not None and job in r]
        if len(complete) != self.world.size:
            reasons = list(self.problems) + [
                f"{self.world.labels[r]}: stopped at {res['at']}: {res['error']}"
                for r, res in enumerate(self.results)
                if res and res.get("error")
            ]
            reasons = reasons or [f"{self.world.size - len(complete)} ranks gave no {job} result"]
            category, fix = group_failure(reasons)
            fail_as(category, f"the {job} step did not complete on every rank: " + "; ".join(reasons), fix)
        skipped = next((r[job]["skipped"] for r in complete if "skipped" in r[job]), None)
        if skipped:
            pytest.skip(skipped)
        return complete


@pytest.fixture(scope="session")
def training_steps(
    pytestconfig: pytest.Config, collective_world: WorldSpec, tmp_path_factory: pytest.TempPathFactory
) -> StepsRun:
    """One run of the node's training steps over this run's devices (started on first use)."""
    from rocm_validate.collectives.launch import run_ranks

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        free_device_memory()
    state = run_state(pytestconfig)
    plan = steps_plan_for(collective_world.library, state.settings.level)
    timeout_s = state.part(CollectiveSettings).timeout_s
    if timeout_s is not None:
        plan = replace(plan, timeout_s=timeout_s)
    jobs = os.environ.get(JOBS_VARIABLE, "")
    if jobs:
        plan = replace(plan, jobs=chosen_jobs(jobs, JOBS_VARIABLE))
    plants = os.environ.get(PLANTS_VARIABLE, "")
    if plants:
        plan = replace(plan, plants=tuple(Plant.parse(p) for p in plants.split(",") if p.strip()))
    results, notes = run_ranks(
        "rocm_validate.collectives.training",
        plan.arguments(),
        plan.timeout_s,
        collective_world,
        os.environ,
        tmp_path_factory.mktemp("training"),
        keys="training/",
    )
    problems = tuple(f"{collective_world.labels[r]}: {note}" for r, note in notes.items())
    return StepsRun(plan, collective_world, tuple(results), problems)


@pytest.fixture
def noise_band(pytestconfig: pytest.Config, rocm_device: DeviceInfo) -> Callable[[str, tuple[float | None, ...]], Any]:
    """band(metric name, (spread, spread)) -> (allowed fraction, how) from the perf gate's rule
    for that metric on this device (None: informational, not compared)."""

    def band(name: str, dispersions: tuple[float | None, ...]) -> Any:
        return pytestconfig.hook.pytest_rocm_noise_band(
            config=pytestconfig, name=name, backend=rocm_device.backend, dispersions=dispersions
        )

    return band
