"""Triage: what kind of failure each failed test is (its category), and the one verdict line that
tells a rollout what to do with the whole run ("roll back the image" or "GPU 5: drain and triage").

Categories follow DCGM's idea of tagging every failure with the decision it leads to
(reference/node-validation-facts.md). Everything here is pure: `classify` turns the facts of one
failed test into its category, `combine` picks one category for a test that failed several ways,
and `verdict` sums up per-GPU records. The pytest side (which exception, which properties) lives
in `rocm_validate.core.categorize`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rocm_validate.results.metrics import Verdict

# Each category and what it means; the order is the order the verdict line lists them in.
CATEGORIES: dict[str, str] = {
    "configuration": "a preflight check of the host failed (NUMA balancing, IOMMU mode, limits), or an input the "
    "run was given is at fault (MLPerf result files, their ruleset, a baseline missing under --rocm-strict or in "
    "another unit, a baselines folder that cannot be written, a rendezvous the ranks cannot reach)",
    "environment": "a library is missing or broken, or refuses a case the stack supports",
    "numerics": "a wrong result",
    "performance": "slower than its baseline or floor with clocks and other processes normal",
    "hardware": "one GPU differs from its peers, RAS / ECC counts rose, a repeatability mismatch, a kernel error",
    "contention": "another process used the GPU, or the host CPU was loaded for a host-side metric",
    "throttling": "clocks or power limits explain the loss",
    "timeout": "the test ran past its time limit",
    "hang": "the test never returned from native code past its time limit: the watchdog ended the run",
    "crash": "the test or its process died or raised an unexpected error",
}
CATEGORY_PROPERTY = "rocm_category"  # the test's category among its user properties (JSON report, JUnit)
FIX_PROPERTY = "rocm_fix"  # what to fix, where the failing check knows (a configuration failure's action)
# The GPUs a node-wide test's failure points at (a JSON list of indices): the rank that contributed a
# wrong gradient, the GPU its peers waited for. Its result is a failure on those GPUs and a pass on
# the others (results.report.check_records); without it a node-wide failure is every GPU's.
BLAME_PROPERTY = "rocm_blame"

# Failures the software stack owns: every GPU failing one of these the same way is a software regression.
SOFTWARE_CATEGORIES = frozenset({"numerics", "performance"})
# A test that failed several ways gets the most actionable one: an unexplained loss outweighs an
# explained one, so a metric that regressed with clocks and processes normal is never hidden
# behind another metric of the same test that was slowed by contention.
_COMBINE_ORDER = ("numerics", "hardware", "performance", "throttling", "contention")

_TIMEOUT_TYPES = frozenset({"TimeoutError", "TimeoutExpired"})
# NotValidated: a check the stack could not validate (no baseline, a refused backend), failed by --rocm-strict.
_ENVIRONMENT_TYPES = frozenset({"ImportError", "ModuleNotFoundError", "NotValidated"})
_CHECK_TYPES = frozenset({"AssertionError", "Failed"})
_HARDWARE_MESSAGE = re.compile(
    r"uncorrectable ECC error|ECC error encountered|\bXid\b|GPU is lost|fallen off the bus", re.I
)
_ENVIRONMENT_MESSAGE = re.compile(
    r"cannot open shared object file|is installed but cannot be imported|undefined symbol:"
)
_TIMEOUT_MESSAGE = re.compile(r"^(Failed: )?Timeout\b")  # pytest-timeout: "Timeout (>2.0s) from pytest-timeout."
_CRASH_MESSAGE = re.compile(r"crashed while running|out of device memory in ")
_SUITE_DEFAULT = {"perf": "performance", "preflight": "configuration"}


@dataclass(frozen=True)
class FailureFacts:
    """What is known about one failed test when it is classified."""

    suite: str | None = None
    explicit: str | None = None  # a category the test itself gave (perf gate, preflight, repeatability)
    exception_types: tuple[str, ...] = ()  # class names along the exception's hierarchy and its cause chain
    message: str = ""
    numerics_failed: bool = False  # a recorded numerics check (correctness margins) failed


def classify(facts: FailureFacts) -> str:
    """The category of one failed test. The test's own category wins; then what the failure
    itself shows (a dead worker, a timeout, a library, a device error); then what kind of check
    said no; anything else is an unexpected error: `crash`."""
    if facts.explicit in CATEGORIES:
        return str(facts.explicit)
    types = set(facts.exception_types)
    if _CRASH_MESSAGE.search(facts.message):
        return "crash"
    if types & _TIMEOUT_TYPES or _TIMEOUT_MESSAGE.match(facts.message):
        return "timeout"
    if types & _ENVIRONMENT_TYPES or _ENVIRONMENT_MESSAGE.search(facts.message):
        return "environment"
    if _HARDWARE_MESSAGE.search(facts.message):
        return "hardware"
    if "AssertionError" in types or (facts.numerics_failed and (types & _CHECK_TYPES or not types)):
        return "numerics"  # a recorded check failed, and the test failed on it (not on an unexpected error after it)
    if types & _CHECK_TYPES or not types:
        return _SUITE_DEFAULT.get(facts.suite or "", "numerics")
    return "crash"


def combine(categories: Iterable[str]) -> str | None:
    """One category for a test whose checks failed in several ways (see _COMBINE_ORDER)."""
    found = [c for c in categories if c in CATEGORIES]
    if not found:
        return None
    ranked = [c for c in _COMBINE_ORDER if c in found]
    return ranked[0] if ranked else found[0]


@dataclass(frozen=True)
class CheckRecord:
    """One check on one GPU: `category` is None when it passed. `gpu` is None for checks of the
    host rather than of one GPU (preflight, a CPU run)."""

    gpu: int | None
    check: str  # the test id without its GPU, so the same check on every GPU compares
    category: str | None = None
    suite: str | None = None  # a configuration failure outside preflight is an input's, not the host's
    fix: str | None = None  # what to fix, where the check said (FIX_PROPERTY)
    bdf: str | None = None  # the GPU's PCI address, where known
    known: str | None = None  # a known defect it matched: 'cudnn-sdpa-njt-backward (cudnn 9.19.0)'
    reproduced: bool = True  # with `known`: False when the test passed (the defect no longer reproduces)


def _gpus(indices: Iterable[int]) -> str:
    """'GPU 5', 'GPUs 2, 5', or 'the host' when no GPU is named."""
    found = sorted(set(indices))
    if not found:
        return "the host"
    return f"GPU {found[0]}" if len(found) == 1 else "GPUs " + ", ".join(str(i) for i in found)


def _label(gpu: int, records: Iterable[CheckRecord]) -> str:
    """'GPU 1 (BDF 0000:00:07.0)' where a record of that GPU knows its address, else 'GPU 1'."""
    bdf = next((r.bdf for r in records if r.gpu == gpu and r.bdf), None)
    return f"GPU {gpu}" + (f" (BDF {bdf})" if bdf else "")


def _counts(records: Iterable[CheckRecord]) -> str:
    """'numerics: 2, performance: 1' in CATEGORIES order."""
    counted = Counter(r.category for r in records)
    return ", ".join(f"{c}: {counted[c]}" for c in CATEGORIES if counted[c])


def _node_wide(failed: list[CheckRecord], ran: dict[str, set[int | None]], gpus: set[int]) -> list[CheckRecord]:
    """Failures of checks that failed on every GPU they ran on, in a run of two GPUs or more."""
    if len(gpus) < 2:
        return []
    failing: dict[str, set[int | None]] = {}
    for record in failed:
        failing.setdefault(record.check, set()).add(record.gpu)
    return [r for r in failed if r.gpu is not None and failing[r.check] == ran[r.check] and len(ran[r.check]) >= 2]


_SHOWN_FIXES = 3


def _input_actions(inputs: Sequence[CheckRecord]) -> str:
    """What to fix for configuration failures outside preflight: each check's own action (a
    command to record a baseline, a folder to make writable) once, then the files or options the
    others name."""
    fixes = list(dict.fromkeys(r.fix for r in inputs if r.fix))
    actions = fixes[:_SHOWN_FIXES] + (
        [f"{len(fixes) - _SHOWN_FIXES} more named above"] if len(fixes) > _SHOWN_FIXES else []
    )
    unnamed = sorted({str(r.suite) for r in inputs if not r.fix})
    if unnamed:
        mlperf = " (result files, ruleset, RCP file)" if unnamed == ["convergence"] else ""
        actions.append(f"fix the files or options the failed {', '.join(unnamed)} tests name{mlperf}")
    return "; ".join(actions)


def verdict_parts(records: Sequence[CheckRecord]) -> list[str]:
    """Each decision the run leads to, most urgent first (see `verdict`)."""
    failed = [r for r in records if r.category]
    gpus = {r.gpu for r in records if r.gpu is not None}
    if not failed:
        where = _gpus(gpus)
        return [f"pass: every check that ran passed on {where}" if records else NOTHING_VALIDATED]

    def of(*categories: str) -> list[CheckRecord]:
        return [r for r in failed if r.category in categories]

    ran: dict[str, set[int | None]] = {}
    for record in records:
        ran.setdefault(record.check, set()).add(record.gpu)
    parts = []
    host = [r for r in of("configuration") if r.suite in (None, "preflight")]
    if host:
        parts.append(f"host configuration: fix the settings the preflight checks name, then rerun ({_counts(host)})")
    inputs = [r for r in of("configuration") if r not in host]
    if inputs:
        parts.append(f"inputs: {_input_actions(inputs)}, then rerun; nothing points at the stack ({_counts(inputs)})")
    if of("environment"):
        parts.append(
            f"environment: install or repair the libraries named above in the image ({_counts(of('environment'))})"
        )
    node_wide = _node_wide(of("numerics", "performance", "hardware"), ran, gpus)
    on_host = [r for r in of("numerics", "performance", "hardware") if r.gpu is None]
    software = [r for r in node_wide + on_host if r.category in SOFTWARE_CATEGORIES]
    if software:
        where = f"on every one of {len(gpus)} GPUs" if node_wide else "on the host, where no GPU is involved"
        parts.append(f"software regression: roll back the image ({_counts(software)} {where})")
    if [r for r in node_wide if r.category == "hardware"]:
        parts.append(
            "every GPU fails the same hardware check: drain the node and triage its power, cooling and firmware"
        )
    if [r for r in on_host if r.category == "hardware"]:
        parts.append(
            f"host hardware: drain the node and triage ({_counts(r for r in on_host if r.category == 'hardware')})"
        )
    alone = [r for r in of("numerics", "performance", "hardware") if r.gpu is not None and r not in node_wide]
    if len(gpus) == 1 and [r for r in alone if r.category in SOFTWARE_CATEGORIES]:
        parts.append(
            f"{_gpus(gpus)} ({_counts(r for r in alone if r.category in SOFTWARE_CATEGORIES)}): one GPU cannot tell "
            "the image from the GPU; rerun on every GPU of the node (all failing: roll back the image; one failing: "
            "drain it) or on another node"
        )
        alone = [r for r in alone if r.category not in SOFTWARE_CATEGORIES]
    for gpu in sorted({r.gpu for r in alone if r.gpu is not None}):
        mine = [r for r in alone if r.gpu == gpu]
        peers = (
            " that passed on the other GPUs" if len(gpus) > 1 and any(r.category != "hardware" for r in mine) else ""
        )
        parts.append(f"{_label(gpu, records)}: drain and triage ({_counts(mine)}{peers})")
    if of("contention"):
        parts.append(
            f"contention: rerun on an idle node; these results say nothing about the stack ({_counts(of('contention'))})"
        )
    if of("throttling"):
        where = _gpus(r.gpu for r in of("throttling") if r.gpu is not None)
        parts.append(f"throttling on {where}: check cooling, power caps and clock settings, then rerun")
    hung = of("hang")
    if hung:
        where = ", ".join(_label(g, records) for g in sorted({r.gpu for r in hung if r.gpu is not None}))
        parts.append(
            f"hang: {hung[0].check} never returned on {where or 'the host'}: check "
            f"{'that GPU' if where else 'the host'} (kernel log: Xid or amdgpu errors; amd-smi / nvidia-smi for a "
            "stuck or lost device), then rerun; a hang that repeats on one GPU: drain it"
        )
    for category, action in (
        ("timeout", "rerun; a hang that repeats points at the driver or the GPU"),
        ("crash", "rerun the failed tests alone; one GPU repeating it: drain it, every GPU: roll back the image"),
    ):
        if of(category):
            parts.append(f"{category}: {len(of(category))} test(s): {action}")
    return parts


NOTHING_VALIDATED = "nothing was validated"
RECORDED = (Verdict.UPDATED, Verdict.FOLDED)  # a measurement --update-baselines wrote
NOT_RECORDED = (Verdict.NOISY, Verdict.REFUSED, Verdict.NOT_RECORDED)


@dataclass(frozen=True)
class PeerFlag:
    """One subject (a GPU, or a GPU pair) worse than the median of its peers on some metrics."""

    subject: str  # 'GPU 1 (BDF 0000:00:07.0)'
    shortfalls: tuple[float, ...]  # how much worse on each flagged metric, as fractions

    def describe(self) -> str:
        """'GPU 1 (BDF 0000:00:07.0) slower than its peers by 4.7-6.8% on 5 metrics: drain and triage'."""
        low, high = min(self.shortfalls), max(self.shortfalls)
        by = f"{low:.1%}" if f"{low:.1%}" == f"{high:.1%}" else f"{low * 100:.1f}-{high:.1%}"
        count = len(self.shortfalls)
        return f"{self.subject} slower than its peers by {by} on {count} metric{'s' if count > 1 else ''}: drain and triage"


@dataclass(frozen=True)
class RunEnd:
    """How the run ended, besides its checks: what interrupted it, the usage error that stopped it,
    and (under --update-baselines) the verdicts of the measurements it was to record."""

    interrupted: str | None = None  # 'SIGTERM', 'SIGINT', 'pytest.exit: <reason>'
    stopped: str | None = None  # the usage error that stopped it
    recording: tuple[str, ...] | None = None  # None: not an --update-baselines run
    strict: bool = False
    peers: tuple[PeerFlag, ...] = ()  # GPUs worse than their peers (whole-node runs)
    expired: tuple[str, ...] = ()  # site known-defect entries past their date: 'entry X of FILE (owner Y, ...)'
    exit_status: int | None = None  # the run's, once known: a verdict never says 'pass' beside a non-zero one
    unimportable: tuple[str, ...] = ()  # test files that could not be imported: 'path: the error'

    @property
    def recorded(self) -> int | None:
        """Entries --update-baselines wrote (None: not a recording run)."""
        return None if self.recording is None else sum(1 for v in self.recording if v in RECORDED)


def recording_part(end: RunEnd) -> str | None:
    """'recorded 3 baseline entries (not recorded: noisy: 1)', or what recorded nothing."""
    if end.recording is None:
        return None
    counted = Counter(end.recording)
    refused = ", ".join(f"{v}: {counted[v]}" for v in NOT_RECORDED if counted[v])
    if end.recorded:
        plural = "entry" if end.recorded == 1 else "entries"
        return f"recorded {end.recorded} baseline {plural}" + (f" (not recorded: {refused})" if refused else "")
    why = f"every measurement was refused ({refused})" if refused else "no test of this run measured anything to record"
    strict = " (--rocm-strict: a recording run that records nothing fails)" if end.strict else ""
    return f"nothing was recorded by --update-baselines: {why}{strict}"


def _unimportable_parts(records: Sequence[CheckRecord], end: RunEnd) -> list[str]:
    return [
        f"a test file could not be imported: {file} (configuration): install what it imports, or fix or deselect it, "
        "then rerun"
        for file in end.unimportable
    ]


def _peer_parts(records: Sequence[CheckRecord], end: RunEnd) -> list[str]:
    return [flag.describe() for flag in end.peers]


def _expired_parts(records: Sequence[CheckRecord], end: RunEnd) -> list[str]:
    return [f"known-defect {entry} has expired: renew its date or remove it" for entry in end.expired]


def _known(records: Sequence[CheckRecord], reproduced: bool) -> dict[str, set[int | None]]:
    """Each known defect the records matched, with the GPUs it matched on."""
    found: dict[str, set[int | None]] = {}
    for record in records:
        if record.known and record.reproduced == reproduced:
            found.setdefault(record.known, set()).add(record.gpu)
    return found


def _known_where(gpus: set[int | None]) -> str:
    return _gpus(g for g in gpus if g is not None)


def _strict_known_parts(records: Sequence[CheckRecord], end: RunEnd) -> list[str]:
    if not end.strict:
        return []
    return [
        f"known defect {known} on {_known_where(gpus)} (--rocm-strict fails a known defect): fix the stack or run "
        "without --rocm-strict"
        for known, gpus in sorted(_known(records, True).items())
    ]


# Each cause of a non-zero exit status that is not one failed check, in the order the verdict names
# them (a failed check's own words come from `verdict_parts`; a usage error, an interruption and a
# recording that recorded nothing are worded in `verdict`). A new cause is one row here.
RUN_CAUSES: tuple[Callable[[Sequence[CheckRecord], RunEnd], list[str]], ...] = (
    _unimportable_parts,
    _peer_parts,
    _expired_parts,
    _strict_known_parts,
)


def _notes(records: Sequence[CheckRecord], end: RunEnd) -> list[str]:
    """What the verdict says without failing the run: known defects (outside --rocm-strict) and
    entries whose tests now pass."""
    notes = []
    if not end.strict:
        notes += [
            f"known defect {known} on {_known_where(gpus)}: tracked upstream, not failing the run (workaround in the "
            "summary above)"
            for known, gpus in sorted(_known(records, True).items())
        ]
    notes += [
        f"known defect {known} no longer reproduces on {_known_where(gpus)}: remove it from the known-defects table"
        for known, gpus in sorted(_known(records, False).items())
    ]
    return notes


def verdict(records: Sequence[CheckRecord], end: RunEnd | None = None) -> str:
    """The run's last line: 'software regression: roll back the image (...)' when every GPU fails
    the same numerics or performance checks, 'GPU 5: drain and triage (...)' when one fails alone,
    and for a single-GPU run what one GPU can say. Every cause of a non-zero exit status has its
    words here (RUN_CAUSES): it never says 'pass' for a run that failed, was interrupted, stopped
    on a usage error, validated nothing or recorded nothing it was asked to."""
    end = end or RunEnd()
    if end.stopped and not records:
        return f"rocm-validate verdict: {NOTHING_VALIDATED}: the run stopped on a usage error: {end.stopped}"
    parts = verdict_parts(records)
    causes = [part for cause in RUN_CAUSES for part in cause(records, end)]
    if causes:
        parts = [*causes, *(p.replace("pass: every check that ran", "every other check that ran") for p in parts)]
    if end.stopped:
        parts = [f"usage error: {end.stopped}", *(p.removeprefix("pass: ") for p in parts)]
    recorded = recording_part(end)
    if recorded is not None and not end.recorded:
        parts = [recorded, *(p.removeprefix("pass: ") for p in parts)]
    elif recorded is not None:
        parts.append(recorded)
    if end.interrupted:
        lead = (
            f"interrupted by {end.interrupted}: the run did not finish, so it validated only part of what it was "
            "asked; rerun it"
        )
        parts = [lead, *(p.replace("pass: every check that ran", "every check that finished") for p in parts)]
    if end.exit_status and parts[0].startswith("pass: "):  # a cause no row names: never 'pass' beside it
        parts = [
            f"exit status {end.exit_status} though no check of a suite failed: read the failures above",
            *(p.replace("pass: every check that ran", "every check of a suite that ran") for p in parts),
        ]
    return "rocm-validate verdict: " + "; ".join([*parts, *_notes(records, end)])
