"""pytest entry point of rocm-validate: options, suite selection, markers, header, metrics, report.

This module imports only the standard library, pytest and torch-free project modules, so
`pytest --help` and runs that touch no suite never import torch or initialise a GPU.
"""

from __future__ import annotations

import sys
from typing import Any, Generator

import pytest

from rocm_validate.core import hookspec, options
from rocm_validate.core import requirements as markers
from rocm_validate.core.selection import suite_of, touches_suites
from rocm_validate.core.session import (
    PENDING_METRICS_KEY,
    STATE_KEY,
    SUITE_KEY,
    RunState,
    is_xdist_worker,
    run_state,
)
from rocm_validate.errors import MarkerUsageError, UsageError
from rocm_validate.results.metrics import metrics_from_properties, replace_properties
from rocm_validate.results.report import TestResult

pytest_plugins = ("rocm_validate.core.fixtures", "rocm_validate.perf.plugin", "rocm_validate.convergence.plugin")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for marker, description in markers.MARKERS.items():
        config.addinivalue_line("markers", f"{marker}: {description}")
    state = RunState(config=config, settings=options.resolve_settings(config))
    config.stash[STATE_KEY] = state
    config.pluginmanager.register(ResultCollector(state), _COLLECTOR_NAME)


def pytest_report_header(config: pytest.Config) -> list[str]:
    from rocm_validate.results.report import header_lines

    state = run_state(config)
    device = None
    if state.settings.suite_given or touches_suites(list(config.args), config.invocation_params.dir, config.rootpath):
        device = state.device()
    return header_lines(state.settings, device)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Assign each test its suite; deselect (not skip) tests of suites not selected."""
    state = run_state(config)
    selected, deselected = [], []
    for item in items:
        marker = item.get_closest_marker("rocm_suite")
        try:
            suite = suite_of(item.path, config.rootpath, marker.args if marker else None)
        except ValueError as exc:
            raise UsageError(f"{item.nodeid}: {exc}") from None
        item.stash[SUITE_KEY] = suite
        if suite is None or suite in state.settings.suites:
            if suite is not None:
                item.user_properties.append(("rocm_suite", suite))
            selected.append(item)
        else:
            deselected.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip tests whose requirement markers the device does not meet, saying need vs found."""
    names = [m.name for m in item.iter_markers() if m.name in markers.REQUIREMENT_MARKERS]
    if not names:
        return
    state = run_state(item.config)
    device, devices = state.device(), state.devices()
    for marker in item.iter_markers():
        if marker.name not in markers.REQUIREMENT_MARKERS:
            continue
        try:
            reason = markers.skip_reason(marker.name, marker.args, device, devices)
        except MarkerUsageError as exc:
            pytest.fail(f"{item.nodeid}: {exc}", pytrace=False)
        if reason:
            pytest.skip(reason)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """After the call phase, let gates finalize each metric (e.g. write a baseline on success)."""
    report = yield
    if call.excinfo is not None and call.excinfo.typename == "OutOfMemoryError":
        report.sections.append(("rocm-validate: out of device memory", _release_device_memory()))
    pending = item.stash.get(PENDING_METRICS_KEY, [])
    if call.when == "call" and pending:
        finalized = []
        for metric in pending:
            result = item.config.hook.pytest_rocm_metric_finalize(item=item, report=report, metric=metric)
            finalized.append(result if result is not None else metric)
        item.stash[PENDING_METRICS_KEY] = finalized
        replace_properties(item.user_properties, finalized)
        replace_properties(report.user_properties, finalized)
    return report


def _release_device_memory() -> str:
    """After an OOM: free the cached blocks so later tests start clean, and say what is free now."""
    import gc

    torch = sys.modules.get("torch")
    gc.collect()
    if torch is None or not torch.cuda.is_available():
        return "host memory exhausted; lower the problem size or run fewer pytest-xdist workers"
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    return (
        f"device memory now free: {free / 1024**3:.1f} GiB of {total / 1024**3:.1f} GiB after releasing cached "
        "blocks; this test needs more than was free: lower the problem size, close other processes on the GPU "
        "(HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES), or run fewer pytest-xdist workers per GPU"
    )


def _outcome(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.failed:
        return "failed" if report.when == "call" else "error"
    return "skipped" if report.skipped else "passed"


def _message(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    if report.failed:
        return report.longreprtext[-4000:]
    return ""


_SEVERITY = ("passed", "xfailed", "xpassed", "skipped", "failed", "error")


class ResultCollector:
    """Gathers outcomes and metrics (also from xdist workers) and writes the table and report."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict((n, v) for n, v in report.user_properties if isinstance(n, str))
        result = self.state.results.setdefault(
            report.nodeid, TestResult(report.nodeid, suite=properties.get("rocm_suite"))
        )
        result.duration_s += report.duration
        outcome = _outcome(report)
        if _SEVERITY.index(outcome) > _SEVERITY.index(result.outcome):
            result.outcome = outcome
            result.message = _message(report)
        if report.when == "teardown":
            result.metrics = metrics_from_properties(report.user_properties)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from rocm_validate.results.report import metrics_table

        metrics = self.state.metrics()
        if not metrics:
            return
        terminalreporter.write_sep("=", "rocm-validate metrics")
        for line in metrics_table(metrics):
            terminalreporter.write_line(line)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        settings = self.state.settings
        if is_xdist_worker(session.config) or settings.report_path is None:
            return
        from rocm_validate.results import jsonfile
        from rocm_validate.results.report import REPORT_SCHEMA, build_report

        touched = any(r.suite for r in self.state.results.values()) or self.state.discovered
        device = self.state.device() if touched else None
        results = list(self.state.results.values())
        report = build_report(settings, device, results, sys.argv, int(exitstatus))
        jsonfile.write_json(settings.report_path, report, REPORT_SCHEMA)


_COLLECTOR_NAME = "rocm_validate_collector"


def pytest_unconfigure(config: pytest.Config) -> None:
    collector = config.pluginmanager.get_plugin(_COLLECTOR_NAME)
    if collector is not None:
        config.pluginmanager.unregister(collector)
