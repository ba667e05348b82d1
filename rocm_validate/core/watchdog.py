"""The backstop behind pytest-timeout: a test stuck in native code ends the run, loudly, instead of
hanging the CI job forever.

Tests time out with pytest-timeout's signal method, whose SIGALRM handler is Python: it cannot
run while the main thread waits in C with the GIL released (a GPU kernel that never finishes
blocks `torch.cuda.synchronize()` there). So whenever pytest-timeout arms a signal timer, a
Python watchdog thread is armed with it, at the timeout plus `grace_s`; if the test is still
running then, the watchdog names the test, dumps every thread's stack to the terminal's stderr,
reports the test as failed in category `hang` (its device, BDF and stack in the message) through
pytest's own report hook, and ends the process with exit status 1. In a plain run it first
reports every test after it as not run and finishes the session, so the JSON report, the
markdown summary, JUnit and the verdict are written; in a pytest-xdist worker (`-n`, whole-node
runs) the report reaches the controller, which writes them when the run ends.

Native code that holds the GIL stops the watchdog thread too, so faulthandler's C timer is armed as
well, `FAULTHANDLER_EXTRA_S` later, in plain runs and xdist workers alike; it is the one timer
that pytest's own `faulthandler_timeout` uses, so a run that sets that option keeps it untouched.

Both are armed through pytest-timeout's `pytest_timeout_set_timer` hook, so they follow every way a
timeout is set (our markers, the user's marker, --timeout, func_only), and disarmed by its cancel
hook, at the end of the runtest protocol (in a `finally`) and when pdb starts.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from functools import partial
from typing import Literal, NoReturn, TextIO

import pytest
from pytest_timeout import Settings, is_debugging

from rocm_validate.core.session import find_part, is_xdist_worker, run_state

GRACE_MIN_S = 10.0  # room for pytest-timeout's own stack dump and the test's teardown after it
GRACE_FRACTION = 0.25
GRACE_MAX_S = 60.0
FAULTHANDLER_EXTRA_S = 30.0  # the C-level timer waits this much longer than the watchdog thread
STACK_FRAMES = 12  # innermost frames of the stuck test's stack kept in its report


def grace_s(timeout_s: float) -> float:
    """How long past its timeout a test may still run before the watchdog ends the run: a quarter
    of the timeout, at least 10 s and at most 60 s."""
    return min(GRACE_MAX_S, max(GRACE_MIN_S, GRACE_FRACTION * timeout_s))


def stuck_message(test: str, timeout_s: float, grace: float, worker: bool = False) -> str:
    """What the watchdog writes before the stacks; `test` is the node id and where it ran."""
    if worker:
        return (
            f"rocm-validate: {test} is stuck in native code {grace:g} s past its {timeout_s:g} s timeout (a GPU "
            f"kernel or library call that never returns; the timeout signal cannot interrupt it). Ending this "
            f"pytest-xdist worker: the test is reported as a hang. If the device is just slow, raise the limit with "
            f"--rocm-timeout=SECONDS."
        )
    return (
        f"rocm-validate: {test} is stuck in native code {grace:g} s past its {timeout_s:g} s timeout (a GPU kernel "
        f"or library call that never returns; the timeout signal cannot interrupt it). The stack of every thread "
        f"follows. Ending the run with exit status 1: the test is reported as a hang, the tests after it as not "
        f"run. To keep going past a hung kernel, run with -n 1 (a pytest-xdist worker: a hang loses only that worker; "
        f"--rocm-device=all does the same on a node of two or more GPUs); if the device is just slow, raise the "
        f"limit with --rocm-timeout=SECONDS."
    )


def device_phrase(config: pytest.Config) -> str:
    """' on <name> (<torch device>, BDF <address>)' once the run's devices are known, else ''."""
    state = run_state(config)
    if not state.discovered:
        return ""
    where = state.device()
    bdf = f", BDF {where.pci_bus_id}" if where.pci_bus_id else ""
    return f" on {where.name} ({where.torch_device}{bdf})"


