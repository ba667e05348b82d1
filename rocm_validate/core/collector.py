"""Outcomes and metrics of every test, also from pytest-xdist workers, turned into the end of the
run a person reads (a line per suite, skips counted and grouped, the metrics table), readable
JUnit properties, and the JSON report (--rocm-report)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest

from rocm_validate.core.categorize import category_property, facts_of
from rocm_validate.core.levels import describe_time_used
from rocm_validate.core.session import RunState, is_xdist_worker
from rocm_validate.results.metrics import (
    NUMERICS_PROPERTY,
    PROPERTY_PREFIX,
    metrics_from_properties,
    readable,
)
from rocm_validate.results.report import FINDINGS_PROPERTY, TestResult
from rocm_validate.results.triage import CATEGORY_PROPERTY, classify

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


def _json_entries(properties: list[tuple[str, Any]], property_name: str) -> list[dict[str, Any]]:
    """The entries of every JSON-list property named `property_name` (numerics checks, findings)."""
    return [c for name, value in properties if name == property_name for c in json.loads(value)]


def _category(report: pytest.TestReport, suite: str | None) -> str:
    """The category the failed phase carries; a report made outside the test's process (a
    crashed xdist worker) has none and is classified from its message, and gets the property."""
    found = category_property(report.user_properties)
    if found is None:
        found = classify(facts_of(report, None, suite))
        report.user_properties.append((CATEGORY_PROPERTY, found))
    return found


def numerics_summary(checks: list[dict[str, Any]]) -> str:
    """'12 checks, all within bounds' or '12 checks, 1 failed: <check>' for JUnit."""
    failed = [c["check"] for c in checks if not c["passed"]]
    if not failed:
        return f"{len(checks)} checks, all within their tolerances"
    return f"{len(checks)} checks, {len(failed)} failed: {'; '.join(failed[:3])}"


def readable_properties(properties: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The properties as JUnit XML shows them: a metric as one line, the checks as a count."""
    metrics = {PROPERTY_PREFIX + m.name: readable(m) for m in metrics_from_properties(properties)}
    shown = []
    for name, value in properties:
        if name in metrics:
            shown.append((name, metrics[name]))
        elif name == NUMERICS_PROPERTY:
            shown.append((name, numerics_summary(json.loads(value))))
        elif name == FINDINGS_PROPERTY:
            shown.append((name, "; ".join(f"{f['check']} {f['status']}: {f['found']}" for f in json.loads(value))))
        else:
            shown.append((name, value))
    return shown


def _is_benchmark_banner(entry: Any) -> bool:
    return isinstance(entry, str) and entry.startswith("benchmark: ") and "(defaults:" in entry


class ResultCollector:
    """Gathers outcomes and metrics (also from xdist workers) and writes the summary and report."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    @pytest.hookimpl(wrapper=True)
    def pytest_report_header(self, config: pytest.Config) -> Any:
        """Leave out pytest-benchmark's banner: rocm-validate uses its statistics and JSON format,
        not its fixture, and the banner's defaults describe nothing this run measures."""
        found = yield
        return [
            [line for line in entry if not _is_benchmark_banner(line)] if isinstance(entry, list) else entry
            for entry in found
            if not _is_benchmark_banner(entry)
        ]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Record the phase, then leave JUnit XML (which reads the teardown report next) one line
        a person can read per metric instead of the JSON that carried it here."""
        properties = dict((n, v) for n, v in report.user_properties if isinstance(n, str))
        result = self.state.results.setdefault(
            report.nodeid, TestResult(report.nodeid, suite=properties.get("rocm_suite"))
        )
        result.duration_s += report.duration
        outcome = _outcome(report)
        if _SEVERITY.index(outcome) > _SEVERITY.index(result.outcome):
            result.outcome = outcome
            result.message = _message(report)
            if result.failed:
                result.category = _category(report, result.suite)
        if report.when == "teardown":
            result.metrics = metrics_from_properties(report.user_properties)
            result.numerics = _json_entries(report.user_properties, NUMERICS_PROPERTY)
            result.findings = _json_entries(report.user_properties, FINDINGS_PROPERTY)
            if not is_xdist_worker(self.state.config):
                report.user_properties = readable_properties(report.user_properties)

    def verdict(self) -> str | None:
        """The triage verdict over this run's suite tests (None when no suite test ran)."""
        from rocm_validate.results.report import check_records
        from rocm_validate.results.triage import verdict

        results = [r for r in self.state.results.values() if r.suite]
        if not results:
            return None
        device = self.state.device() if self.state.discovered else None
        return verdict(check_records(results, device.index if device is not None and device.is_gpu else None))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from rocm_validate.results.report import metrics_table, suite_summary_lines

        summary = suite_summary_lines(self.state.results.values())
        if summary:
            terminalreporter.write_sep("=", "rocm-validate summary")
            for line in summary:
                terminalreporter.write_line(line)
            if self.state.discovered:
                used = time.monotonic() - self.state.started
                device = self.state.device()
                terminalreporter.write_line(
                    f"rocm-validate level {describe_time_used(self.state.settings.level, device.is_gpu, used)}"
                )
        metrics = self.state.metrics()
        if metrics:
            terminalreporter.write_sep("=", "rocm-validate metrics")
            for line in metrics_table(metrics):
                terminalreporter.write_line(line)
        if self.state.settings.report_path is not None and self.state.report_written:
            terminalreporter.write_line(f"rocm-validate report: wrote {self.state.settings.report_path}")

    def write_verdict(self, terminalreporter: Any) -> None:
        """The verdict line, after every suite's own summary lines (see plugin.py)."""
        verdict = self.verdict()
        if verdict:
            terminalreporter.write_line(verdict, bold=True, red="pass:" not in verdict)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write the JSON report before the terminal summary, so the summary can say where it is."""
        settings = self.state.settings
        if is_xdist_worker(session.config) or settings.report_path is None:
            return
        from rocm_validate.results import jsonfile
        from rocm_validate.results.report import REPORT_SCHEMA, build_report

        touched = any(r.suite for r in self.state.results.values()) or self.state.discovered
        device = self.state.device() if touched else None
        results = list(self.state.results.values())
        report = build_report(settings.summary(), device, results, sys.argv, int(exitstatus), self.verdict())
        jsonfile.write_json(settings.report_path, report, REPORT_SCHEMA)
        self.state.report_written = True
