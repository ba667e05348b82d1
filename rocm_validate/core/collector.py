"""Outcomes and metrics of every test, also from pytest-xdist workers, turned into the end of the
run a person reads (a line per suite, skips counted and grouped, the metrics table), readable
JUnit properties, and the JSON report (--rocm-report)."""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest
from _pytest.junitxml import xml_key

from rocm_validate.core.categorize import blame_property, category_property, facts_of, fix_property
from rocm_validate.core.interruption import interruption_of
from rocm_validate.core.outputs import append_text, outputs_of, write
from rocm_validate.core.session import RunState, is_xdist_worker
from rocm_validate.core.suites import BESIDE_SUITES, TIMING_SUITES, suite_of_nodeid
from rocm_validate.results.known_defects import KNOWN_DEFECT_PROPERTY, Matched, known_defect_of
from rocm_validate.results.margins import CheckMargins, margins_in
from rocm_validate.results.metrics import (
    NUMERICS_PROPERTY,
    PROPERTY_PREFIX,
    metrics_from_properties,
    readable,
)
from rocm_validate.results.peers import peer_flags
from rocm_validate.results.report import FINDINGS_PROPERTY, WORK_PROPERTY, TestResult
from rocm_validate.results.time_used import TimeUsed, WorkSpan, lane_spans, time_table, time_used
from rocm_validate.results.triage import CATEGORY_PROPERTY, RunEnd, classify
from rocm_validate.text import clip_start

if TYPE_CHECKING:
    from rocm_validate.results.peers import PeerFinding

COLLECTOR_NAME = "rocm_validate_collector"


def _outcome(report: pytest.TestReport) -> str:
    known = known_defect_of(report.user_properties)
    if known is not None and known.reproduced:
        return "known-defect"  # an expected failure, or under --rocm-strict a failure, of a known stack defect
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.failed:  # as pytest counts it: an error in setup or teardown, a failure otherwise (a crashed worker)
        return "error" if report.when in ("setup", "teardown") else "failed"
    return "skipped" if report.skipped else "passed"


