"""A run interrupted by Ctrl-C (SIGINT), SIGTERM (a CI job cancelled, a pod evicted) or pytest.exit:
it ends as pytest's "interrupted" (exit status 2), and nothing it did not finish counts as passed.

* SIGTERM, which would otherwise kill the process with no report at all, raises KeyboardInterrupt
  as Ctrl-C does, so the run ends through pytest: the report, summary and JUnit are written.
* The signal is remembered as well as raised. Python drops an exception raised in a finalizer or a
  weakref callback ("Exception ignored in WeakSet._remove"), and a library may catch it; the test
  it arrived in is then a skip, not a pass, and the run still stops before the next test (or,
  after the last, ends with exit status 2).
* The test that was running has a passed setup and no call: pytest counts it nowhere, while a
  report built from its phases would count it passed. It is reported as what it is, a skip
  ("interrupted by SIGTERM before it finished: not validated"), through pytest's own report hook,
  so pytest's counts, JUnit, the JSON report and the summary all count it the same way.

Handlers are installed only where the default ones are in force (never over a handler of the
user's, never for a SIGINT the shell ignores), in the main thread, and restored at the end.
"""

from __future__ import annotations

import copy
import re
import signal
import threading
from collections.abc import Generator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import pytest

from rocm_validate.core.session import is_xdist_worker

SIGNALS = (signal.SIGINT, signal.SIGTERM)
WATCH_NAME = "rocm_validate_interruption"


