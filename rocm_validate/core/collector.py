"""Outcomes and metrics of every test, also from pytest-xdist workers, turned into the metrics
table at the end of the run and the JSON report (--rocm-report)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from rocm_validate.core.session import RunState, is_xdist_worker
from rocm_validate.results.metrics import metrics_from_properties
from rocm_validate.results.report import TestResult

COLLECTOR_NAME = "rocm_validate_collector"


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
        report = build_report(settings.summary(), device, results, sys.argv, int(exitstatus))
        jsonfile.write_json(settings.report_path, report, REPORT_SCHEMA)
