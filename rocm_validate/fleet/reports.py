"""One node's report (`pytest --rocm-report=<host>.json`) read into what the fleet needs: the
node's name and stack, each check once (its GPUs folded), each metric once (the median over its
GPUs), its own verdict, the GPUs it found below their peers and the other work seen while it
measured. Reports are read one at a time and reduced at once, so a thousand nodes fit in memory.

A report that cannot be used (missing, empty, truncated, another schema version, another kind of
file, a dangling or looping link) becomes an `Unreadable` that names the node and says why: the
fleet never drops a node. Every string the fleet writes out (drain list, markdown, JUnit) is checked
here as it is read: a host name is one line of letters, digits, '.', '_' and '-' (the drain list
is fed to `scontrol update NodeName=...`), any other text one printable line; a figure is a
positive finite number. A report breaking one of these is an `Unreadable` naming what broke.
"""

from __future__ import annotations

import math
import os
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from rocm_validate import __version__
from rocm_validate.errors import JsonFileError
from rocm_validate.perf.attribution import contention
from rocm_validate.results import jsonfile
from rocm_validate.results.metrics import BETTER
from rocm_validate.results.report import FAILING_OUTCOMES, REPORT_SCHEMA, software_items
from rocm_validate.results.triage import CATEGORIES, combine

REPORT_VERSION: str = REPORT_SCHEMA["properties"]["schema"]["const"]
_ENVELOPE = {"title": "rocm-validate report", "type": "object", "required": ["schema"]}
# The report schema down to its sections; the entries of tests, metrics, peers and node (hundreds
# a report) are checked field by field as they are read (`_Entries`): jsonschema's descent into
# every entry costs 70 ms a whole-node report, 70 s for a thousand nodes.
_SECTIONS = {
    **REPORT_SCHEMA,
    "properties": {
        **REPORT_SCHEMA["properties"],
        **{key: {"type": "array"} for key in ("tests", "metrics", "peers")},
        "node": {"type": ["object", "null"]},
    },
}
_OUTCOMES = frozenset(REPORT_SCHEMA["properties"]["tests"]["items"]["properties"]["outcome"]["enum"])
_FIX = "Rerun the suites on that node with --rocm-report, or take the file out of the fleet's folder"
_NOT_RUN = ("skipped", "xfailed")
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
HOST_RULE = "one line of letters, digits, '.', '_' and '-', starting with a letter or digit, at most 253 characters"


@dataclass(frozen=True)
class Stack:
    """What a node runs: its SKU and the software a rollout changes. Nodes are compared only with
    nodes of the same stack."""

    device_key: str
    device_name: str
    backend: str
    torch: str | None = None
    runtime: str | None = None  # HIP or CUDA version
    driver: str | None = None

    @property
    def software(self) -> tuple[str | None, str | None, str | None]:
        return self.torch, self.runtime, self.driver

    def label(self) -> str:
        """'NVIDIA H100 80GB HBM3; torch 2.11.0+cu130, CUDA 13.0, driver 580.159.04'."""
        items = software_items(self.backend, self.torch or "unknown", self.runtime, self.driver)
        return f"{self.device_name}; {', '.join(items)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label(),
            "device_key": self.device_key,
            "backend": self.backend,
            "torch": self.torch,
            "runtime": self.runtime,
            "driver": self.driver,
        }


@dataclass(frozen=True)
class NodeMetric:
    """One metric of one node: the median over the node's GPUs that measured it."""

    name: str
    unit: str
    better: str
    value: float
    dispersion: float | None = None
    contention: str = ""  # other work seen while it was measured ('' when none)


@dataclass(frozen=True)
class NodeSummary:
    """What the fleet keeps of one node's report."""

    host: str
    source: str
    stack: Stack
    checks: tuple[tuple[str, str | None], ...]  # (test id, category of its failure or None), one per check that ran
    metrics: tuple[NodeMetric, ...] = ()
    verdict: str = ""  # the node's own verdict line
    exit_status: int | None = None
    created: str = ""
    below_peers: tuple[str, ...] = ()  # GPUs of this node below their peers (the report's own peer comparison)
    gpus: int = 1
    summary: Mapping[str, int] = field(default_factory=dict)
    known_defects: tuple[str, ...] = ()  # 'cudnn-sdpa-njt-backward (cudnn 9.19.0)', once per test that matched one

    @property
    def contention(self) -> str:
        """The first other work seen while this node measured ('' when none)."""
        return next((m.contention for m in self.metrics if m.contention), "")


@dataclass(frozen=True)
class Unreadable:
    """A node whose report is missing or cannot be used, and why. `host` is a host name when
    `named` (it may be drained), else the file's name as `ascii()` shows it: never written to
    the drain list."""

    host: str
    source: str
    reason: str
    named: bool = True


def host_problem(host: str) -> str | None:
    """Why `host` cannot be a node's name in the drain list and the outputs (None: it can)."""
    if HOST_NAME.fullmatch(host):
        return None
    return f"{host!a} is not a host name ({HOST_RULE})"


