"""pytest side of the perf suite: its options, the `perf` fixture, gating outcomes, baseline writes,
the benchmark export and the summary of what --update-baselines did.

Imports only the standard library, pytest and torch-free project modules at module level.
"""

from __future__ import annotations

import statistics
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from rocm_validate.core import options, outputs
from rocm_validate.core.commands import Commands
from rocm_validate.core.oom import free_device_memory
from rocm_validate.core.session import SUITE_KEY, is_xdist_worker, run_state
from rocm_validate.core.suites import suite_of_nodeid
from rocm_validate.errors import UsageError
from rocm_validate.perf import gate
from rocm_validate.perf.floors import FloorTable, near_misses
from rocm_validate.perf.recorder import (
    ITEM_STATE_KEY,
    PerfContext,
    PerfRecorder,
    PerfSettings,
    raise_outcome,
)
from rocm_validate.results.metrics import Metric, Verdict, format_number

if TYPE_CHECKING:
    from rocm_validate.platform.devices import DeviceInfo


@dataclass
class PerfRun:
    """The perf suite's part of the run context: made when its --rocm-benchmark-json is claimed
    (with the run's outputs), its settings filled by its pytest_configure, the rest as the run goes."""

    benchmark_json: Path | None
    settings: PerfSettings = field(init=False)  # set by pytest_configure, after the run's own settings
    context: PerfContext | None = None  # this process's, once a perf test asked for it
    header: list[str] = field(default_factory=list)
    floors: FloorTable | None = None
    baselines: Path | None = None  # the baselines file, and the names of its entries
    baseline_names: tuple[str, ...] = ()
    partial: bool = False  # a perf test was deselected
    notes: list[str] = field(default_factory=list)  # end-of-run notes: floors a partial run could not match


def perf_run(config: pytest.Config) -> PerfRun:
    return run_state(config).part(PerfRun)


WINDOW = options.OptionSpec(
    "--rocm-perf-window",
    "rocm_perf_window",
    "ROCM_VALIDATE_PERF_WINDOW",
    "scale every perf measurement window by this factor (default 1; more is quieter and slower)",
    "FACTOR",
)
BENCHMARK_JSON = options.OptionSpec(
    "--rocm-benchmark-json",
    None,
    None,
    "also write the perf metrics as pytest-benchmark JSON (for dashboards) to this path",
    "PATH",
)
FLOORS = options.OptionSpec(
    "--rocm-floors",
    "rocm_floors",
    "ROCM_VALIDATE_FLOORS",
    "folder of floors of your own (<device-key>.json, the baselines' format), before the shipped table",
    "DIR",
)
THRESHOLDS_INI = "rocm_perf_thresholds"
THRESHOLDS_HELP = f"per-metric gate thresholds, one rule a line: {gate.THRESHOLD_FORMS}"
# The shortest window factor: below it a window holds too few rounds to measure its own noise.
MIN_WINDOW_FACTOR = 0.25
MAX_WINDOW_FACTOR = 20.0
# The extended level measures over windows four times as long (unless --rocm-perf-window says otherwise).
EXTENDED_WINDOW_FACTOR = 4.0


def pytest_addoption(parser: pytest.Parser) -> None:
    for spec in (WINDOW, FLOORS, BENCHMARK_JSON):
        options.add_spec(parser, spec)
    parser.addini(THRESHOLDS_INI, THRESHOLDS_HELP, type="linelist", default=[])


def parse_window(value: str, source: str = WINDOW.flag) -> float:
    """'2' -> 2.0; a factor from 0.25 to 20."""
    return options.positive_number(
        value,
        source,
        "factor",
        f"{WINDOW.flag}=2",
        within=(MIN_WINDOW_FACTOR, MAX_WINDOW_FACTOR),
        why=" (shorter windows hold too few rounds to measure their noise)",
    )


def resolve_perf_settings(config: pytest.Config) -> PerfSettings:
    """Read the perf options once (after the run's own settings); raises UsageError naming the bad value."""
    try:
        rules = gate.parse_rules(config.getini(THRESHOLDS_INI))
    except ValueError as exc:
        raise UsageError(f"{THRESHOLDS_INI} (ini): {exc}") from None
    extended = run_state(config).settings.level == "extended"
    return PerfSettings(
        window_factor=options.parse_or_default(
            config, WINDOW, parse_window, EXTENDED_WINDOW_FACTOR if extended else 1.0
        ),
        rules=rules,
        benchmark_json=perf_run(config).benchmark_json,
        floors_dir=options.existing_folder(config, FLOORS, "a folder of <device-key>.json floors"),
    )