class Watchdog:
    """Calls `action` once, on its own daemon thread, `delay_s` after `start` unless cancelled
    first; once `cancel` returns, the action never runs."""

    def __init__(self, delay_s: float, action: Callable[[], None]) -> None:
        self._action = action
        self._lock = threading.Lock()
        self._cancelled = False
        self._timer = threading.Timer(delay_s, self._fire)
        self._timer.daemon = True
        self._timer.name = "rocm-validate watchdog"

    def start(self) -> None:
        self._timer.start()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
        self._timer.cancel()

    def _fire(self) -> None:
        with self._lock:  # held while the action runs, so a cancel racing with it waits
            if not self._cancelled:
                self._action()


def end_run(stream: TextIO, message: str, item: pytest.Item | None = None) -> NoReturn:
    """Write `message` and the stack of every thread to `stream`, report `item` as a hang (and,
    in a plain run, finish the session's outputs), then exit with status 1 at once."""
    stream.write(f"\n{message}\n")
    stream.flush()
    faulthandler.dump_traceback(file=stream, all_threads=True)
    stream.flush()
    if item is not None:
        try:
            report_hang(item, f"{_stuck_stack()}\n{message}")
        except Exception as exc:  # the process ends either way; say why its outputs may be missing
            stream.write(f"rocm-validate: the hang could not be reported ({type(exc).__name__}: {exc})\n")
            stream.flush()
    os._exit(1)


def _stuck_stack() -> str:
    """The stack of the main thread, where the test is stuck (the innermost Python frame is the
    call into native code)."""
    import traceback

    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    shown = traceback.format_stack(frame)[-STACK_FRAMES:] if frame is not None else []
    return "Stack of the stuck test (most recent call last):\n" + "".join(shown)


def _phase(
    item: pytest.Item,
    when: Literal["setup", "call", "teardown"],
    outcome: Literal["passed", "failed", "skipped"],
    longrepr: tuple[str, int, str] | str | None,
    properties: list[tuple[str, object]],
) -> pytest.TestReport:
    return pytest.TestReport(item.nodeid, item.location, {}, outcome, longrepr, when, user_properties=properties)


def report_hang(item: pytest.Item, text: str) -> None:
    """Report `item` failed as a `hang` through pytest's report hook (JUnit, the collector, and
    under pytest-xdist the controller); in a plain run, report the tests after it as not run and
    finish the session, which writes the JSON report, summary, JUnit and verdict."""
    from rocm_validate.results.triage import CATEGORY_PROPERTY

    config = item.config
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    hang = [*item.user_properties, (CATEGORY_PROPERTY, "hang")]
    config.hook.pytest_runtest_logreport(report=_phase(item, "call", "failed", text, hang))
    if is_xdist_worker(config):
        return  # the controller turns xdist's report of this worker's crash into the test's teardown
    config.hook.pytest_runtest_logreport(report=_phase(item, "teardown", "passed", None, hang))
    session = item.session
    after = session.items[session.items.index(item) + 1 :] if item in session.items else []
    why = f"Skipped: not run: the watchdog ended the run after {item.nodeid} hung"
    for other in after:
        path, line, _ = other.location
        config.hook.pytest_runtest_logreport(report=_phase(other, "setup", "skipped", (path, (line or 0) + 1, why), []))
        config.hook.pytest_runtest_logreport(report=_phase(other, "teardown", "passed", None, []))
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
    config.hook.pytest_sessionfinish(session=session, exitstatus=session.exitstatus)


@dataclass
class Backstop:
    """Per run: the terminal's stderr and what is armed for the test now running."""

    stderr: TextIO  # a duplicate of stderr taken before output capture, which redirects fd 2 during tests
    uses_faulthandler: bool  # False when the user set faulthandler_timeout (the same single C timer)
    watchdog: Watchdog | None = None
    faulthandler_armed: bool = False