def _message(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return re.sub(r"^[\w.]*NotValidated: ", "", str(report.longrepr[2]))
    if report.failed:
        return clip_start(report.longreprtext, 4000)
    return ""


_SEVERITY = ("passed", "xfailed", "xpassed", "skipped", "known-defect", "failed", "error")


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


def numerics_summary(checks: list[CheckMargins]) -> str:
    """'12 checks, all within bounds' or '12 checks, 1 failed: <check>' for JUnit."""
    failed = [c.check for c in checks if not c.passed]
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
            shown.append((name, numerics_summary(margins_in([(name, value)]))))
        elif name == KNOWN_DEFECT_PROPERTY:
            known = Matched.from_dict(json.loads(value))
            shown.append((name, f"{known.label}, {known.state}; workaround: {known.workaround}"))
        elif name == FINDINGS_PROPERTY:
            shown.append((name, "; ".join(f"{f['check']} {f['status']}: {f['found']}" for f in json.loads(value))))
        else:
            shown.append((name, value))
    return shown


_IMPORT_FIX = "install what the file imports, or fix or deselect the file, then rerun"


def _collect_message(report: pytest.CollectReport) -> str:
    """The last line of a collection error that names the error: 'ModuleNotFoundError: No module named x'."""
    lines = [line.strip() for line in str(report.longrepr).splitlines() if line.strip()]
    named = [line.removeprefix("E").strip() for line in lines if re.match(r"^E\s+\w+(Error|Exception)\b", line)]
    return (named or lines or ["could not be collected"])[-1]


def _is_benchmark_banner(entry: Any) -> bool:
    return isinstance(entry, str) and entry.startswith("benchmark: ") and "(defaults:" in entry


class ResultCollector:
    """Gathers outcomes and metrics (also from xdist workers) and writes the summary and report."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.peers: list[PeerFinding] = []  # each GPU's metrics against its peers (whole-node runs)
        self.exit_status: int | None = None
        self.unimportable: list[str] = []  # 'suites/x/test_y.py: ModuleNotFoundError: ...', one per file

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

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A test file that could not be collected (an import error in it): an error of category
        configuration in the outputs, named by the verdict, never taken for an interruption."""
        if not report.failed:
            return
        message = _collect_message(report)
        self.state.results[report.nodeid] = TestResult(
            report.nodeid, outcome="error", message=message, category="configuration", fix=_IMPORT_FIX
        )
        self.unimportable.append(f"{report.nodeid}: {message}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Record the phase, then leave JUnit XML (which reads the teardown report next) one line
        a person can read per metric instead of the JSON that carried it here."""
        properties = dict((n, v) for n, v in report.user_properties if isinstance(n, str))
        config = self.state.config
        marked = properties.get("rocm_suite")
        suite = str(marked) if marked else suite_of_nodeid(report.nodeid, config.rootpath)
        node_wide = config.hook.pytest_rocm_node_wide(config=config, nodeid=report.nodeid)
        gpu = None if node_wide else self.state.report_gpu(report)
        work = properties.get(WORK_PROPERTY)
        fresh = TestResult(report.nodeid, suite=suite, gpu=gpu, work=None if work is None else str(work))
        result = self.state.results.setdefault(fresh.title, fresh)
        result.duration_s += report.duration
        start, stop = getattr(report, "start", 0.0) or 0.0, getattr(report, "stop", 0.0) or 0.0
        if start > 0 and stop >= start:
            result.started = start if result.started is None else min(result.started, start)
            result.stopped = stop if result.stopped is None else max(result.stopped, stop)
        outcome = _outcome(report)
        known = known_defect_of(report.user_properties)
        if known is not None:
            result.known_defect = known
        if _SEVERITY.index(outcome) > _SEVERITY.index(result.outcome):
            result.outcome = outcome
            result.message = _message(report)
            if result.failed:
                result.category = _category(report, result.suite)
                result.fix = fix_property(report.user_properties)
                result.blamed_gpus = blame_property(report.user_properties)
            if gpu is not None and report.when not in ("setup", "call", "teardown"):
                result.message = f"{gpu.label}: {result.message}"  # xdist's report of a crashed worker
        if report.when == "teardown":
            result.metrics = [
                m if m.gpu or not gpu else replace(m, gpu=gpu) for m in metrics_from_properties(report.user_properties)
            ]
            result.numerics = _json_entries(report.user_properties, NUMERICS_PROPERTY)
            result.findings = _json_entries(report.user_properties, FINDINGS_PROPERTY)
            if not is_xdist_worker(self.state.config):
                report.user_properties = readable_properties(report.user_properties)

    def run_end(self) -> RunEnd:
        """How the run ended besides its checks: interrupted, stopped on a usage error, and what
        --update-baselines recorded."""
        config = self.state.config
        watch = interruption_of(config)
        settings = self.state.settings
        recording = tuple(str(m.verdict) for m in self.state.metrics()) if settings.update_baselines else None
        from rocm_validate.core.known_defects import known_defects  # a plugin module: see plugin._timeout_note

        table = known_defects(config)
        return RunEnd(
            interrupted=watch.how if watch is not None else None,
            stopped=outputs_of(config).stopped,
            recording=recording,
            strict=settings.strict,
            peers=peer_flags(self.peers),
            expired=tuple(
                f"entry {d.id!r} of {d.source} (owner {d.owner}, expired {d.expires})" for d in table.expired
            ),
            exit_status=self.exit_status,
            unimportable=tuple(self.unimportable),
        )

    def verdict(self) -> str | None:
        """The triage verdict over this run's suite tests; None for a run of tests of no suite
        (the plugin's own tests), and 'nothing was validated' for a run that ran no test."""
        from rocm_validate.results.report import check_records
        from rocm_validate.results.triage import verdict

        results = [r for r in self.state.results.values() if r.suite]
        end = self.run_end()
        if (
            not results
            and self.state.results
            and not self.state.discovered
            and not end.stopped
            and not end.unimportable
        ):
            return None
        device = self.state.device() if self.state.discovered else None
        node = self.state.node
        node_gpus = [ref for index in node.gpus if (ref := node.gpu_ref(index))] if node is not None else []
        return verdict(
            check_records(
                results,
                device.index if device is not None and device.is_gpu else None,
                node_gpus,
                device.pci_bus_id if device is not None else None,
            ),
            end,
        )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from rocm_validate.results.report import metrics_table, suite_summary_lines

        summary = suite_summary_lines(self.state.results.values())
        if summary:
            terminalreporter.write_sep("=", "rocm-validate summary")
            for line in summary:
                terminalreporter.write_line(line)
            if self.state.discovered:
                used = self.time_used()
                terminalreporter.write_line(f"rocm-validate level {self.state.plan.budget.used(used.wall_s)}")
                terminalreporter.write_sep("=", "rocm-validate time")
                for line in time_table(used):
                    terminalreporter.write_line(line)
        metrics = self.state.metrics()
        if metrics:
            terminalreporter.write_sep("=", "rocm-validate metrics")
            for line in metrics_table(metrics):
                terminalreporter.write_line(line)
        if self.state.node is not None and self.state.results and not is_xdist_worker(self.state.config):
            from rocm_validate.results.summary import node_table, peer_lines

            terminalreporter.write_sep("=", "rocm-validate node")
            for line in node_table(self.state.node.devices, self.state.results.values(), self.peers):
                terminalreporter.write_line(line)
            for line in peer_lines(self.peers):
                terminalreporter.write_line(line, red=True)
        found = outputs_of(self.state.config)
        for line in found.wrote:
            terminalreporter.write_line(line)
        for line in found.failed:
            terminalreporter.write_line(line, red=True)

    def time_used(self) -> TimeUsed:
        """Where this run's time went: wall clock, and the tests' durations by suite, kind of work and GPU."""
        node = self.state.node
        beside = BESIDE_SUITES if node is not None and node.beside else ()
        results = list(self.state.results.values())
        used = time_used(
            time.monotonic() - self.state.started,
            ((r.suite, r.work, r.gpu.index if r.gpu else None, r.duration_s) for r in results),
            beside,
        )
        if node is None:
            return used
        spans = (
            WorkSpan(r.suite, r.gpu.index if r.gpu else None, r.started, r.stopped)
            for r in results
            if r.started is not None and r.stopped is not None
        )
        return replace(used, lanes=lane_spans(spans, self.state.started_at, beside, TIMING_SUITES))

    def write_verdict(self, terminalreporter: Any) -> None:
        """The verdict line, after every suite's own summary lines (see plugin.py)."""
        verdict = self.verdict()
        if verdict:
            terminalreporter.write_line(verdict, bold=True, red="pass:" not in verdict)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Compare each GPU with its peers (a GPU worse than its peers fails the run, exit status
        1), then write the JSON report and the markdown summary before the terminal summary, so
        the summary can say where they are."""
        settings = self.state.settings
        if is_xdist_worker(session.config):
            return
        self.peers = self._peer_findings()
        end = self.run_end()
        if (end.peers or end.expired) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a GPU below its peers, an expired known-defect entry
        if any(r.failed for r in self.state.results.values()) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = (
                pytest.ExitCode.TESTS_FAILED
            )  # an unexpected pass without xfail_strict: the report fails it
        if end.strict and end.recorded == 0 and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # --rocm-strict: recording nothing is no pass
        found = outputs_of(session.config)
        if found.stopped:  # a usage error a pytest-xdist worker found while collecting (outputs.stop_run)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        self.exit_status = int(session.exitstatus)
        found.finished = True
        verdict = self.verdict()
        xml = session.config.stash.get(xml_key, None)
        if xml is not None and verdict:
            xml.add_global_property("rocm_validate.verdict", verdict)
        if settings.report_path is None and settings.summary_path is None:
            return
        touched = any(r.suite for r in self.state.results.values()) or self.state.discovered
        device = self.state.device() if touched else None
        results = list(self.state.results.values())
        if settings.report_path is not None:
            from rocm_validate.results import jsonfile
            from rocm_validate.results.report import REPORT_SCHEMA

            report = self._report(device, results)
            write(
                session.config,
                "report",
                settings.report_path,
                lambda path: jsonfile.write_json(path, report, REPORT_SCHEMA),
            )
        if settings.summary_path is not None:
            from rocm_validate.results.summary import markdown

            text = markdown(self.run_facts(device, results)) + "\n"
            write(session.config, "summary", settings.summary_path, lambda path: append_text(path, text))

    def _report(self, device: Any, results: list[TestResult]) -> dict[str, Any]:
        from rocm_validate.results.report import build_report, outcome_counts

        node = self.state.node
        node_section = None
        if node is not None:
            node_section = {
                "gpus": [
                    {
                        "device": d.to_dict(),
                        "pinning": pinned,
                        "summary": outcome_counts(r for r in results if (r.gpu.index if r.gpu else None) == d.index),
                    }
                    for d, pinned in zip(node.devices, node.pinnings, strict=True)
                ],
            }
        assert self.exit_status is not None
        return build_report(
            self.state.settings.summary(),
            device,
            results,
            sys.argv,
            self.exit_status,
            self.verdict(),
            node=node_section,
            peers=[f.to_dict() for f in self.peers],
            time=self._time_section() if self.state.discovered else None,
        )

    def _time_section(self) -> dict[str, Any]:
        """The report's `time`: where the time went, the level's budget for this run, the compile cache."""
        from rocm_validate.core.compile_cache import report_section

        used = self.time_used()
        budget = self.state.plan.budget
        return {
            **used.to_dict(),
            "level": self.state.settings.level,
            "gpus": budget.gpus or 1,
            "budget_s": budget.seconds,
            "over_budget": used.wall_s > budget.seconds,
            "compile_cache": report_section(self.state.config),
        }

    def run_facts(self, device: Any, results: list[TestResult]) -> Any:
        """What the markdown summary and the HTML report show about this run."""
        from rocm_validate.results.summary import RunFacts

        devices = list(self.state.node.devices) if self.state.node is not None else ([device] if device else [])
        return RunFacts(
            command=shlex.join(sys.argv),
            exit_status=self.exit_status,
            devices=devices,
            results=results,
            peers=self.peers,
            verdict=self.verdict(),
            end=self.run_end(),
        )

    def _peer_findings(self) -> list[PeerFinding]:
        """Each GPU's metrics against the median of its peers, with the gate's band (whole-node runs)."""
        node = self.state.node
        if node is None:
            return []
        from rocm_validate.results.peers import gpu_findings

        config = self.state.config

        def band_for(metric: Any) -> Any:
            def band(own: float | None, peer: float | None) -> Any:
                return config.hook.pytest_rocm_noise_band(
                    config=config, name=metric.name, backend=node.backend, dispersions=(own, peer)
                )

            return band

        return gpu_findings(self.state.metrics(), band_for)

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: Any
    ) -> None:
        """pytest-html (when installed): the summary's facts, with plots when matplotlib is installed."""
        from rocm_validate.results.summary import html_sections

        touched = any(r.suite for r in self.state.results.values()) or self.state.discovered
        device = self.state.device() if touched else None
        prefix.extend(html_sections(self.run_facts(device, list(self.state.results.values()))))
