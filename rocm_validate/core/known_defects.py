"""The pytest side of known defects (rocm_validate.results.known_defects): --rocm-known-defects,
the tables loaded once per run, and each failed test's report turned into `known-defect` when
its failure is a tracked defect of this stack on every count.

A known defect is reported as pytest's own expected failure (xfailed, its reason naming the entry,
the library version and the workaround), so pytest's counts, its exit status and JUnit agree with
the JSON report and the summary; under --rocm-strict it stays a failure. A test an entry names
that now passes carries the entry too ("no longer reproduces: remove it"). An expired site entry
fails the run, naming it (`rocm_validate.core.collector`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from rocm_validate.core import options
from rocm_validate.core.outputs import stop_run
from rocm_validate.core.session import find_part, run_state
from rocm_validate.errors import UsageError
from rocm_validate.results.known_defects import (
    KNOWN_DEFECT_PROPERTY,
    SHIPPED,
    DefectTableError,
    KnownDefect,
    StackFacts,
    match,
    parse_table,
    unmatched_tests,
)
from rocm_validate.results.margins import margins_in
from rocm_validate.results.triage import CATEGORY_PROPERTY

KNOWN_DEFECTS = options.OptionSpec(
    "--rocm-known-defects",
    "rocm_known_defects",
    "ROCM_VALIDATE_KNOWN_DEFECTS",
    "a JSON file of this site's known stack defects (each with an owner and an expiry date) added to the "
    "shipped table: a failure matching one on every count is reported as known-defect and does not fail "
    "the run unless --rocm-strict (format: docs/triage.md)",
    "FILE",
)


def utc_today() -> date:
    """Today's date in UTC: an entry's expiry does not move with a node's time zone."""
    return datetime.now(timezone.utc).date()


@dataclass(frozen=True)
class KnownDefects:
    """This run's entries: the shipped table's, then the site file's."""

    defects: tuple[KnownDefect, ...]
    site: Path | None = None
    today: date = field(default_factory=utc_today)  # every node of a fleet agrees on when an entry expired

    @property
    def live(self) -> tuple[KnownDefect, ...]:
        """The entries that apply: an expired site entry explains nothing (and fails the run)."""
        return tuple(d for d in self.defects if not d.expired(self.today))

    @property
    def expired(self) -> tuple[KnownDefect, ...]:
        return tuple(d for d in self.defects if d.expired(self.today))


def shipped() -> tuple[KnownDefect, ...]:
    """The package's own table."""
    text = resources.files("rocm_validate.results").joinpath("known_defects.json").read_text(encoding="utf-8")
    return parse_table(text, "known_defects.json", site=False)


def load(config: pytest.Config) -> KnownDefects:
    """The shipped table and the site file (--rocm-known-defects); a site file that is missing or
    malformed, or names a test file that does not exist, is a usage error naming the entry."""
    value, source = options.raw_value(config, KNOWN_DEFECTS)
    if value is None:
        return KnownDefects(shipped())
    path = options.given_path(config, value, source)
    flag = options.source_name(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"{flag}={value!r}: cannot read {path} ({exc.strerror or exc}); expected a JSON known-defects file "
            "(docs/triage.md)"
        ) from None
    try:
        site = parse_table(text, str(path), site=True)
    except DefectTableError as exc:
        raise UsageError(f"{flag}: {exc} (format: docs/triage.md)") from None
    for defect in site:
        missing = [p for p in defect.tests if not (config.rootpath / p.split("::", 1)[0]).is_file()]
        if missing:
            raise UsageError(
                f"{flag}: entry {defect.id!r} of {path} matches nothing: no test file {', '.join(missing)} under "
                f"{config.rootpath}; test ids are as pytest prints them, from the rootdir"
            )
    package = shipped()
    clash = [d.id for d in site if d.id in {p.id for p in package}]
    if clash:
        raise UsageError(f"{flag}: entry {clash[0]!r} of {path} has the id of a shipped entry; give it its own id")
    return KnownDefects((*package, *site), path)


def known_defects(config: pytest.Config) -> KnownDefects:
    found = find_part(config, KnownDefects)
    return found if found is not None else KnownDefects(())


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_spec(parser, KNOWN_DEFECTS)


def pytest_configure(config: pytest.Config) -> None:
    run_state(config).put(load(config))


# First: before pytest's own -k / -m (its mark plugin) and the run's selection drop tests, so an entry
# is judged against every test its file holds.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A site entry naming tests of a collected file, none of which exists there, matches nothing."""
    table = known_defects(config)
    site = [d for d in table.defects if d.source != SHIPPED]
    problems = unmatched_tests(site, [item.nodeid for item in items])
    if problems:
        stop_run(config, f"{KNOWN_DEFECTS.flag}: {problems[0]}")
        items[:] = []


def _failed_checks(properties: list[tuple[str, Any]]) -> list[str]:
    return [check.check for check in margins_in(properties) if not check.passed]


def _stack_facts(item: pytest.Item) -> StackFacts | None:
    state = run_state(item.config)
    if not state.discovered:
        return None
    device = state.device()
    return StackFacts(device.backend, device.arch, device.torch_version, device.libraries)


def judge(item: pytest.Item, report: pytest.TestReport) -> None:
    """After a test's call: a numerics failure a live entry explains on every count becomes
    `known-defect` (an expected failure, or under --rocm-strict still a failure); a pass of a
    test a live entry names is marked as no longer reproducing."""
    table = known_defects(item.config)
    if report.when != "call" or not table.live or not (report.failed or report.passed):
        return
    facts = _stack_facts(item)
    if facts is None:
        return
    category = next((v for n, v in report.user_properties if n == CATEGORY_PROPERTY), None)
    if report.failed:
        if category != "numerics":
            return
        found = match(table.live, facts, item.nodeid, _failed_checks(report.user_properties))
    else:
        found = match(table.live, facts, item.nodeid, None)
    if found is None:
        return
    entry = (KNOWN_DEFECT_PROPERTY, json.dumps(found.matched(reproduced=report.failed).to_dict()))
    item.user_properties.append(entry)
    report.user_properties.append(entry)
    if not report.failed:
        return
    said = f"known-defect {found.defect.id} ({found.version}): {found.defect.workaround}"
    if run_state(item.config).settings.strict:
        report.sections.append(("rocm-validate: known defect", f"{said} (--rocm-strict fails a known defect)"))
    else:
        report.outcome = "skipped"
        report.wasxfail = said  # pytest's mark of an expected failure