@dataclass(eq=False)  # a plugin: pluggy keeps it by identity
class Interruption:
    """What interrupted this run, if anything, and the tests it caught running; a pytest plugin
    (registered per run) that keeps them."""

    config: pytest.Config
    how: str | None = None  # 'SIGTERM', 'SIGINT', 'KeyboardInterrupt', 'pytest.exit: <reason>'
    delivered: bool = False  # its exception reached pytest (False: swallowed on the way, so far)
    running: dict[tuple[str, str], pytest.TestReport] = field(default_factory=dict)  # setup passed, no call yet
    previous: dict[int, Any] = field(default_factory=dict)  # the handlers to restore

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        __tracebackhide__ = True  # pytest names the line the signal interrupted, not this handler
        self.how = signal.Signals(signum).name
        raise KeyboardInterrupt(f"received {self.how}")

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            current = signal.getsignal(signum)
            if current is (signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL):
                self.previous[signum] = current
                signal.signal(signum, self.on_signal)

    def restore(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for signum, handler in self.previous.items():
                signal.signal(signum, handler)
        self.previous.clear()

    def _raise_if_swallowed(self) -> None:
        if self.how is not None and not self.delivered:
            self.delivered = True
            raise KeyboardInterrupt(f"received {self.how} (its exception was swallowed on the way; stopping here)")

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """Stop before and after each test once a signal arrived, even if its exception was lost."""
        self._raise_if_swallowed()
        try:
            result = yield
        except KeyboardInterrupt:
            self.delivered = True
            raise
        self._raise_if_swallowed()
        return result

    @pytest.hookimpl(wrapper=True, trylast=True)  # innermost: before any plugin reads the outcome
    def pytest_runtest_makereport(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """A test that passed while a signal whose exception was swallowed arrived did not run to
        its end: a skip that says so, never a pass (and no baseline is recorded from it)."""
        report: pytest.TestReport = yield
        if self.how is not None and not self.delivered and report.passed and report.when in ("setup", "call"):
            path, line, _ = report.location
            report.outcome = "skipped"
            report.longrepr = (
                path,
                (line or 0) + 1,
                f"Skipped: interrupted by {self.how} while it ran (its KeyboardInterrupt was swallowed, so it "
                "may not have run to its end): not validated",
            )
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep each test between its setup and its call: the one an interruption catches."""
        if report.when == "setup" and report.passed:
            self.running[_key(report)] = report
        else:
            self.running.pop(_key(report), None)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Name what interrupted the run, and report each test it caught running as a skip. A
        collection error is no interruption (pytest ends such a run with the same exception):
        the collector names the file that could not be imported."""
        if self.how is None and excinfo.typename == "Interrupted" and COLLECTION_ERRORS.search(str(excinfo.value)):
            return
        if self.how is None:  # not a signal here: pytest.exit, or a signal to a pytest-xdist worker
            self.how = _described(excinfo)
        self.delivered = True
        if is_xdist_worker(self.config):
            return  # the controller reports a worker's test once
        caught, self.running = list(self.running.values()), {}
        for setup in caught:
            for report in _not_finished(setup, self.how):
                self.config.hook.pytest_runtest_logreport(report=report)

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionstart(self, session: pytest.Session) -> Generator[None, Any, Any]:
        """pytest.exit(returncode=0) from another plugin's session start ends the run before any
        output is written (pytest calls no pytest_sessionfinish then): never with exit status 0."""
        try:
            return (yield)
        except pytest.exit.Exception as exc:
            if exc.returncode == pytest.ExitCode.OK:
                exc.returncode = pytest.ExitCode.INTERRUPTED
            raise

    @pytest.hookimpl(wrapper=True)  # before the collector's tryfirst hook reads the exit status
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, Any, Any]:
        """A signal whose exception was swallowed after the last test, or pytest.exit(returncode=0),
        still ends the run interrupted: an interrupted run never exits 0."""
        if self.how is not None and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        return (yield)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.restore()
        config.pluginmanager.unregister(self)


COLLECTION_ERRORS = re.compile(r"^\d+ errors? during collection$")  # pytest's Interrupted after collection errors


def _described(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """What ended the run when no signal reached this process: 'pytest.exit: <reason>', or
    'a signal to pytest-xdist worker gw1' (pytest-xdist's Interrupted: '<WorkerController gw1>
    received keyboard-interrupt')."""
    reason = str(getattr(excinfo.value, "msg", None) or excinfo.value)
    if excinfo.typename == "Interrupted":
        worker = re.search(r"<WorkerController (\w+)>", reason)
        return f"a signal to pytest-xdist worker {worker.group(1)}" if worker else "a signal to a pytest-xdist worker"
    if excinfo.typename == "Exit":
        return f"pytest.exit: {reason}" if reason else "pytest.exit"
    return f"{excinfo.typename}: {reason}" if reason else excinfo.typename


def _key(report: pytest.TestReport) -> tuple[str, str]:
    """A test on one worker (a whole-node run runs one test on every GPU's worker at once)."""
    gateway = getattr(getattr(report, "node", None), "gateway", None)
    return report.nodeid, str(getattr(gateway, "id", ""))


def _not_finished(setup: pytest.TestReport, how: str) -> list[pytest.TestReport]:
    """The call (a skip saying why) and teardown reports of a test an interruption caught."""
    path, line, _ = setup.location
    call = copy.copy(setup)
    call.when, call.outcome, call.sections, call.duration = "call", "skipped", [], 0.0
    call.longrepr = (path, (line or 0) + 1, f"Skipped: interrupted by {how} before it finished: not validated")
    teardown = copy.copy(setup)
    teardown.when, teardown.outcome, teardown.longrepr, teardown.sections = "teardown", "passed", None, []
    teardown.duration = 0.0
    return [call, teardown]


def interruption_of(config: pytest.Config) -> Interruption | None:
    """This run's interruption watch (None where the plugin is not active)."""
    watch = config.pluginmanager.get_plugin(WATCH_NAME)
    return watch if isinstance(watch, Interruption) else None


def watch(config: pytest.Config) -> Interruption:
    """Install the signal handlers and register this run's watch (from pytest_configure)."""
    found = Interruption(config)
    found.install()
    config.pluginmanager.register(found, WATCH_NAME)
    return found
