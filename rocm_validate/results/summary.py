"""The summary a person looks at: the device and stack, one row per suite, the metrics with their
ratio and verdict per GPU, each GPU against its peers, and the failures.

One set of tables (`tables`) is rendered three ways: markdown for `--rocm-summary=PATH` (a CI
step summary, e.g. `$GITHUB_STEP_SUMMARY`), HTML sections for pytest-html's report (with plots
when matplotlib is installed, `results/plots.py`), and aligned text for the terminal's node table.
Pure, torch-free.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.results.metrics import format_number
from rocm_validate.results.peers import PeerFinding
from rocm_validate.results.report import (
    TestResult,
    device_summary,
    metrics_in_order,
    stack_summary,
)
from rocm_validate.results.triage import NOTHING_VALIDATED, RunEnd
from rocm_validate.text import clip

_FAILED = ("failed", "error", "xpassed")
_MESSAGE_CHARS = 300


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class RunFacts:
    """What the summary shows: the command, its exit status, the devices validated and every result."""

    command: str
    exit_status: int | None
    devices: list[DeviceInfo]
    results: list[TestResult]
    peers: list[PeerFinding] = field(default_factory=list)
    verdict: str | None = None  # the triage verdict line
    end: RunEnd = field(default_factory=RunEnd)  # interrupted, stopped, what --update-baselines recorded

    @property
    def passed(self) -> bool:
        return self.exit_status == 0

    @property
    def validated(self) -> bool:
        """Whether any test ran to an outcome (skips validate nothing)."""
        return any(r.outcome not in ("skipped", "xfailed") for r in self.results)


def _first_line(message: str) -> str:
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    text = next((line for line in lines if line.startswith("E ")), lines[-1] if lines else "")
    return clip(text.removeprefix("E ").strip(), _MESSAGE_CHARS)


def _gpu_cell(result_gpu: object) -> str:
    index = getattr(result_gpu, "index", None)
    return "-" if index is None else str(index)


def suite_table(results: Iterable[TestResult]) -> Table:
    counts: dict[str, Counter[str]] = {}
    for result in results:
        if result.suite:
            counts.setdefault(result.suite, Counter())[result.outcome] += 1
    rows = tuple(
        (
            suite,
            str(c["passed"]),
            str(sum(c[o] for o in _FAILED)),
            str(c["skipped"]),
            str(c["xfailed"]),
            str(c["known-defect"]),
        )
        for suite, c in sorted(counts.items())
    )
    return Table("Suites", ("suite", "passed", "failed", "skipped (not validated)", "xfailed", "known-defect"), rows)


def gpu_table(devices: Sequence[DeviceInfo], results: Iterable[TestResult], peers: Sequence[PeerFinding]) -> Table:
    """One row per GPU of a whole-node run: its identity, its own test counts, its peer flags."""
    by_gpu: dict[int, Counter[str]] = {}
    for result in results:
        if result.gpu is not None:
            by_gpu.setdefault(result.gpu.index, Counter())[result.outcome] += 1
    flags = Counter(f.gpu.index for f in peers if f.flagged and f.gpu is not None)
    rows = []
    for device in devices:
        if not device.is_gpu or device.index is None:
            continue
        c = by_gpu.get(device.index, Counter())
        rows.append(
            (
                str(device.index),
                device.pci_bus_id or "-",
                device.uuid or "-",
                device.name,
                str(c["passed"]),
                str(sum(c[o] for o in _FAILED)),
                str(c["skipped"]),
                str(flags[device.index]),
            )
        )
    header = ("GPU", "BDF", "UUID", "name", "passed", "failed", "skipped", "below peers")
    return Table("GPUs", header, tuple(rows))


def metric_table(results: Iterable[TestResult], peers: Sequence[PeerFinding]) -> Table:
    """Every metric, one row per GPU it was measured on, with its baseline ratio and peer ratio."""
    peer_of = {(f.name, f.gpu.index): f for f in peers if f.gpu is not None}
    rows = []
    for metric in metrics_in_order(results):
        finding = peer_of.get((metric.name, metric.gpu.index)) if metric.gpu is not None else None
        verdict = metric.verdict + (" / below peers" if finding is not None and finding.flagged else "")
        rows.append(
            (
                metric.name,
                _gpu_cell(metric.gpu),
                format_number(metric.value),
                metric.unit,
                "-" if metric.ratio is None else f"{metric.ratio:.3f}",
                "-" if finding is None else f"{finding.ratio:.3f}",
                verdict,
            )
        )
    return Table("Metrics", ("metric", "GPU", "value", "unit", "x baseline", "x peer median", "verdict"), tuple(rows))


def failure_table(results: Iterable[TestResult]) -> Table:
    rows = tuple((r.title, r.outcome, _first_line(r.message)) for r in results if r.outcome in _FAILED)
    return Table("Failures", ("test", "outcome", "message"), rows)


def known_defect_table(results: Iterable[TestResult]) -> Table:
    """Each test a known-defect entry matched: the entry, the library version found, the
    workaround, and whether it still reproduces."""
    rows = tuple(
        (r.title, r.known_defect.id, r.known_defect.library, r.known_defect.state, r.known_defect.workaround)
        for r in results
        if r.known_defect is not None
    )
    return Table("Known defects", ("test", "entry", "library", "state", "workaround"), rows)


def tables(facts: RunFacts) -> list[Table]:
    """The summary's tables, those with rows only."""
    found = [suite_table(facts.results)]
    if any(r.gpu is not None for r in facts.results):
        found.append(gpu_table(facts.devices, facts.results, facts.peers))
    found += [metric_table(facts.results, facts.peers), failure_table(facts.results)]
    found.append(known_defect_table(facts.results))
    return [table for table in found if table.rows]


