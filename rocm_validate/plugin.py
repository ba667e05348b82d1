"""pytest entry point of rocm-validate (the `pytest11` plugin): wires options, run state, suite
selection, requirement markers, the header and metric finalization; every concern's logic lives
in its subpackage (see the README's Layout).

This module imports only the standard library, pytest and torch-free project modules, so
`pytest --help` and runs that touch no suite never import torch or initialise a GPU.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from rocm_validate.core import hookspec, interruption, levels, options, outputs, requirements
from rocm_validate.core.categorize import CategorizedFailure, categorize
from rocm_validate.core.collector import COLLECTOR_NAME, ResultCollector
from rocm_validate.core.session import (
    PENDING_METRICS_KEY,
    STATE_KEY,
    SUITE_KEY,
    RunState,
    is_xdist_worker,
    run_state,
)
from rocm_validate.core.suites import (
    RUN_LAST_MARKER,
    named_but_deselected,
    run_order,
    suite_of,
    touches_suites,
)
from rocm_validate.errors import MarkerUsageError, UsageError
from rocm_validate.node import plan
from rocm_validate.results.metrics import Metric, Verdict, replace_properties

# Each concern registers its own hooks and fixtures; the suites' plugins import torch only inside them.
# Hooks are registered two ways: these modules, and an instance for what holds one run's state
# (the result collector below, core.outputs' and core.interruption's watchers), registered at
# configure time because they are made from that run's config.
pytest_plugins = (
    "rocm_validate.core.fixtures",
    "rocm_validate.core.oom",
    "rocm_validate.core.known_defects",  # --rocm-known-defects: failures of tracked stack defects as known-defect
    "rocm_validate.core.process_exit",  # os._exit in a test fails it, never a green exit without a verdict
    "rocm_validate.core.watchdog",  # ends a plain run whose test is stuck in native code past its timeout
    "rocm_validate.core.tunableop_file",  # --rocm-tunableop-file and the TunableOp fixtures
    "rocm_validate.node.workers",  # pytest-xdist's hooks for whole-node runs: one pinned worker per GPU
    "rocm_validate.node.sharing",  # per-GPU, shared and node-wide work; what each worker of a node run keeps
    "rocm_validate.core.compile_cache",  # torch.compile's caches: one folder per run's workers, kept between runs
    "rocm_validate.perf.plugin",
    "rocm_validate.convergence.plugin",
    "rocm_validate.preflight.plugin",
    "rocm_validate.collectives.plugin",
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, Any, Any]:
    """A run that ended before writing its outputs (a usage error at any stage, an internal
    error before its end) says so at the end of its markdown summary."""
    try:
        status = yield
    except UsageError as exc:
        outputs.note_stop(config, str(exc))
        raise
    if status == pytest.ExitCode.INTERNAL_ERROR:
        outputs.note_stop(config, None)
    return status


# First (pluggy calls a plugin registered earlier later, and this one is registered before the
# concerns it lists): the run context exists before any concern's configure fills its part, and the
# outputs are claimed before any other plugin's option can stop the run.
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for marker, description in requirements.MARKERS.items():
        config.addinivalue_line("markers", f"{marker}: {description}")
    options.refuse_empty_values(config)
    # The run context, before anything can stop the run: the outputs are its first part.
    state = RunState(config=config, resolve=plan.resolve)
    config.stash[STATE_KEY] = state
    claimed = outputs.claim_run_outputs(config)
    interruption.watch(config)  # Ctrl-C and SIGTERM end the run interrupted, never with a test counted passed
    state.settings = options.resolve_settings(config, claimed.report, claimed.summary)
    config.pluginmanager.register(ResultCollector(state), COLLECTOR_NAME)
    if _touches_suites(config):
        from rocm_validate.node import workers  # a plugin module: see _timeout_note

        workers.configure_controller(config, state.settings)


def _touches_suites(config: pytest.Config) -> bool:
    return run_state(config).settings.suite_given or touches_suites(
        list(config.args), config.invocation_params.dir, config.rootpath
    )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Choose the device before anything else runs (also under -q and before xdist starts its
    workers), so a device that cannot be validated is one usage error, exit status 4."""
    if _touches_suites(session.config):
        state = run_state(session.config)
        if state.settings.node_run and not is_xdist_worker(session.config):
            from rocm_validate.node import workers  # a plugin module: see _timeout_note

            workers.start_controller(session.config, state)
        device = state.device()
        _junit_suite_properties(session.config, device.device_key, device.torch_version)


