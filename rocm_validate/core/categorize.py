"""The pytest side of triage: each failed test gets its category (rocm_validate.results.triage)
where its exception is still at hand, in the process that ran it, and carries it as the user
property `rocm_category`, so it reaches the controller under pytest-xdist, the JSON report and
the JUnit XML.

A check that knows what its failure means says so with `fail_as("hardware", message)`; every
other failure is classified from its exception, its message and the suite it belongs to. A
node-wide check (a collective over every GPU) that knows which GPUs its failure points at names
them, `fail_as("numerics", message, gpus=[1])`, and they travel as the user property `rocm_blame`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

import pytest

from rocm_validate.results.margins import margins_in
from rocm_validate.results.triage import (
    BLAME_PROPERTY,
    CATEGORIES,
    CATEGORY_PROPERTY,
    FIX_PROPERTY,
    FailureFacts,
    classify,
)
from rocm_validate.text import clip_start

_CHAIN_LIMIT = 8  # causes followed; a loop or a very long chain says nothing more


class CategorizedFailure(pytest.fail.Exception):  # type: ignore[name-defined]  # pytest's documented alias of Failed
    """A failure whose category the check itself knows (a planted cause, a preflight finding)."""

    __module__ = "builtins"  # as pytest's own Failed: the summary reads 'CategorizedFailure: <message>'

    def __init__(self, message: str, category: str, fix: str | None = None, gpus: Iterable[int] = ()) -> None:
        if category not in CATEGORIES:
            raise ValueError(f"category must be one of {', '.join(CATEGORIES)}; found {category!r}")
        super().__init__(msg=message, pytrace=False)
        self.category = category
        self.fix = fix
        self.gpus = tuple(sorted(set(gpus)))


def fail_as(category: str, message: str, fix: str | None = None, gpus: Iterable[int] = ()) -> NoReturn:
    """Fail the current test as `category` ('hardware', 'configuration', ...) with `message`;
    `fix`, a short action ('record this device's baselines with <command>'), goes into the
    verdict line. `gpus`: the GPU indices a node-wide test's failure points at (the rank that
    contributed a wrong gradient); the verdict fails the check on those GPUs alone."""
    __tracebackhide__ = True
    raise CategorizedFailure(message, category, fix, gpus)


def exception_types(exc: BaseException | None) -> tuple[str, ...]:
    """Class names along `exc`'s hierarchy and its cause / context chain: an ImportError caught
    and turned into pytest.fail still shows as an ImportError."""
    names: list[str] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and len(seen) < _CHAIN_LIMIT:
        seen.add(id(exc))
        names.extend(k.__name__ for k in type(exc).__mro__ if k is not object)
        exc = exc.__cause__ or exc.__context__
    return tuple(dict.fromkeys(names))


def _numerics_failed(properties: list[tuple[str, Any]]) -> bool:
    return any(not check.passed for check in margins_in(properties))


def category_property(properties: list[tuple[str, Any]]) -> str | None:
    """The category a test's properties carry, if any."""
    return next((str(v) for n, v in properties if n == CATEGORY_PROPERTY), None)


def facts_of(report: pytest.TestReport, exc: BaseException | None, suite: str | None) -> FailureFacts:
    """The facts `classify` needs, from a failed report and (where still at hand) its exception."""
    types = exception_types(exc)
    message = str(getattr(exc, "msg", "") or exc) if exc is not None else clip_start(report.longreprtext, 4000)
    return FailureFacts(
        suite=suite,
        explicit=getattr(exc, "category", None) or category_property(report.user_properties),
        exception_types=types,
        message=message,
        numerics_failed=_numerics_failed(report.user_properties),
    )


def fix_property(properties: list[tuple[str, Any]]) -> str | None:
    """What to fix, as a test's properties carry it, if any."""
    return next((str(v) for n, v in properties if n == FIX_PROPERTY), None)


def blame_property(properties: list[tuple[str, Any]]) -> tuple[int, ...]:
    """The GPUs a failed test's properties blame (BLAME_PROPERTY), if any."""
    return next((tuple(int(i) for i in json.loads(v)) for n, v in properties if n == BLAME_PROPERTY), ())


_OURS = (str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[2] / "suites"))


def _user_fixture(item: pytest.Item, exc: BaseException | None) -> str | None:
    """'name (conftest.py:12)': the fixture defined outside rocm_validate and its suites (the
    user's) whose code raised `exc`, or None (the test's own code, or a fixture of ours)."""
    fixtures = getattr(item, "_fixtureinfo", None)
    if exc is None or fixtures is None:
        return None
    codes = {
        definition.func.__code__: name
        for name, definitions in fixtures.name2fixturedefs.items()
        for definition in definitions
        if hasattr(getattr(definition, "func", None), "__code__")
    }
    raised = None
    traceback = exc.__traceback__
    while traceback is not None:
        code = traceback.tb_frame.f_code
        if code in codes:
            raised = f"{codes[code]} ({code.co_filename}:{traceback.tb_lineno})"
            ours = str(Path(code.co_filename).resolve()).startswith(_OURS)
        traceback = traceback.tb_next
    return raised if raised is not None and not ours else None


UNEXPECTED_PASS_FIX = "remove the xfail mark of each test that now passes (the defect it marked is fixed)"


def unexpected_pass(report: pytest.TestReport) -> bool:
    """A test marked xfail that passed: pytest's xpass, or under xfail_strict its '[XPASS(strict)]' failure."""
    if report.when != "call":
        return False
    return (report.passed and hasattr(report, "wasxfail")) or (
        report.failed and report.longreprtext.startswith("[XPASS(strict)]")
    )


def _attach(item: pytest.Item, report: pytest.TestReport, entries: list[tuple[str, str]]) -> None:
    for entry in entries:
        item.user_properties.append(entry)
        if entry not in report.user_properties:
            report.user_properties.append(entry)


def categorize(item: pytest.Item, report: pytest.TestReport, exc: BaseException | None, suite: str | None) -> None:
    """Attach a failed phase's category (and the fix its check named, if any) to its report and
    to the item (whose teardown report JUnit reads), once per test; an unexpected pass (xpass)
    is configuration: its xfail mark is out of date."""
    if category_property(item.user_properties) is not None:
        return
    if unexpected_pass(report):
        _attach(item, report, [(CATEGORY_PROPERTY, "configuration"), (FIX_PROPERTY, UNEXPECTED_PASS_FIX)])
        return
    if not report.failed:
        return
    fixture = _user_fixture(item, exc) if report.when == "setup" else None
    if fixture is not None:  # the user's harness broke before the test ran: nothing points at the stack
        entries = [(CATEGORY_PROPERTY, "configuration")]
        if fix_property(report.user_properties) is None:
            entries.append((FIX_PROPERTY, f"fix the fixture {fixture}, which raised before the test ran"))
        _attach(item, report, entries)
        return
    entries = [(CATEGORY_PROPERTY, classify(facts_of(report, exc, suite)))]
    fix = getattr(exc, "fix", None)
    if fix and fix_property(report.user_properties) is None:
        entries.append((FIX_PROPERTY, str(fix)))
    gpus = getattr(exc, "gpus", ())
    if gpus and not blame_property(report.user_properties):
        entries.append((BLAME_PROPERTY, json.dumps(list(gpus))))
    _attach(item, report, entries)