def line_problem(text: str) -> str | None:
    """Why `text` cannot be written as one line of a drain list, markdown or JUnit (None: it can)."""
    if text.isprintable():
        return None
    bad = next(c for c in text if not c.isprintable())
    return f"{text[:80]!a} holds {bad!a}, which is not one printable line"


def host_of(data: Mapping[str, Any], path: Path) -> str:
    """The node's name: the report's `environment.host` (ROCM_VALIDATE_HOST, SLURMD_NODENAME or
    the host name, see results.report.host_name), its `hostname` in reports older than that key,
    else the file's name without `.json`. Raises JsonFileError when it is no host name."""
    environment = data.get("environment") or {}
    for key in ("host", "hostname"):
        value = environment.get(key)
        if isinstance(value, str) and value.strip():
            problem = host_problem(value.strip())
            if problem:
                _refuse(path, f"environment/{key}: {problem}; set ROCM_VALIDATE_HOST to the node's name")
            return value.strip()
    problem = host_problem(path.stem)
    if problem:
        _refuse(path, f"no environment/host, and the file's name {problem}")
    return path.stem


def read_report(path: Path) -> dict[str, Any]:
    """A node report, checked: its schema version first (another version is named as such), then
    the whole report against this version's schema. Raises JsonFileError naming the file."""
    data = jsonfile.read_json(path, _ENVELOPE, _FIX)
    found = data["schema"]
    if found != REPORT_VERSION:
        if isinstance(found, str) and found.startswith(REPORT_VERSION.rsplit("/", 1)[0] + "/"):
            raise JsonFileError(
                f"{path} is a {found} report; rocm-validate {__version__} reads {REPORT_VERSION}. Merge it with "
                "the rocm-validate that wrote it, or rerun that node with this one"
            )
        raise JsonFileError(f"{path} is not a rocm-validate node report (schema {found!r}). {_FIX}")
    problems = jsonfile.schema_errors(data, _SECTIONS)
    if problems:
        _refuse(path, "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else ""))
    return data


def _refuse(path: Path, problem: str) -> NoReturn:
    raise JsonFileError(f"{path} does not match the {REPORT_VERSION} schema: {problem}. {_FIX}")


class _Entries:
    """The entries of one report's lists, each field the fleet reads checked as it is read, a
    break named by where it is ('tests/12/outcome: 'weird' is not one of ...')."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def each(
        self, section: str, items: Iterable[Any], fields: Mapping[str, tuple[type, ...]]
    ) -> Iterable[Mapping[str, Any]]:
        for index, item in enumerate(items):
            if not isinstance(item, Mapping):
                _refuse(self.path, f"{section}/{index}: {type(item).__name__} is not of type 'object'")
            for key, kinds in fields.items():
                value = item.get(key)
                if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                    shown = (
                        "missing"
                        if key not in item
                        else f"{value!r} is not of type {' or '.join(k.__name__ for k in kinds)}"
                    )
                    _refuse(self.path, f"{section}/{index}/{key}: {shown}")
            yield item

    def line(self, where: str, text: str) -> str:
        """`text`, refused (naming `where`) unless it is one printable line."""
        problem = line_problem(text)
        if problem:
            _refuse(self.path, f"{where}: {problem}")
        return text


def read_node(path: Path) -> NodeSummary | Unreadable:
    """One node from its report file, or why it cannot be used (the node named by the file)."""
    named = host_problem(path.stem) is None
    if line_problem(str(path)):
        return Unreadable(ascii(path.stem), ascii(str(path)), f"the report's path {line_problem(str(path))}", False)
    host, source = (path.stem if named else ascii(path.stem)), str(path)
    problem = _not_a_file(path)
    if problem:
        return Unreadable(host, source, f"{path} {problem}. {_FIX}", named)
    try:
        return summarize(read_report(path), path)
    except JsonFileError as exc:
        return Unreadable(host, source, str(exc), named)


def _not_a_file(path: Path) -> str | None:
    """Why `path` is no report file to read (a link to nothing, a loop of links, a pipe), or None."""
    try:
        if path.is_file():
            return None
    except OSError as exc:  # a loop of links, on some Pythons
        return f"cannot be read ({exc.strerror})"
    if path.is_symlink():
        try:
            target = os.readlink(path)
        except OSError as exc:
            return f"is a link that cannot be read ({exc.strerror})"
        try:
            path.stat()
        except OSError as exc:
            return f"is a link to {target!a}, which cannot be followed ({exc.strerror})"
        return f"is a link to {target!a}, which is not a file"
    if path.exists():
        return "is not a regular file (a folder, a device or a pipe)"
    return "does not exist"


def summarize(data: Mapping[str, Any], path: Path) -> NodeSummary:
    """The fleet's summary of a report that passed `read_report`; raises JsonFileError naming the
    entry that breaks the schema, holds text that is not one printable line, or a figure that is
    not positive."""
    entries = _Entries(path)
    peers = entries.each("peers", data.get("peers") or (), {"subject": (str,), "verdict": (str,)})
    gpus = entries.each("node/gpus", (data.get("node") or {}).get("gpus") or (), {"device": (dict,)})
    verdict = entries.line("verdict", str(data.get("verdict") or ""))
    return NodeSummary(
        host=host_of(data, path),
        source=str(path),
        stack=stack_of(data.get("device"), entries),
        checks=_checks(entries.each("tests", data["tests"], _TEST_FIELDS), entries),
        metrics=_metrics(entries.each("metrics", data["metrics"], _METRIC_FIELDS), entries),
        verdict=verdict.removeprefix("rocm-validate verdict: "),
        exit_status=data.get("exit_status"),
        created=entries.line("created", str(data.get("created") or "")),
        below_peers=tuple(
            entries.line(f"peers/{index}", p.get("message") or p["subject"])
            for index, p in enumerate(peers)
            if p["verdict"] != "pass"
        ),
        gpus=max(1, sum(1 for g in gpus if g["device"].get("index") is not None)),
        summary=dict(data.get("summary") or {}),
        known_defects=tuple(entries.line("tests (known_defect)", k) for k in _known_defects(data["tests"])),
    )


def _known_defects(tests: Iterable[Any]) -> tuple[str, ...]:
    """Each test reported as `known-defect`, as its entry's id and library version."""
    found = []
    for test in tests:
        entry = test.get("known_defect") if isinstance(test, Mapping) else None
        if test.get("outcome") == "known-defect" and isinstance(entry, Mapping):
            found.append(f"{entry.get('id')} ({entry.get('library')})")
    return tuple(found)


_TEST_FIELDS = {"nodeid": (str,), "outcome": (str,), "category": (str, type(None))}
_METRIC_FIELDS = {
    "name": (str,),
    "unit": (str,),
    "better": (str,),
    "verdict": (str,),
    "value": (int, float, type(None)),
    "dispersion": (int, float, type(None)),
    "extra": (dict, type(None)),
}


def stack_of(device: Mapping[str, Any] | None, entries: _Entries) -> Stack:
    """The node's stack, its text checked to be one printable line."""
    if not device:
        return Stack("unknown", "unknown device", "cpu")
    stack = Stack(
        device_key=device["device_key"],
        device_name=device["name"],
        backend=device["backend"],
        torch=device.get("torch_version"),
        runtime=device.get("runtime_version"),
        driver=device.get("driver_version"),
    )
    entries.line("device", stack.label() + stack.device_key)
    return stack


def _checks(tests: Iterable[Mapping[str, Any]], entries: _Entries) -> tuple[tuple[str, str | None], ...]:
    """Each check that ran, once: failed on any of the node's GPUs with the most actionable of
    their categories (triage.combine), else passed. Skips validated nothing and are left out."""
    folded: dict[str, list[str]] = {}
    for index, test in enumerate(tests):
        if test["outcome"] not in _OUTCOMES:
            _refuse(entries.path, f"tests/{index}/outcome: {test['outcome']!r} is not one of {sorted(_OUTCOMES)}")
        if test.get("category") is not None and test["category"] not in CATEGORIES:
            _refuse(entries.path, f"tests/{index}/category: {test['category']!r} is not one of {list(CATEGORIES)}")
        if test["outcome"] in _NOT_RUN:
            continue
        failures = folded.setdefault(entries.line(f"tests/{index}/nodeid", test["nodeid"]), [])
        if test["outcome"] in FAILING_OUTCOMES:
            failures.append(test.get("category") or "crash")
    return tuple((check, combine(categories)) for check, categories in folded.items())


def _metrics(metrics: Iterable[Mapping[str, Any]], entries: _Entries) -> tuple[NodeMetric, ...]:
    """Each metric once, as the median over the GPUs that measured it. A figure the node did not
    itself mark invalid must be a positive number: a throughput or a time of 0 or less is no
    measurement, and a node reporting one is refused rather than judged on its other figures."""
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for index, metric in enumerate(metrics):
        value = metric["value"]
        if metric["verdict"] == "invalid" or value is None or metric["better"] not in BETTER:
            continue
        if not math.isfinite(value) or value <= 0:
            _refuse(
                entries.path,
                f"metrics/{index}/value: {metric['name']} = {value!r} is no measurement (a figure is a positive "
                "number; the node's own run marks a failed measurement 'invalid')",
            )
        key = (
            entries.line(f"metrics/{index}/name", metric["name"]),
            entries.line(f"metrics/{index}/unit", metric["unit"]),
        )
        groups.setdefault((*key, metric["better"]), []).append(metric)
    found = []
    for (name, unit, better), group in groups.items():
        spreads = [m["dispersion"] for m in group if isinstance(m.get("dispersion"), (int, float))]
        seen = (contention(name, (m.get("extra") or {}).get("telemetry") or {}) for m in group)
        found.append(
            NodeMetric(
                name,
                unit,
                better,
                statistics.median(m["value"] for m in group),
                statistics.median(spreads) if spreads else None,
                entries.line(f"metrics ({name}): the other work seen", next((note for note in seen if note), "")),
            )
        )
    return tuple(found)
