"""The fleet report, four ways: JSON (every node, every metric's median and each node's ratio to
it, schema-checked), markdown a person reads (outliers first; healthy nodes counted, not listed,
so it stays readable at a thousand nodes), JUnit XML with one test case per node for CI, and the
drain list (one host per line) for automation (`scontrol update NodeName=... State=DRAIN`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Sequence
from typing import Any

from rocm_validate import __version__
from rocm_validate.fleet.judge import Decision, Fleet, counts_text
from rocm_validate.results.metrics import format_number
from rocm_validate.results.peers import PeerFinding

FLEET_VERSION = "rocm-validate/fleet/1"
ACTIONS = ("pass", "drain", "rerun", "undecided", "image")
_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_COUNTS = {"type": "object", "additionalProperties": {"type": "integer"}}

FLEET_SCHEMA: dict[str, Any] = {
    "title": "rocm-validate fleet report",
    "type": "object",
    "required": ["schema", "created", "verdict", "parts", "exit_status", "stacks", "nodes", "metrics", "drain"],
    "properties": {
        "schema": {"const": FLEET_VERSION},
        "created": _STRING,
        "rocm_validate": _STRING,
        "verdict": _STRING,
        "parts": _STRINGS,
        "exit_status": {"enum": [0, 1]},
        "mixed_stacks": {"type": "boolean"},
        "stacks": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["label", "device_key", "nodes"],
                "properties": {"nodes": _STRINGS},
            },
        },
        "nodes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "host", "source", "action", "reasons"],
                "properties": {
                    "name": _STRING,
                    "host": _STRING,
                    "source": _STRING,
                    "stack": {"type": ["integer", "null"]},
                    "action": {"enum": list(ACTIONS)},
                    "reasons": _STRINGS,
                    "details": _STRINGS,
                    "verdict": {"type": ["string", "null"]},
                    "exit_status": {"type": ["integer", "null"]},
                    "ended": _STRING,
                    "categories": _COUNTS,
                    "failed_checks": {"type": "array", "items": {"type": "object", "required": ["check", "category"]}},
                    "known_defects": _COUNTS,
                },
            },
        },
        "image_regressions": {"type": "array", "items": {"type": "object", "required": ["check", "failing", "ran"]}},
        "metrics": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "unit", "better", "stack", "median", "ratios", "flagged"],
                "properties": {
                    "median": {"type": "number"},
                    "ratios": {"type": "object", "additionalProperties": {"type": "number"}},
                },
            },
        },
        "drain": _STRINGS,
        "rerun": _STRINGS,
        "unnamed_missing": {"type": "integer", "minimum": 0},
    },
}


def to_dict(fleet: Fleet) -> dict[str, Any]:
    """The fleet report (FLEET_SCHEMA)."""
    nodes: list[dict[str, Any]] = [
        {
            "name": r.name,
            "host": r.host,
            "source": r.source,
            "stack": r.stack,
            "gpus": r.gpus,
            "created": r.created,
            "verdict": r.verdict,
            "exit_status": r.exit_status,
            "ended": r.ended,
            "categories": dict(Counter(category for _, category in r.failed)),
            "failed_checks": [{"check": c, "category": cat} for c, cat in r.failed],
            "below_peers": list(r.below_peers),
            "known_defects": dict(Counter(r.known_defects)),
            "contention": r.contention,
            **_decision(fleet.decisions[r.name]),
        }
        for r in fleet.nodes
    ]
    nodes += [
        {
            "name": name,
            "host": u.host,
            "source": u.source,
            "stack": None,
            "verdict": None,
            "exit_status": None,
            "categories": {},
            **_decision(fleet.decisions[name]),
        }
        for name, u in fleet.unreadable.items()
    ]
    return {
        "schema": FLEET_VERSION,
        "created": fleet.created,
        "rocm_validate": __version__,
        "verdict": fleet.verdict,
        "parts": list(fleet.parts),
        "exit_status": fleet.exit_status,
        "mixed_stacks": len(fleet.stacks) > 1,
        "stacks": [{**s.to_dict(), "nodes": list(n)} for s, n in zip(fleet.stacks, fleet.stack_nodes)],
        "nodes": nodes,
        "image_regressions": [
            {
                "stack": f.stack,
                "kind": f.kind,
                "check": f.check,
                "failing": f.failing,
                "ran": f.ran,
                "categories": f.categories,
            }
            for f in fleet.checks
        ],
        "metrics": [
            {
                "name": m.name,
                "unit": m.unit,
                "better": m.better,
                "stack": m.stack,
                "median": m.median,
                "ratios": {k: round(v, 5) for k, v in m.ratios.items()},
                "flagged": [
                    {"node": f.subject, "value": f.value, "median": f.median, "ratio": f.ratio, "message": f.message}
                    for f in m.flagged
                ],
            }
            for m in fleet.metrics
        ],
        "drain": fleet.hosts("drain"),
        "rerun": fleet.hosts("rerun"),
        "duplicates": {h: list(s) for h, s in fleet.duplicates.items()},
        "unnamed_missing": fleet.unnamed_missing,
    }


def _decision(decision: Decision) -> dict[str, Any]:
    return {"action": decision.action, "reasons": list(decision.reasons), "details": list(decision.details)}


def drain_list(fleet: Fleet) -> str:
    """One host per line, each once, sorted; empty when nothing is to be drained."""
    hosts = fleet.hosts("drain")
    return "".join(f"{host}\n" for host in hosts)


# ------------------------------------------------------------------------------------------------
# markdown

ROWS = 20  # rows per table; the JSON report has every one


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _section(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A titled table of the first ROWS rows, saying how many more the JSON report has."""
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows[:ROWS]]
    if len(rows) > ROWS:
        lines += ["", f"... and {len(rows) - ROWS} more (every row is in the JSON fleet report)"]
    return lines + [""]