def pytest_rocm_claim_outputs(config: pytest.Config) -> None:
    """--rocm-benchmark-json, claimed with the run's outputs, before any option can stop the run."""
    run_state(config).put(PerfRun(outputs.claim(config, BENCHMARK_JSON, "benchmarks.json")))


def pytest_configure(config: pytest.Config) -> None:
    """After rocm_validate.plugin's pytest_configure (tryfirst, for the outputs) has resolved the
    run-wide settings."""
    perf_run(config).settings = resolve_perf_settings(config)


def pytest_sessionstart(session: pytest.Session) -> None:
    """With the perf suite selected, check this device's baseline file before any test runs:
    a corrupted, truncated or wrong-schema file is a usage error naming the file and the fix."""
    config = session.config
    state = run_state(config)
    if "perf" not in state.settings.suites or is_xdist_worker(config):
        return
    from rocm_validate.errors import BaselineError
    from rocm_validate.perf.baselines import BaselineStore

    device = state.device()
    store = BaselineStore(
        state.settings.baselines_dir,
        device.device_key,
        Commands(state.settings, device).record(),
        aliases=device.key_aliases,
    )
    run = perf_run(config)
    perf = run.settings
    try:
        entries = store.read()
        floors = FloorTable(device, perf.floors_dir)
    except BaselineError as exc:
        raise UsageError(str(exc)) from None
    run.floors, run.baselines, run.baseline_names = floors, store.path, tuple(entries)
    described = f"{store.path} ({len(entries)} entries)" if entries else f"{store.path} (none yet)"
    described += f", {store.note}" if store.note else ""
    rules = f"{len(perf.rules)} {THRESHOLDS_INI} rule(s) before the defaults" if perf.rules else "default thresholds"
    lines = [f"rocm-validate perf: baselines {described}; {floors.describe()}; {rules}; window x{perf.window_factor:g}"]
    workers = None if state.settings.node_run else getattr(config.option, "numprocesses", None)  # pinned: one GPU each
    warning = shared_device_warning(workers, device)
    run.header = lines + ([warning] if warning else [])


def pytest_deselected(items: list[pytest.Item]) -> None:
    """A perf test left out (-k, -m, --lf, the level): the run measures only part of the suite."""
    for item in items:
        if item.stash.get(SUITE_KEY, None) == "perf" or suite_of_nodeid(item.nodeid, item.config.rootpath) == "perf":
            perf_run(item.config).partial = True


def _partial(config: pytest.Config, perf_results: list[Any]) -> bool:
    """Whether this run measured only part of the perf suite: a perf test deselected or skipped,
    or the command line naming files or tests rather than folders."""
    named = config.args_source == pytest.Config.ArgsSource.ARGS and any(
        "::" in arg or not (config.invocation_params.dir / arg).is_dir() for arg in config.args
    )
    return perf_run(config).partial or named or any(r.outcome == "skipped" for r in perf_results)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, Any, Any]:
    """After the tests, before the reports: user floors that gated nothing, and baseline entries
    whose name is a near miss of a metric that found no baseline (a hand-edited typo: the entry
    gates nothing and the metric goes ungated). In a run of the whole perf suite either is a usage
    error, exit status 4; in a partial run, where the name may be of a metric not measured here, a
    warning."""
    result = yield
    config = session.config
    metrics = _perf_metrics(config)
    if not metrics:
        return result
    run = perf_run(config)
    floors = run.floors
    found = []
    unmatched = floors.unmatched(m.name for m in metrics) if floors is not None and floors.user_file else []
    if floors is not None and unmatched:
        found.append((FLOORS.flag, floors.user_file, "floor(s)", unmatched))
    baselines, entries = run.baselines, run.baseline_names
    ungated = [m.name for m in metrics if m.gate is None or m.gate.gated_by != "baseline"]
    misnamed = near_misses(set(entries) - {m.name for m in metrics}, ungated)
    if misnamed:
        found.append((options.BASELINES.flag, baselines, "baseline entry(ies)", misnamed))
    if not found:
        return result
    state = run_state(config)
    if _partial(config, [r for r in state.results.values() if r.suite == "perf"]):
        run.notes = [
            f"{len(names)} {what} of {path} gated nothing: not measured in this run: {', '.join(names)}"
            for _, path, what, names in found
        ]
        return result
    flag, path, what, names = found[0]
    raise UsageError(
        f"{flag}: {path} holds {what.replace('(s)', 's').replace('y(ies)', 'ies')} no metric of this run of the whole perf suite is named by, "
        f"so they gate nothing: {', '.join(names)}. Fix the names (the metrics table lists every recorded name) or "
        "remove them"
    )


