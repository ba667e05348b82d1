"""A test that ends the process: `os._exit(0)` inside a test (or a test file's import, while it is
collected) would end pytest with exit status 0 and no verdict, report, summary or JUnit, which a CI
gate reads as success. While a test runs or a file is collected, `os._exit` called from pytest's
own process is intercepted: from the main thread it fails the test (or is the file's collection
error), naming it, and the run goes on; from another thread, where no exception reaches the test,
the process still ends, but never with status 0, and says which test ended it. Forked children
(multiprocessing) and non-zero statuses from other threads (the watchdog's) exit as asked.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import pytest


class EndedTheProcess(RuntimeError):
    """A test called os._exit: the exception that fails it instead."""


def guarded_exit(
    real: Callable[[int], NoReturn],
    nodeid: str,
    pid: int,
    uncapture: Callable[[], None] = lambda: None,
    instead: str = "the test fails instead and the run goes on",
) -> Callable[[int], NoReturn]:
    """os._exit as it behaves while `nodeid` runs (or is collected) in process `pid`; `uncapture`
    gives the terminal's stderr back (pytest captures the test's) before the last line is written;
    `instead` says what happens in its place."""

    def _exit(status: int) -> NoReturn:
        if os.getpid() != pid:
            real(status)
        if threading.current_thread() is threading.main_thread():
            raise EndedTheProcess(
                f"{nodeid} called os._exit({status}), which would end pytest with exit status {status} and no verdict, "
                f"report, summary or JUnit; {instead}"
            )
        if status == 0:
            uncapture()
            sys.stderr.write(
                f"\nrocm-validate: {nodeid} ended the process with os._exit(0) from a thread: no verdict was written; "
                "exit status 1\n"
            )
            sys.stderr.flush()
            real(1)
        real(status)

    return _exit


@contextmanager
def _guarded(config: pytest.Config, where: str, instead: str) -> Iterator[None]:
    """os._exit guarded (see guarded_exit) while `where` runs, then as it was."""
    real = os._exit
    capture = config.pluginmanager.getplugin("capturemanager")

    def uncapture() -> None:
        if capture is not None:
            capture.suspend_global_capture(in_=False)

    os._exit = guarded_exit(real, where, os.getpid(), uncapture, instead)  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = real


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, Any, Any]:
    with _guarded(item.config, item.nodeid, "the test fails instead and the run goes on"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    """A test file whose import calls os._exit, or raises SystemExit (sys.exit(), which pytest lets
    through as an internal error), is a collection error naming it, never a green exit."""
    where = collector.nodeid or "."
    with _guarded(collector.config, where, "it is a collection error instead"):
        try:
            return (yield)
        except SystemExit as exc:
            message = (
                f"{where} raised SystemExit({exc.code!r}) (sys.exit) while it was collected, which would end pytest "
                "with an internal error; it is a collection error instead"
            )
            return pytest.CollectReport(where, "failed", message, [])


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, Any, Any]:
    """A hook of a conftest or plugin that calls os._exit while tests are collected or selected
    (pytest_collection_modifyitems) ends the run as pytest's internal error, with its outputs."""
    with _guarded(session.config, "a hook run at collection", "the run stops with an internal error instead"):
        return (yield)
