"""The fleet's answer to a rollout's two questions: did the image regress everywhere (roll it
back), or are a few nodes bad (drain them)?

Nodes are grouped by stack (SKU, torch, HIP / CUDA runtime, driver); a fleet of several stacks is
flagged, and each group is judged on its own. Within a group:

* **Checks.** A check (a test id) that fails on more than half of the nodes that ran it, with a
  category the image owns (numerics, performance, environment, crash, timeout), is the image's:
  "image regression: 10 of 10 nodes fail <check>". Failing on half of them or fewer, it is those
  nodes': they are drained with the failure's category (`results.triage`). A check that ran on one
  node only cannot tell the two apart, and says so.
* **Metrics.** Each node's figure of each metric (the median over its GPUs) is compared with the
  median of the other nodes by `results.peers.compare`, with the band of the peer comparison
  inside a node (`perf.gate.noise_band`: the baseline gate's rule for that metric and the
  combined noise of the two sides), so a node 10% slower than the others is named even when
  every node passes its own baseline.
* **Contention.** A node that measured beside other work (another process on its GPU, a loaded
  host for host-side figures) is rerun, not drained, for what it measured: its figures say
  nothing about the node. Wrong results are drained whatever ran beside them.
* **Missing reports.** A node with no usable report is named and drained, unless most nodes sent
  none: then the launch failed, not the nodes. A report whose host name cannot be written to the
  drain list is named (as `ascii()` shows it) and left undecided, never drained under a mangled name.
* **The node's own run comes first.** A node whose run was interrupted, stopped on a usage error,
  validated nothing, or failed where no check the fleet reads failed (--rocm-strict, a recording
  that recorded nothing) did not pass, whatever its figures say (`run_end`): interrupted, it is
  rerun; otherwise it is undecided until its run is fixed. Its own failed checks still drain it.

Pure apart from `perf.gate.noise_band`'s table: summaries in, decisions out.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from rocm_validate.fleet.reports import NodeSummary, Stack, Unreadable
from rocm_validate.perf.gate import noise_band
from rocm_validate.results.peers import Band, PeerFinding, PeerSample, compare
from rocm_validate.results.triage import CATEGORIES
from rocm_validate.results.triage import NOTHING_VALIDATED as NODE_VALIDATED_NOTHING

# Failures the image owns: on most nodes of a stack, they are the image's, not the nodes'. A
# configuration failure on most nodes is the provisioning's, and said so.
IMAGE_CATEGORIES = frozenset({"numerics", "performance", "environment", "crash", "timeout"})
FLEET_WIDE_CATEGORIES = IMAGE_CATEGORIES | {"configuration"}
# A node's own failures that call for a rerun rather than a drain.
RERUN_CATEGORIES = frozenset({"contention", "crash", "timeout"})
# Failures of a measured figure: meaningless when other work ran beside the measurement.
MEASURED_CATEGORIES = frozenset({"performance", "throttling"})
BELOW_FLEET = "below the fleet median"
BELOW_PEERS = "GPUs below their peers in the node"
NO_REPORT = "no usable report"
NO_HOST_NAME = "no usable host name"
# How a node's own run ended when it did not judge what it was asked to (`run_end`), and what the
# fleet does with such a node.
INTERRUPTED = "interrupted"
INTERNAL_ERROR = "internal error"
USAGE_ERROR = "usage error"
NOTHING_VALIDATED = "nothing validated"
OWN_FAILURE = "failed its own run"
NO_EXIT_STATUS = "no exit status"
RUN_END_ACTIONS = {INTERRUPTED: "rerun", INTERNAL_ERROR: "rerun"}  # the others: undecided
SHOWN = 10  # hosts named per reason in the verdict line; every one is in the JSON and the drain list

BandFor = Callable[[str, str], Band]  # (metric name, backend) -> the band two nodes' figures may differ by


# Figures measured on the CPU (CI's stand-in for a GPU) are not compared between hosts: on one
# idle 2-core VM, eight runs of the perf suite's CPU cases read the 16 MiB device copy at 15-31
# GB/s and the FP8 GEMM at 0.018-0.025 TFLOP/s, beyond the CPU's 25% band, with each run's own
# rounds within 5-10%. A comparison there would drain healthy hosts.
CPU_NOT_COMPARED = "figures measured on the CPU move by up to 50% between runs on an idle host and are not compared"


def default_band(name: str, backend: str) -> Band:
    """The baseline gate's band for the metric (its default rules), as the peer comparison inside
    a node uses it; none on the CPU (CPU_NOT_COMPARED)."""
    if backend == "cpu":
        return lambda own, peer: None
    return noise_band(name, backend)


@dataclass
class _Tally:
    """One check across the nodes of a stack."""

    ran: int = 0
    failing: dict[str, str] = field(default_factory=dict)  # node name -> category


@dataclass
class _Group:
    """The nodes of one stack, folded as they are added."""

    stack: Stack
    nodes: list[str] = field(default_factory=list)
    checks: dict[str, _Tally] = field(default_factory=dict)
    samples: dict[tuple[str, str, str], list[PeerSample]] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeRecord:
    """What the fleet keeps of a node once its report is folded in."""

    name: str  # unique in the fleet: the host, with its file's name when two reports claim one host
    host: str
    source: str
    stack: int  # index into Fleet.stacks
    failed: tuple[tuple[str, str], ...]
    verdict: str
    exit_status: int | None
    created: str
    below_peers: tuple[str, ...]
    contention: str
    gpus: int
    ended: str = ""  # run_end: '' when the node's run finished and judged what it ran
    known_defects: tuple[str, ...] = ()  # known-defect outcomes: tracked defects, not failing the node


def run_end(node: NodeSummary) -> str:
    """Why the node's own run cannot count as a pass whatever its checks and figures show ('' when
    it can): its exit status (pytest's: 2 interrupted, 3 internal error, 4 usage error, 5 no tests)
    and its verdict line, read before anything else. A run that exited 1 with no failed check and
    no GPU below its peers failed for a reason the fleet does not see (--rocm-strict, a recording
    that recorded nothing): `OWN_FAILURE`, its verdict says which."""
    status, verdict = node.exit_status, node.verdict
    if status == 2 or verdict.startswith("interrupted by"):
        return INTERRUPTED
    if status == 3:
        return INTERNAL_ERROR
    if status == 4 or verdict.startswith("usage error") or "stopped on a usage error" in verdict:
        return USAGE_ERROR
    if status == 5 or not node.checks or verdict.startswith(NODE_VALIDATED_NOTHING):
        return NOTHING_VALIDATED
    if status is None:
        return NO_EXIT_STATUS
    if status not in (0, 1):
        return f"exit status {status}"
    if status == 1 and not any(category for _, category in node.checks) and not node.below_peers:
        return OWN_FAILURE
    return ""


@dataclass(frozen=True)
class CheckFinding:
    """A check failing on most nodes of a stack: the image's (or the provisioning's)."""

    stack: int
    check: str
    nodes: tuple[str, ...]  # the nodes it fails on
    ran: int
    categories: dict[str, int]

    @property
    def failing(self) -> int:
        return len(self.nodes)

    @property
    def kind(self) -> str:
        return "configuration" if set(self.categories) == {"configuration"} else "image"

    def describe(self) -> str:
        return f"{self.failing} of {self.ran} nodes fail {self.check} ({counts_text(self.categories)})"


@dataclass(frozen=True)
class MetricSummary:
    """One metric across the nodes of a stack: its median, each node's ratio to the median of
    the others (as judged) and the nodes beyond the band."""

    name: str
    unit: str
    better: str
    stack: int
    median: float
    ratios: dict[str, float]
    flagged: tuple[PeerFinding, ...]


@dataclass(frozen=True)
class Decision:
    """What to do with one node, and why."""

    action: str  # pass, drain, rerun, undecided, image (its only failures are the image's)
    reasons: tuple[str, ...] = ()  # short labels, grouped in the verdict line ('numerics', BELOW_FLEET)
    details: tuple[str, ...] = ()  # the findings behind them, for the summary


@dataclass(frozen=True)
class Fleet:
    """The merged fleet: every node, what is wrong and where, and the verdict."""

    created: str
    stacks: tuple[Stack, ...]
    stack_nodes: tuple[tuple[str, ...], ...]
    nodes: tuple[NodeRecord, ...]
    unreadable: dict[str, Unreadable]  # by name in `decisions`
    checks: tuple[CheckFinding, ...]
    metrics: tuple[MetricSummary, ...]
    decisions: dict[str, Decision]
    parts: tuple[str, ...]
    unnamed_missing: int = 0
    duplicates: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return "rocm-validate fleet verdict: " + "; ".join(self.parts)

    @property
    def passed(self) -> bool:
        actions = {d.action for d in self.decisions.values()}
        return actions <= {"pass"} and not self.unnamed_missing and len(self.stacks) <= 1 and not self.duplicates

    @property
    def exit_status(self) -> int:
        return 0 if self.passed else 1

    def hosts(self, action: str) -> list[str]:
        """The hosts (each once) whose decision is `action`: the drain list for 'drain'."""
        names = {record.name: record.host for record in self.nodes}
        names.update({name: u.host for name, u in self.unreadable.items()})
        return sorted({names[name] for name, decision in self.decisions.items() if decision.action == action})


class FleetBuilder:
    """Folds node summaries in one at a time (a thousand nodes' checks become counts), then judges."""

    def __init__(self, band_for: BandFor = default_band) -> None:
        self.band_for = band_for
        self.groups: dict[Stack, _Group] = {}
        self.records: list[NodeRecord] = []
        self.unreadable: list[Unreadable] = []
        self.sources: dict[str, list[str]] = {}

    def add(self, node: NodeSummary | Unreadable) -> None:
        if isinstance(node, Unreadable):
            self.unreadable.append(node)
            return
        claimed = self.sources.setdefault(node.host, [])
        claimed.append(node.source)
        name = node.host if len(claimed) == 1 else f"{node.host} ({Path(node.source).name})"
        group = self.groups.setdefault(node.stack, _Group(node.stack))
        group.nodes.append(name)
        for check, category in node.checks:
            tally = group.checks.setdefault(check, _Tally())
            tally.ran += 1
            if category:
                tally.failing[name] = category
        for metric in node.metrics:
            group.samples.setdefault((metric.name, metric.unit, metric.better), []).append(
                PeerSample(name, metric.value, metric.dispersion)
            )
        self.records.append(
            NodeRecord(
                name=name,
                host=node.host,
                source=node.source,
                stack=list(self.groups).index(node.stack),
                failed=tuple((c, cat) for c, cat in node.checks if cat),
                verdict=node.verdict,
                exit_status=node.exit_status,
                created=node.created,
                below_peers=node.below_peers,
                contention=node.contention,
                gpus=node.gpus,
                ended=run_end(node),
                known_defects=node.known_defects,
            )
        )

    def expect(self, hosts: Iterable[str] = (), count: int | None = None) -> int:
        """Name every expected host with no report as unreadable; return how many more nodes than
        were found or named `count` says there should be (nodes that never started, unnamed)."""
        known = {r.host for r in self.records} | {u.host for u in self.unreadable}
        for host in sorted(set(hosts) - known):
            self.unreadable.append(Unreadable(host, "", "no report: expected, but none was found"))
            known.add(host)
        return max(0, (count or 0) - len(known))

    def result(self, unnamed_missing: int = 0) -> Fleet:
        return judge(self, unnamed_missing)


def judge(builder: FleetBuilder, unnamed_missing: int = 0) -> Fleet:
    """The fleet's verdict from the folded nodes (see the module's docstring)."""
    stacks = tuple(builder.groups)
    checks: list[CheckFinding] = []
    metrics: list[MetricSummary] = []
    undecided: set[tuple[str, str]] = set()
    for index, group in enumerate(builder.groups.values()):
        checks += _fleet_wide(index, group)
        undecided |= {(name, c) for c, t in group.checks.items() if t.ran < 2 for name in t.failing}
        metrics += _metric_summaries(index, group, builder.band_for)
    explained = {(name, f.check) for f in checks for name in f.nodes}
    below: dict[str, list[PeerFinding]] = {}
    for summary in metrics:
        for finding in summary.flagged:
            below.setdefault(finding.subject, []).append(finding)
    decisions = {r.name: _decide(r, explained, undecided, below.get(r.name, [])) for r in builder.records}
    reported = len(builder.records)
    drain_unreadable = len(builder.unreadable) * 2 <= reported + len(builder.unreadable) and reported > 0
    unreadable = {}
    for u in builder.unreadable:
        name = u.host if u.host not in decisions else f"{u.host} ({Path(u.source).name!a})"
        if not u.named:
            decisions[name] = Decision("undecided", (NO_HOST_NAME,), (u.reason,))
        else:
            decisions[name] = Decision("drain" if drain_unreadable else "undecided", (NO_REPORT,), (u.reason,))
        unreadable[name] = u
    duplicates = {host: tuple(s) for host, s in builder.sources.items() if len(s) > 1}
    fleet = Fleet(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        stacks=stacks,
        stack_nodes=tuple(tuple(g.nodes) for g in builder.groups.values()),
        nodes=tuple(sorted(builder.records, key=lambda r: r.name)),
        unreadable=unreadable,
        checks=tuple(checks),
        metrics=tuple(metrics),
        decisions=decisions,
        parts=(),
        unnamed_missing=unnamed_missing,
        duplicates=duplicates,
    )
    return _with_parts(fleet, drain_unreadable)


def _fleet_wide(stack: int, group: _Group) -> list[CheckFinding]:
    """The checks of a stack that fail on more than half of the nodes that ran them (two or
    more), counting only failures the image or the provisioning owns."""
    found = []
    for check, tally in group.checks.items():
        owned = {n: c for n, c in tally.failing.items() if c in FLEET_WIDE_CATEGORIES}
        if tally.ran >= 2 and len(owned) * 2 > tally.ran:
            found.append(CheckFinding(stack, check, tuple(owned), tally.ran, dict(Counter(owned.values()))))
    return found


def _metric_summaries(stack: int, group: _Group, band_for: BandFor) -> list[MetricSummary]:
    found = []
    for (name, unit, better), samples in sorted(group.samples.items()):
        if len(samples) < 2:
            continue
        findings = compare(name, unit, better, samples, band_for(name, group.stack.backend))
        if not findings:
            continue
        found.append(
            MetricSummary(
                name,
                unit,
                better,
                stack,
                statistics.median(s.value for s in samples),
                {f.subject: f.ratio for f in findings},
                tuple(f for f in findings if f.flagged),
            )
        )
    return found


def _decide(
    record: NodeRecord, explained: set[tuple[str, str]], undecided: set[tuple[str, str]], below: list[PeerFinding]
) -> Decision:
    """Drain for the node's own failures; then what its own run says (`run_end`: interrupted,
    rerun; a usage error or nothing validated, undecided); then rerun for what other work beside
    its measurements or a crash may explain, undecided for a failure no other node could confirm;
    `image` when its only failures are the image's (labelled with their categories)."""
    drain: list[str] = []
    rerun: list[str] = []
    open_: list[str] = []
    details: list[str] = [f"its own verdict: {record.verdict}"] if record.ended and record.verdict else []
    for check, category in record.failed:
        if (record.name, check) in explained:
            continue
        details.append(f"{check}: {category}")
        if (record.name, check) in undecided:
            open_.append(category)
        elif category in RERUN_CATEGORIES or (record.contention and category in MEASURED_CATEGORIES):
            rerun.append("contention" if category in MEASURED_CATEGORIES else category)
        else:
            drain.append(category)
    measured = ([BELOW_PEERS] if record.below_peers else []) + ([BELOW_FLEET] if below else [])
    details += [*record.below_peers, *(f.message for f in below)]
    if record.contention:
        rerun += ["contention"] if measured else []
        details.append(f"contention: {record.contention}")
    else:
        drain += measured
    if drain:
        return Decision("drain", _labels(drain), tuple(details))
    if record.ended:
        action = RUN_END_ACTIONS.get(record.ended, "undecided")
        return Decision(action, (record.ended, *_labels(rerun if action == "rerun" else open_)), tuple(details))
    if rerun:
        return Decision("rerun", _labels(rerun), tuple(details))
    if open_:
        return Decision("undecided", _labels(open_), tuple(details))
    if record.failed:
        image = tuple(f"{check}: {category} (failing on most nodes: the image's)" for check, category in record.failed)
        return Decision("image", _labels([category for _, category in record.failed]), image)
    return Decision("pass")


def _labels(reasons: Sequence[str]) -> tuple[str, ...]:
    """Each reason once, categories in triage order first: nodes failing alike share a label."""
    return tuple(c for c in CATEGORIES if c in reasons) + tuple(
        dict.fromkeys(r for r in reasons if r not in CATEGORIES)
    )


def counts_text(categories: dict[str, int]) -> str:
    """'numerics: 2, performance: 1' in triage order."""
    return ", ".join(f"{c}: {categories[c]}" for c in CATEGORIES if categories.get(c))


def _named(hosts: Sequence[str]) -> str:
    shown = ", ".join(hosts[:SHOWN])
    return shown + (f" and {len(hosts) - SHOWN} more" if len(hosts) > SHOWN else "")


def _by_reason(fleet: Fleet, action: str, among: Collection[str] | None = None) -> str:
    """'node-a, node-b (numerics); node-c (below the fleet median)', of the nodes `among` when given."""
    groups: dict[str, list[str]] = {}
    for name, decision in sorted(fleet.decisions.items()):
        if decision.action == action and (among is None or name in among):
            label = ", ".join(decision.reasons)
            groups.setdefault(label, []).append(name)
    return "; ".join(f"{_named(hosts)} ({label})" for label, hosts in groups.items())


def _with_parts(fleet: Fleet, drain_unreadable: bool) -> Fleet:
    parts = []
    mixed = len(fleet.stacks) > 1

    def where(stack: int) -> str:
        return f" on {fleet.stacks[stack].label()}" if mixed else ""

    for kind, lead, action in (
        ("image", "image regression", "roll back the image"),
        ("configuration", "host configuration on most nodes", "fix the provisioning the preflight names, then rerun"),
    ):
        for stack in range(len(fleet.stacks)):
            mine = [f for f in fleet.checks if f.kind == kind and f.stack == stack]
            if mine:
                more = f", and {len(mine) - 3} more checks" if len(mine) > 3 else ""
                parts.append(f"{lead}{where(stack)}: {', '.join(f.describe() for f in mine[:3])}{more}: {action}")
    if any(d.action == "drain" for d in fleet.decisions.values()):
        parts.append(f"drain: {_by_reason(fleet, 'drain')}")
    if any(d.action == "rerun" for d in fleet.decisions.values()):
        seen = [f"{r.name}: {r.contention}" for r in fleet.nodes if r.contention and _acts(fleet, r.name, "rerun")]
        beside = f"; other work beside the measurements: {'; '.join(seen[:3])}" if seen else ""
        idle = all(d.reasons == ("contention",) for d in fleet.decisions.values() if d.action == "rerun")
        parts.append(f"rerun{' on an idle node' if idle else ''}: {_by_reason(fleet, 'rerun')}{beside}")
    ended = {r.name for r in fleet.nodes if r.ended}
    undecided = {n: d for n, d in sorted(fleet.decisions.items()) if d.action == "undecided"}
    one_node = [n for n, d in undecided.items() if n not in ended and d.reasons[0] not in (NO_REPORT, NO_HOST_NAME)]
    if one_node:
        parts.append(
            f"{_named(one_node)}: a check that ran on one node only cannot tell the image from the node; "
            "merge more nodes' reports"
        )
    if any(n in ended for n in undecided):
        parts.append(
            f"not judged: {_by_reason(fleet, 'undecided', ended)}: their own runs did not judge what they were "
            "asked (see each node's verdict); fix the command or image they ran, then rerun them"
        )
    unnamed = [n for n, d in undecided.items() if d.reasons[0] == NO_HOST_NAME]
    if unnamed:
        parts.append(
            f"{_named(unnamed)}: the report's host name cannot be written to the drain list (see each one's "
            "reason); set ROCM_VALIDATE_HOST to the node's name and rerun it"
        )
    if fleet.unreadable and not drain_unreadable:
        parts.append(
            f"no usable report from {len(fleet.unreadable)} of {len(fleet.unreadable) + len(fleet.nodes)} nodes: "
            "the launch or the shared folder failed, not the nodes (see each node's reason); nothing drained for it"
        )
    if fleet.unnamed_missing:
        parts.append(
            f"{fleet.unnamed_missing} more node(s) expected sent no report and are not named: check the job's "
            "tasks or pods, or pass --expect with their host names"
        )
    if mixed:
        groups = "; ".join(
            f"{s.label()} ({len(nodes)} node{'s' if len(nodes) != 1 else ''}: {_named(nodes)})"
            for s, nodes in zip(fleet.stacks, fleet.stack_nodes)
        )
        parts.append(f"mixed stacks: {len(fleet.stacks)} ({groups}); each stack is judged against its own nodes")
    if fleet.duplicates:
        parts.append(
            "several reports claim one host: "
            + ", ".join(f"{h} ({len(s)})" for h, s in sorted(fleet.duplicates.items()))
            + " (set ROCM_VALIDATE_HOST per node)"
        )
    if not parts:
        parts.append(_pass_line(fleet))
    return replace(fleet, parts=tuple(parts))


def _acts(fleet: Fleet, name: str, action: str) -> bool:
    decision = fleet.decisions.get(name)
    return decision is not None and decision.action == action


def _pass_line(fleet: Fleet) -> str:
    count = len(fleet.nodes)
    if count == 1:
        return "pass: every check that ran passed on the one node (a fleet of one has no median to compare with)"
    if all(stack.backend == "cpu" for stack in fleet.stacks):
        return f"pass: every check that ran passed on all {count} nodes ({CPU_NOT_COMPARED})"
    return f"pass: every check that ran passed on all {count} nodes, and no node is below the fleet median"