def headline(fleet: Fleet) -> str:
    counts = Counter(d.action for d in fleet.decisions.values())
    total = len(fleet.decisions)
    nodes = f"{total} node{'s' if total != 1 else ''}"
    if fleet.passed:
        return f"rocm-validate fleet: passed ({nodes})"
    shown = ", ".join(f"{counts[a]} {a}" for a in ("drain", "rerun", "undecided") if counts[a])
    image = f"image regression on {len(fleet.checks)} check(s)" if fleet.checks else ""
    if counts["image"]:
        shown = ", ".join(x for x in (shown, f"{counts['image']} failing only the image's checks") if x)
    return f"rocm-validate fleet: FAILED ({', '.join(x for x in (image, shown) if x) or 'see the verdict'}; {nodes})"


def _badness(finding: PeerFinding) -> float:
    """How far below its peers a finding is (1 - ratio for throughput, the inverse for latency)."""
    return 1 - finding.ratio if finding.better == "higher" else 1 - 1 / finding.ratio


def _outlier_rows(fleet: Fleet) -> list[tuple[str, ...]]:
    """One row per node beyond the band on any metric: how many, and its worst; worst node first."""
    by_node: dict[str, list[PeerFinding]] = {}
    for summary in fleet.metrics:
        for finding in summary.flagged:
            by_node.setdefault(finding.subject, []).append(finding)
    ranked = sorted(
        ((max(found, key=_badness), len(found)) for found in by_node.values()), key=lambda w: -_badness(w[0])
    )
    return [
        (
            w.subject,
            str(count),
            w.name,
            f"{format_number(w.value)} {w.unit}",
            format_number(w.median),
            f"{w.ratio:.3f}",
            f"{w.allowed or 0:.1%}",
        )
        for w, count in ranked
    ]


def _metric_rows(fleet: Fleet) -> list[tuple[str, ...]]:
    """One row per metric with a node beyond the band: the fleet median and the worst node."""
    rows: list[tuple[str, ...]] = []
    for m in fleet.metrics:
        if m.flagged:
            worst = min(m.ratios.items(), key=lambda kv: kv[1] if m.better == "higher" else -kv[1])
            rows.append(
                (
                    m.name,
                    str(len(m.ratios)),
                    f"{format_number(m.median)} {m.unit}",
                    f"{worst[0]} ({worst[1]:.3f})",
                    str(len(m.flagged)),
                )
            )
    return rows