def headline(facts: RunFacts) -> str:
    """'rocm-validate: passed (exit status 0)', and never 'passed' for a run that was interrupted,
    validated nothing or recorded nothing it was asked to."""
    end = facts.end
    if end.interrupted:
        status = f"INTERRUPTED by {end.interrupted}"
    elif end.stopped:
        status = "usage error" if facts.validated else f"usage error, {NOTHING_VALIDATED}"
    elif not facts.passed:
        status = "FAILED" if facts.validated else f"FAILED, {NOTHING_VALIDATED}"
    elif not facts.validated:
        status = NOTHING_VALIDATED
    elif end.recorded == 0:
        status = "nothing was recorded"
    else:
        status = "passed"
    return f"rocm-validate: {status} (exit status {facts.exit_status})"


def device_lines(devices: Sequence[DeviceInfo]) -> list[str]:
    """'8 x AMD Instinct MI300X (gfx942, key ...); torch ..., HIP ...' per distinct device and stack."""
    groups: dict[str, list[DeviceInfo]] = {}
    for device in devices:
        groups.setdefault(f"{device.device_key}|{stack_summary(device)}", []).append(device)
    lines = []
    for group in groups.values():
        count = f"{len(group)} x " if len(group) > 1 else ""
        lines.append(f"{count}{device_summary(group[0])}; {stack_summary(group[0])}")
    return lines


def peer_lines(peers: Sequence[PeerFinding]) -> list[str]:
    """The messages of the GPUs (or pairs) worse than their peers."""
    return [f.message for f in peers if f.flagged]


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(facts: RunFacts) -> str:
    lines = [f"## {headline(facts)}", ""]
    if facts.verdict:
        lines += [f"**{_markdown_cell(facts.verdict)}**", ""]
    lines += [f"- device: {line}" for line in device_lines(facts.devices)]
    lines += [f"- command: `{facts.command}`", ""]
    flagged = peer_lines(facts.peers)
    if flagged:
        lines += ["### Below their peers", "", *[f"- {_markdown_cell(m)}" for m in flagged], ""]
    for table in tables(facts):
        lines += [f"### {table.title}", "", "| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header)]
        lines += ["| " + " | ".join(_markdown_cell(cell) for cell in row) + " |" for row in table.rows]
        lines.append("")
    return "\n".join(lines)


def html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in table.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in table.rows)
    return f"<h3>{html.escape(table.title)}</h3><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_sections(facts: RunFacts) -> list[str]:
    """pytest-html summary sections: the same facts as the markdown, then the plots (per-GPU ratio
    to baseline and to the peer median; bus bandwidth against message size) when matplotlib is
    installed, or a line saying how to get them."""
    from rocm_validate.results import plots

    items = "".join(f"<li>{html.escape(line)}</li>" for line in device_lines(facts.devices))
    flagged = "".join(f"<li>{html.escape(m)}</li>" for m in peer_lines(facts.peers))
    sections = [f"<h2>{html.escape(headline(facts))}</h2><ul>{items}</ul>"]
    if flagged:
        sections.append(f"<h3>Below their peers</h3><ul>{flagged}</ul>")
    sections += [html_table(table) for table in tables(facts)]
    metrics = [m for r in facts.results for m in r.metrics]
    images = plots.render(metrics, facts.peers)
    if images is None:
        sections.append(f"<p>Plots need matplotlib: {html.escape(plots.INSTALL)}</p>")
    else:
        sections += [
            f'<h3>{html.escape(title)}</h3><img alt="{html.escape(title)}" src="data:image/png;base64,{data}"/>'
            for title, data in images
        ]
    return sections


def aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A plain aligned text table with a rule under the header."""
    table = [tuple(header), *(tuple(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def node_table(devices: Sequence[DeviceInfo], results: Iterable[TestResult], peers: Sequence[PeerFinding]) -> list[str]:
    """The terminal's node table: one row per GPU (or a line saying the CPU was validated once)."""
    table = gpu_table(devices, results, peers)
    if not table.rows:
        return ["no GPU in this node run: the CPU was validated once"]
    return aligned(table.header, table.rows)