def _junit_suite_properties(config: pytest.Config, device_key: str, torch_version: str | None) -> None:
    """The device key and torch version as properties of the JUnit XML test suite (--junitxml)."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is not None:
        xml.add_global_property("rocm_validate.device_key", device_key)
        xml.add_global_property("rocm_validate.torch", torch_version or "unknown")


def pytest_report_header(config: pytest.Config) -> list[str]:
    from rocm_validate.core.header import header_lines
    from rocm_validate.node import workers  # a plugin module: see _timeout_note

    state = run_state(config)
    touched = _touches_suites(config)
    lines = header_lines(state.settings, state.plan if touched else None, _selection(config))
    return lines + (workers.header_lines(state) if touched else [])


def _selection(config: pytest.Config) -> tuple[str, ...]:
    """What the user selected tests with: -k and -m expressions, and the test paths given on the
    command line (not the ini's testpaths), for the header's rerun command."""
    words = []
    for flag, option in (("-k", "keyword"), ("-m", "markexpr")):
        value = config.getoption(option, None)
        if value:
            words += [flag, str(value)]
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        words += [str(arg) for arg in config.args]
    return tuple(words)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Assign each test its suite and level; deselect (not skip) tests of suites not selected
    and tests above the run's level; give every selected test its timeout; run the preflight
    suite first and tests marked `rocm_run_last` last."""
    state = run_state(config)
    settings = state.settings
    user_timeout = config.getoption("timeout", None) is not None or bool(config.getini("timeout"))
    selected, deselected = [], []
    why: dict[str, str] = {}  # a deselected test -> the option that deselected it
    for item in items:
        suite_marker, level_marker = item.get_closest_marker("rocm_suite"), item.get_closest_marker(levels.MARKER)
        try:
            suite = suite_of(item.path, config.rootpath, suite_marker.args if suite_marker else None)
            level = levels.level_of(level_marker.args if level_marker else None)
        except ValueError as exc:
            outputs.stop_run(config, f"{item.nodeid}: {exc}")
            items[:] = []  # a pytest-xdist worker runs nothing; its controller ends the run with the error
            return
        item.stash[SUITE_KEY] = suite
        if (suite is None or suite in settings.suites) and levels.runs_at(level, settings.level):
            if suite is not None:
                item.user_properties.append(("rocm_suite", suite))
            if not user_timeout and item.get_closest_marker("timeout") is None:
                seconds = levels.timeout_for(suite, settings.level, settings.timeout_s)
                # signal, also in pytest-xdist workers (they run tests in their main thread): a test past its
                # timeout fails and the worker goes on; one stuck in native code is the watchdog's (core.watchdog)
                item.add_marker(pytest.mark.timeout(seconds, method="signal"))
            selected.append(item)
        else:
            deselected.append(item)
            why[item.nodeid] = _deselected_because(suite, level, settings)
    if deselected and config.args_source == pytest.Config.ArgsSource.ARGS:
        problem = named_but_deselected(list(config.args), config.invocation_params.dir, selected, deselected, why)
        if problem:
            outputs.stop_run(config, problem)
            items[:] = []
            return
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = sorted(
        selected, key=lambda i: run_order(i.stash[SUITE_KEY], i.get_closest_marker(RUN_LAST_MARKER) is not None)
    )


def _deselected_because(suite: str | None, level: str, settings: options.Settings) -> str:
    """Why the run's own selection leaves a test out, and the option that would keep it."""
    if suite is not None and suite not in settings.suites:
        chosen = ",".join(sorted(settings.suites))
        return (
            f"it belongs to the {suite} suite and this run selects {chosen}: add it with "
            f"{options.SUITE.flag}={','.join(sorted({*settings.suites, suite}))}"
        )
    return (
        f"it is a test of the {level} level and this run is at {settings.level}: run it with "
        f"{options.LEVEL.flag}={level}"
    )


def _timeout_note(item: pytest.Item) -> str:
    """Which test ran past its timeout, on which device; pytest-timeout's stack dump above it
    shows what it was doing."""
    # A plugin module (pytest_plugins): importing it at module level defeats its assertion rewriting.
    from rocm_validate.core.watchdog import device_phrase

    marker = item.get_closest_marker("timeout")
    limit = f"its {marker.args[0]:g} s timeout" if marker and marker.args else "its timeout"
    return (
        f"{item.nodeid} ran past {limit}{device_phrase(item.config)}; the stack dump shows what it was doing. "
        f"If the device is just slow, raise the limit with --rocm-timeout=SECONDS"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip tests whose requirement markers the device does not meet, saying need vs found."""
    names = [m.name for m in item.iter_markers() if m.name in requirements.REQUIREMENT_MARKERS]
    if not names:
        return
    state = run_state(item.config)
    device, devices = state.device(), state.devices()
    for marker in item.iter_markers():
        if marker.name not in requirements.REQUIREMENT_MARKERS:
            continue
        try:
            reason = requirements.skip_reason(marker.name, marker.args, device, devices)
        except MarkerUsageError as exc:
            pytest.fail(f"{item.nodeid}: {exc}", pytrace=False)
        if reason:
            pytest.skip(reason)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A not-validated skip fails under --rocm-strict; after the call phase, let gates finalize
    each metric (e.g. write a baseline on success), and a passed test whose metric could not be
    recorded fails; then a failure gets its triage category, and a known defect of the stack is
    reported as one (core.known_defects)."""
    report = yield
    if report.failed and "Timeout (>" in report.longreprtext:
        report.sections.append(("rocm-validate: timeout", _timeout_note(item)))
    raised = call.excinfo.value if call.excinfo is not None else None
    if isinstance(raised, requirements.NotValidated) and run_state(item.config).settings.strict:
        report.outcome = "failed"
        report.longrepr = f"{raised.msg} (--rocm-strict: a check that was not validated fails)"
    pending = item.stash.get(PENDING_METRICS_KEY, [])
    if call.when == "call" and pending:
        finalized = []
        for metric in pending:
            result = item.config.hook.pytest_rocm_metric_finalize(item=item, report=report, metric=metric)
            finalized.append(result if result is not None else metric)
        item.stash[PENDING_METRICS_KEY] = finalized
        replace_properties(item.user_properties, finalized)
        replace_properties(report.user_properties, finalized)
        unrecorded = [m for m in finalized if m.verdict == Verdict.NOT_RECORDED]
        if report.passed and unrecorded:
            raised = _not_recorded(report, unrecorded)
    categorize(item, report, raised, item.stash.get(SUITE_KEY, None))
    from rocm_validate.core.known_defects import judge  # a plugin module: see _timeout_note

    judge(item, report)
    return report


def _not_recorded(report: pytest.TestReport, metrics: list[Metric]) -> CategorizedFailure:
    """Fail a passed test whose measurements were not recorded (a baselines file that cannot be
    written): what the run was asked to record is not on disk. The failure the report carries."""
    failure = CategorizedFailure(
        "\n".join(f"{m.name}: not recorded: {m.message}" for m in metrics),
        "configuration",
        fix="free space or make the baselines folder writable, then record again",
    )
    report.outcome = "failed"
    report.longrepr = failure.msg
    return failure


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The triage verdict last, after every suite's summary lines."""
    collector = config.pluginmanager.get_plugin(COLLECTOR_NAME)
    if collector is not None:
        collector.write_verdict(terminalreporter)


def pytest_unconfigure(config: pytest.Config) -> None:
    collector = config.pluginmanager.get_plugin(COLLECTOR_NAME)
    if collector is not None:
        config.pluginmanager.unregister(collector)