def markdown(fleet: Fleet) -> str:
    """The fleet summary: verdict, stacks, image regressions, the nodes to drain and rerun, the
    outliers against the fleet median worst first, the metrics, and the healthy nodes counted."""
    lines = [f"## {headline(fleet)}", "", f"**{_cell(fleet.verdict)}**", ""]
    for stack, nodes in zip(fleet.stacks, fleet.stack_nodes):
        lines.append(f"- stack: {stack.label()} ({len(nodes)} node{'s' if len(nodes) != 1 else ''})")
    lines.append(f"- reports: {len(fleet.nodes)} read, {len(fleet.unreadable)} missing or unusable")
    counts = Counter(d.action for d in fleet.decisions.values())
    lines += ["- nodes: " + ", ".join(f"{counts[a]} {a}" for a in ACTIONS if counts[a]), ""]
    if fleet.checks:
        rows: list[tuple[str, ...]] = [
            (f.check, str(f.failing), str(f.ran), counts_text(f.categories)) for f in fleet.checks
        ]
        lines += _section("Checks failing on most nodes", ("check", "failing", "of nodes", "categories"), rows)
    for action, title in (
        ("drain", "Drain"),
        ("rerun", "Rerun"),
        ("undecided", "Undecided"),
        ("image", "Failing only the image's checks"),
    ):
        named = sorted((n, d) for n, d in fleet.decisions.items() if d.action == action)
        if named:
            rows = [(n, ", ".join(d.reasons), "; ".join(d.details[:2])) for n, d in named]
            lines += _section(f"{title} ({len(named)})", ("node", "why", "findings"), rows)
    known = Counter(k for r in fleet.nodes for k in set(r.known_defects))
    if known:
        rows = [(k, str(n)) for k, n in sorted(known.items())]
        lines += _section("Known defects (tracked, not failing a node)", ("entry", "nodes"), rows)
    outliers = _outlier_rows(fleet)
    if outliers:
        header: tuple[str, ...] = (
            "node",
            "metrics beyond",
            "worst metric",
            "value",
            "median of the others",
            "ratio",
            "allowed",
        )
        lines += _section("Nodes beyond the band of the fleet median (worst first)", header, outliers)
    metrics = _metric_rows(fleet)
    if metrics:
        header = ("metric", "nodes", "fleet median", "worst node (ratio)", "beyond the band")
        lines += _section("Metrics with nodes beyond the band", header, metrics)
    if fleet.metrics:
        lines += [
            f"{len(fleet.metrics) - len(metrics)} other metrics: every node within the band of the fleet median.",
            "",
        ]
    healthy = sum(1 for d in fleet.decisions.values() if d.action == "pass")
    lines.append(
        f"{healthy} node{'s' if healthy != 1 else ''} passed every check and sit within the band of the fleet median "
        "(counted, not listed; the JSON fleet report has every node)."
    )
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# JUnit


def junit(fleet: Fleet) -> str:
    """JUnit XML, one test case per node: a failure for every node that did not pass, with the reasons."""
    cases = []
    hosts = {r.name: r for r in fleet.nodes}
    for name, decision in sorted(fleet.decisions.items()):
        case = ElementTree.Element("testcase", classname="rocm-validate.fleet", name=name, time="0")
        properties = ElementTree.SubElement(case, "properties")
        record = hosts.get(name)
        facts = {"action": decision.action, "reasons": ", ".join(decision.reasons)}
        if record is not None:
            facts.update(
                verdict=record.verdict,
                categories=counts_text(dict(Counter(category for _, category in record.failed))),
                stack=fleet.stacks[record.stack].label(),
                source=record.source,
            )
        for key, value in facts.items():
            ElementTree.SubElement(properties, "property", name=f"rocm_fleet.{key}", value=value)
        if decision.action != "pass":
            failure = ElementTree.SubElement(
                case, "failure", message=f"{decision.action}: {', '.join(decision.reasons)}", type=decision.action
            )
            failure.text = "\n".join(decision.details)
        cases.append(case)
    failures = sum(1 for c in cases if c.find("failure") is not None)
    suite = ElementTree.Element(
        "testsuite", name="rocm-validate fleet", tests=str(len(cases)), failures=str(failures), errors="0", skipped="0"
    )
    ElementTree.SubElement(
        ElementTree.SubElement(suite, "properties"), "property", name="rocm_fleet.verdict", value=fleet.verdict
    )
    suite.extend(cases)
    root = ElementTree.Element("testsuites")
    root.append(suite)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