def shared_device_warning(workers: object, device: DeviceInfo) -> str | None:
    """A header warning when several xdist workers would time kernels on one GPU at once."""
    if not isinstance(workers, int) or workers < 2 or not device.is_gpu:
        return None
    return (
        f"rocm-validate perf: WARNING: {workers} xdist workers share {device.torch_device}, so each times the "
        "others' kernels too; run the perf suite with -n 0 for figures worth gating"
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    return perf_run(config).header


@pytest.fixture(scope="session")
def perf_context(pytestconfig: pytest.Config, rocm_device: DeviceInfo) -> Generator[PerfContext, None, None]:
    """The perf suite's shared state for this process (device, plan, thresholds, baselines)."""
    run = perf_run(pytestconfig)
    context = run.context = PerfContext(run_state(pytestconfig).settings, run.settings, rocm_device)
    yield context
    context.close()


@pytest.fixture
def perf(
    request: pytest.FixtureRequest, perf_context: PerfContext, record_rocm_metric: Any
) -> Generator[PerfRecorder, None, None]:
    """measure(fn) / measure_interleaved({...}) then throughput(...), latency(...), speedup(...),
    record(...): each metric is gated against this device's baseline as it is recorded.

    On the CPU the test runs on one thread: the CPU run is a CI-sized smoke test, and on a
    shared CI machine another job descheduling one OpenMP thread slows every barrier 10-20x.
    """
    recorder = PerfRecorder(
        perf_context, request.node, record_rocm_metric, lambda: request.getfixturevalue("torch_device")
    )
    if perf_context.device.is_gpu:
        yield recorder
        return
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield recorder
    finally:
        torch.set_num_threads(threads)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """After a perf test's body: fail on regressions, skip on missing baselines."""
    result = yield
    state = item.stash.get(ITEM_STATE_KEY, None)
    context = perf_run(item.config).context
    if state is not None and context is not None:
        raise_outcome(state, context.device.device_key, context.update_command)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, Any, Any]:
    """After a perf test: give its device memory back, so the next one is timed on a clean heap."""
    try:
        return (yield)
    finally:
        if item.stash.get(SUITE_KEY, None) == "perf":
            free_device_memory()


def pytest_rocm_metric_finalize(item: pytest.Item, report: Any, metric: Any) -> Any:
    """Under --update-baselines, write the perf metrics of a passed test (and only of a passed one)."""
    state = item.stash.get(ITEM_STATE_KEY, None)
    context = perf_run(item.config).context
    if state is None or context is None or metric.name not in state.names or not context.settings.update_baselines:
        return None
    if metric.verdict in (Verdict.INVALID, Verdict.REFUSED):
        return None
    if not report.passed:
        return metric.with_verdict(Verdict.NOT_RECORDED, "baseline not written: the test did not pass")
    return context.write_baseline(metric)


def pytest_rocm_noise_band(
    config: pytest.Config, name: str, backend: str, dispersions: tuple[float | None, ...]
) -> tuple[float, str] | None:
    """The gate's band for `name` on `backend` (its threshold and the combined noise), for peer
    comparisons and bandwidth dips; None for an informational metric or one not compared across
    GPUs (host timings)."""
    return gate.noise_band(name, backend, perf_run(config).settings.rules)(*dispersions)


def _perf_metrics(config: pytest.Config) -> list[Metric]:
    return [m for m in run_state(config).metrics() if m.gate is not None]


_UPDATE_VERDICTS = (
    (Verdict.UPDATED, "written"),
    (Verdict.FOLDED, "folded into this stack's runs"),
    (Verdict.REFUSED, "refused as regressions (--rocm-accept-regressions records them)"),
    (Verdict.NOISY, "refused as too noisy"),
    (Verdict.NOT_RECORDED, "not recorded"),
)


def change_line(metric: Any) -> str:
    """'  gemm.bf16.8192x8192x8192: 680.2 -> 688 TFLOP/s (+1.1%)', or 'new' without an old value."""
    new = f"{format_number(metric.value)} {metric.unit}"
    if not metric.baseline:
        return f"  {metric.name}: new, {new}"
    return f"  {metric.name}: {format_number(metric.baseline)} -> {new} ({metric.value / metric.baseline - 1:+.1%})"