def arm(backstop: Backstop, item: pytest.Item, settings: Settings) -> None:
    """Arm the backstops of `item` for pytest-timeout's `settings` (it arms its own timer next)."""
    disarm(backstop)
    timeout_s = float(settings.timeout)
    grace = grace_s(timeout_s)
    if backstop.uses_faulthandler:
        faulthandler.dump_traceback_later(timeout_s + grace + FAULTHANDLER_EXTRA_S, exit=True, file=backstop.stderr)
        backstop.faulthandler_armed = True
    signal_method = settings.method == "signal" and threading.current_thread() is threading.main_thread()
    if signal_method:
        where = item.nodeid + device_phrase(item.config)
        message = stuck_message(where, timeout_s, grace, is_xdist_worker(item.config))
        spare_debugger = not settings.disable_debugger_detection
        action = partial(_end_run_unless_debugged, backstop.stderr, message, spare_debugger, item)
        backstop.watchdog = Watchdog(timeout_s + grace, action)
        backstop.watchdog.start()


def disarm(backstop: Backstop) -> None:
    if backstop.watchdog is not None:
        backstop.watchdog.cancel()
        backstop.watchdog = None
    if backstop.faulthandler_armed:
        faulthandler.cancel_dump_traceback_later()
        backstop.faulthandler_armed = False


def _end_run_unless_debugged(stream: TextIO, message: str, spare_debugger: bool, item: pytest.Item) -> None:
    """As pytest-timeout does, leave a test alone while a debugger holds it."""
    if not (spare_debugger and is_debugging()):
        end_run(stream, message, item)


def _terminal_stderr() -> TextIO | None:
    """A duplicate of the process's stderr; None where it has no file descriptor (embedded Python, a harness)."""
    stream = sys.__stderr__
    try:
        return os.fdopen(os.dup(stream.fileno()), "w") if stream is not None else None
    except (OSError, ValueError):
        return None


def _user_sets_faulthandler_timeout(config: pytest.Config) -> bool:
    try:
        return float(config.getini("faulthandler_timeout") or 0) > 0
    except ValueError:  # pytest's faulthandler plugin is off (-p no:faulthandler), and its option with it
        return False


def _disarm_run(config: pytest.Config) -> None:
    backstop = find_part(config, Backstop)
    if backstop is not None:
        disarm(backstop)


def pytest_configure(config: pytest.Config) -> None:
    stderr = _terminal_stderr()  # now, while output capture is suspended
    if stderr is not None:
        run_state(config).put(Backstop(stderr, uses_faulthandler=not _user_sets_faulthandler_timeout(config)))


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Settings) -> None:
    backstop = find_part(item.config, Backstop)
    if backstop is not None:
        arm(backstop, item, settings)  # returns None, so pytest-timeout still sets its own timer


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> None:
    _disarm_run(item.config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    try:
        return (yield)
    finally:
        _disarm_run(item.config)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: object) -> None:
    """In the controller: a worker the watchdog ended has reported its test as a hang already, so
    pytest-xdist's 'crashed while running' report of that test becomes its teardown, and pytest,
    JUnit and the JSON report count the test once, as a hang."""
    from rocm_validate.results.report import on_gpu
    from rocm_validate.results.triage import CATEGORY_PROPERTY

    worker = getattr(report, "node", None)
    config = getattr(worker, "config", None)
    if config is None:
        return
    state = run_state(config)
    result = state.results.get(on_gpu(crashitem, state.report_gpu(report)))
    if result is not None and result.category == "hang":
        report.outcome, report.when, report.longrepr = "passed", "teardown", None
        report.user_properties = [(CATEGORY_PROPERTY, "hang")]


def pytest_enter_pdb(config: pytest.Config) -> None:
    _disarm_run(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    backstop = find_part(config, Backstop)
    if backstop is not None:
        disarm(backstop)
        backstop.stderr.close()
        run_state(config).drop(Backstop)