def summary_lines(metrics: list[Any], update: bool) -> list[str]:
    """'perf: 10 pass, 1 regressed' or, under --update-baselines, every change old -> new, for
    written, kept and refused entries alike."""
    counts: dict[str, list[Any]] = {}
    for metric in metrics:
        counts.setdefault(metric.verdict, []).append(metric)
    if not update:
        gated = {"baseline": 0, "floor": 0, "none": 0}
        for metric in metrics:
            gated[(metric.gate and metric.gate.gated_by) or "none"] += 1
        return [
            "perf: " + ", ".join(f"{len(found)} {verdict}" for verdict, found in sorted(counts.items())),
            f"perf gated by a baseline: {gated['baseline']}, by a floor only: {gated['floor']}, by neither: {gated['none']}",
            *detection_lines(metrics),
        ]
    lines = []
    for verdict, label in _UPDATE_VERDICTS:
        found = counts.get(verdict, [])
        if found:
            lines.append(f"baselines {label}: {len(found)}")
            lines.extend(change_line(m) for m in found)
    return lines


def detection_lines(metrics: list[Any]) -> list[str]:
    """'perf detects (95% of the time): median 3.1%, worst gated 8.9% (copy.host_to_device.pinned.256mib);
    per clock cycle: 12 metrics; host-side, shown not gated: launch.empty_kernel.host_us (31%)'."""
    judged = [m for m in metrics if m.detectable is not None and m.baseline is not None]
    gated = [m for m in judged if m.verdict != Verdict.INFORMATIONAL]
    if not judged:
        return []
    parts = []
    if gated:
        worst = max(gated, key=lambda m: m.detectable)
        parts.append(
            f"median {statistics.median(m.detectable for m in gated):.1%}, worst gated {worst.detectable:.1%} ({worst.name})"
        )
    per_clock = sum(1 for m in judged if m.gate is not None and m.gate.basis == "per-clock")
    if per_clock:
        parts.append(f"judged per clock cycle: {per_clock}")
    # informational for want of detection power, not by an informational rule (the gate facts name one)
    blunt = [m for m in judged if m.verdict == Verdict.INFORMATIONAL and not (m.gate and m.gate.informational)]
    if blunt:
        parts.append("host-side, shown not gated: " + ", ".join(f"{m.name} ({m.detectable:.0%})" for m in blunt))
    return ["perf detects a slowdown (95% of the time) of: " + "; ".join(parts)]


def telemetry_line(metrics: list[Any]) -> str:
    """'telemetry (nvidia-ml-py): clock 1410-1755 MHz, 55-71 C, 420-700 W; limits seen: sw-power-cap'
    over every measurement window, so throttling during the run is visible at a glance."""
    readings = [m.extra.get("telemetry") or {} for m in metrics]
    samples = [t["after"] for t in readings if t.get("after")]
    if not samples:
        reasons = sorted({t["reason"] for t in readings if t.get("reason")})
        return f"telemetry: none ({'; '.join(reasons) or 'no timed metric'})"
    sources = sorted({str(t.get("source")) for t in readings if t.get("after")})
    parts = []
    for key, unit in (("clock_mhz", "MHz"), ("temperature_c", "C"), ("power_w", "W")):
        values = [s[key] for s in samples if s.get(key) is not None]
        if values:
            parts.append(f"{min(values):.0f}-{max(values):.0f} {unit}")
    limits = sorted({r for s in samples for r in s.get("slowdowns") or []})
    return f"telemetry ({', '.join(sources)}): {', '.join(parts) or 'no readings'}; limits seen: {', '.join(limits) or 'none'}"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    for note in perf_run(config).notes:
        terminalreporter.write_line(f"rocm-validate perf: {note}", yellow=True)
    metrics = _perf_metrics(config)
    if not metrics:
        return
    update = run_state(config).settings.update_baselines
    for line in [*summary_lines(metrics, update), telemetry_line(metrics)]:
        if line.startswith("  "):
            terminalreporter.write_line(line)
        else:
            terminalreporter.write_line(f"rocm-validate {line}", yellow="refused" in line or "not recorded" in line)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    run = run_state(config).find(PerfRun)
    perf = None if run is None else run.settings
    if perf is None or perf.benchmark_json is None or is_xdist_worker(config):
        return
    from rocm_validate.perf.benchmark_json import (
        BENCHMARK_SCHEMA,
        benchmark_document,
        collect_machine_and_commit,
    )
    from rocm_validate.results import jsonfile

    state = run_state(config)
    device = state.device() if state.discovered or "perf" in state.settings.suites else None
    machine, commit = collect_machine_and_commit()
    document = benchmark_document(_perf_metrics(config), device, machine, commit)
    outputs.write(
        config,
        "benchmark json",
        perf.benchmark_json,
        lambda path: jsonfile.write_json(path, document, BENCHMARK_SCHEMA),
    )
