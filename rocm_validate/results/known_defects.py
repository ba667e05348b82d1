"""Known defects of the stack, as data: which failure of which test is a defect already tracked
upstream, on which library versions, devices and torch versions, and what to do about it.

A table ships with the package (`known_defects.json`); a site adds its own with
--rocm-known-defects=FILE, each entry with an owner and an expiry date. A failed test whose
failure matches an entry on every count (its test, every failed check, the library version, the
device family and the torch version the run discovered) is reported as `known-defect` with the
entry's id, the library version found and the workaround; any other failure still fails.

Pure: the schema, the loader (text in, entries out) and the matching functions take facts and
return decisions; the pytest side lives in `rocm_validate.core.known_defects`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any

TABLE_SCHEMA_ID = "rocm-validate/known-defects/1"
SHIPPED = "shipped"  # the source of the package's own entries
KNOWN_DEFECT_PROPERTY = "rocm_known_defect"  # the entry a test matched, JSON (reaches the controller under xdist)

_RANGE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "min": {"type": "string", "pattern": r"^\d+(\.\d+)*$", "description": "first affected version (inclusive)"},
        "below": {"type": "string", "pattern": r"^\d+(\.\d+)*$", "description": "first fixed version (exclusive)"},
    },
}
_STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}

ENTRY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "id",
        "summary",
        "upstream",
        "library",
        "versions",
        "backend",
        "archs",
        "tests",
        "checks",
        "workaround",
        "measured",
    ],
    "properties": {
        "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9.-]*$"},
        "summary": {"type": "string", "minLength": 1},
        "upstream": {"type": "array", "items": {"type": "string"}},
        "library": {"type": "string", "minLength": 1},
        "versions": _RANGE,
        "backend": {"enum": ["rocm", "cuda", "cpu"]},
        "archs": _STRINGS,
        "torch": _RANGE,
        "tests": _STRINGS,
        "checks": _STRINGS,
        "workaround": {"type": "string", "minLength": 1},
        "measured": {"type": "string", "minLength": 1},
        "evidence": {"type": "string"},
        "owner": {"type": "string", "minLength": 1},
        "expires": {"type": "string"},
    },
}
TABLE_SCHEMA: dict[str, Any] = {
    "title": "rocm-validate known defects",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema", "defects"],
    "properties": {"schema": {"const": TABLE_SCHEMA_ID}, "defects": {"type": "array"}},
}


class DefectTableError(ValueError):
    """A known-defects table that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class VersionRange:
    """Versions from `min` (inclusive) up to `below` (exclusive, the first fixed one); either may be open."""

    min: str | None = None
    below: str | None = None

    def contains(self, version: tuple[int, ...]) -> bool:
        low = parse_version(self.min) if self.min else None
        high = parse_version(self.below) if self.below else None
        return (low is None or _cmp(version, low) >= 0) and (high is None or _cmp(version, high) < 0)

    def describe(self) -> str:
        if self.min and self.below:
            return f">= {self.min}, < {self.below}"
        if self.min:
            return f">= {self.min} (no fixed version known)"
        return f"< {self.below}" if self.below else "any version"


@dataclass(frozen=True)
class KnownDefect:
    """One entry of a known-defects table (see ENTRY_SCHEMA and docs/triage.md)."""

    id: str
    summary: str
    upstream: tuple[str, ...]
    library: str
    versions: VersionRange
    backend: str
    archs: tuple[str, ...]
    torch: VersionRange
    tests: tuple[str, ...]
    checks: tuple[str, ...]
    workaround: str
    measured: str
    source: str = SHIPPED  # 'shipped', or the site file it came from
    owner: str | None = None
    expires: date | None = None

    def expired(self, today: date) -> bool:
        return self.expires is not None and self.expires < today


@dataclass(frozen=True)
class StackFacts:
    """What the run discovered that an entry is keyed on: the device's backend and arch, torch's
    version and the library versions the device description carries."""

    backend: str
    arch: str
    torch_version: str | None
    libraries: tuple[tuple[str, str], ...] = ()

    def library_version(self, name: str) -> str | None:
        """A library's version as discovered; 'torch' is torch's own (a defect of torch itself)."""
        return self.torch_version if name == "torch" else dict(self.libraries).get(name)


@dataclass(frozen=True)
class Matched:
    """What a test's report carries of the entry it matched: the entry, the library version found,
    the workaround, and whether the defect reproduced (False: the test passed)."""

    id: str
    library: str  # the library and its version as found: 'cudnn 9.19.0'
    workaround: str
    upstream: tuple[str, ...] = ()
    source: str = SHIPPED
    reproduced: bool = True

    @property
    def label(self) -> str:
        """'cudnn-sdpa-njt-backward (cudnn 9.19.0)'."""
        return f"{self.id} ({self.library})"

    @property
    def state(self) -> str:
        return "known defect" if self.reproduced else "no longer reproduces: remove it"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "upstream": list(self.upstream)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Matched:
        return cls(
            str(data["id"]),
            str(data["library"]),
            str(data["workaround"]),
            tuple(data.get("upstream") or ()),
            str(data.get("source") or SHIPPED),
            bool(data["reproduced"]),
        )


@dataclass(frozen=True)
class Match:
    """An entry a test's failure (or pass) matched, with the library version found."""

    defect: KnownDefect
    version: str  # as readable: 'cudnn 9.19.0'

    def matched(self, reproduced: bool) -> Matched:
        d = self.defect
        return Matched(d.id, self.version, d.workaround, d.upstream, d.source, reproduced)


def glob(name: str, pattern: str) -> bool:
    """Whether `name` matches `pattern`, where only '*' is a wildcard (test ids carry brackets)."""
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), name) is not None


def parse_version(text: str) -> tuple[int, ...]:
    """'2.11.0+cu130' -> (2, 11, 0); '9.19' -> (9, 19); () when it starts with no number."""
    found = re.match(r"\d+(\.\d+)*", text.strip())
    return tuple(int(p) for p in found.group(0).split(".")) if found else ()


def library_version(name: str, raw: str) -> tuple[int, ...]:
    """A library's version as the device description carries it: cuDNN's is torch's integer
    (91900 is 9.19.0, 8902 is 8.9.2); every other library's is dotted."""
    if name == "cudnn" and raw.isdigit():
        number = int(raw)
        if number >= 90000:  # cuDNN 9: major * 10000 + minor * 100 + patch
            return (number // 10000, number % 10000 // 100, number % 100)
        return (number // 1000, number % 1000 // 100, number % 100)
    return parse_version(raw)


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    width = max(len(a), len(b))
    pa, pb = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return (pa > pb) - (pa < pb)


def applies(defect: KnownDefect, facts: StackFacts) -> str | None:
    """The library version ('cudnn 9.19.0') when `facts` fall in the entry's library range,
    backend, device family and torch range; None when any of them does not (or is unknown)."""
    raw = facts.library_version(defect.library)
    if raw is None or facts.backend != defect.backend:
        return None
    version = library_version(defect.library, raw)
    if not version or not defect.versions.contains(version):
        return None
    if not any(glob(facts.arch, pattern) for pattern in defect.archs):
        return None
    if defect.torch != VersionRange():
        torch = parse_version(facts.torch_version or "")
        if not torch or not defect.torch.contains(torch):
            return None
    return f"{defect.library} {'.'.join(str(p) for p in version)}"


def names_test(defect: KnownDefect, nodeid: str) -> bool:
    return any(glob(nodeid, pattern) for pattern in defect.tests)


def check_name(check: str) -> str:
    """A numerics check's name without its description: 'packed.njt-cudnn.grad_q [4 blocks ...]' -> 'packed.njt-cudnn.grad_q'."""
    return check.split(" ", 1)[0]


def covers(defect: KnownDefect, failed_checks: Iterable[str]) -> bool:
    """Whether the failure is this defect on every count: some check failed and every failed
    check is one the entry names."""
    names = [check_name(c) for c in failed_checks]
    return bool(names) and all(any(glob(n, p) for p in defect.checks) for n in names)


def match(
    defects: Sequence[KnownDefect], facts: StackFacts, nodeid: str, failed_checks: Sequence[str] | None
) -> Match | None:
    """The first live entry that explains this test's outcome: for a failure (`failed_checks`
    given), one whose checks cover every failed check; for a pass (None), one that names the
    test and applies here (it no longer reproduces)."""
    for defect in defects:
        if not names_test(defect, nodeid):
            continue
        version = applies(defect, facts)
        if version is None:
            continue
        if failed_checks is None or covers(defect, failed_checks):
            return Match(defect, version)
    return None


def known_defect_of(properties: Iterable[tuple[str, Any]]) -> Matched | None:
    """The entry a test's properties carry, if any."""
    return next((Matched.from_dict(json.loads(v)) for n, v in properties if n == KNOWN_DEFECT_PROPERTY), None)


# --- loading ------------------------------------------------------------------------------------


def _entry_name(raw: Any, index: int) -> str:
    name = raw.get("id") if isinstance(raw, Mapping) else None
    return f"entry {index + 1} ({name!r})" if isinstance(name, str) else f"entry {index + 1}"


def _range(raw: Mapping[str, Any] | None) -> VersionRange:
    raw = raw or {}
    return VersionRange(raw.get("min"), raw.get("below"))


def _unprintable(raw: Mapping[str, Any]) -> str | None:
    """The first key of an entry whose text (or a text of its list) is not one printable line."""
    for key, value in raw.items():
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(t, str) and not t.isprintable() for t in texts):
            return key
    return None


def parse_table(text: str, source: str, site: bool) -> tuple[KnownDefect, ...]:
    """The entries of one table. A site table (`site`) needs an owner and an expiry date
    (YYYY-MM-DD) on every entry. DefectTableError names the file, the entry and what is wrong."""
    from rocm_validate.results.jsonfile import schema_errors

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DefectTableError(f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    problems = schema_errors(data, TABLE_SCHEMA)
    if problems:
        raise DefectTableError(
            f'{source}: {"; ".join(problems[:3])}; expected {{"schema": "{TABLE_SCHEMA_ID}", "defects": [...]}}'
        )
    entries, seen = [], set()
    for index, raw in enumerate(data["defects"]):
        name = _entry_name(raw, index)
        problems = [p.removeprefix("<top>: ") for p in schema_errors(raw, ENTRY_SCHEMA)]
        if problems:
            raise DefectTableError(f"{source}: {name}: {'; '.join(problems[:3])}")
        if site and ("owner" not in raw or "expires" not in raw):
            raise DefectTableError(
                f"{source}: {name}: a site entry needs an 'owner' and an 'expires' date (YYYY-MM-DD)"
            )
        unprintable = _unprintable(raw)
        if unprintable:
            raise DefectTableError(
                f"{source}: {name}: {unprintable} holds a line break or control character; every text of an entry "
                "is one printable line (it reaches the verdict line, the summary and JUnit)"
            )
        expires = None
        if "expires" in raw:
            try:
                if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw["expires"]):
                    raise ValueError(raw["expires"])
                expires = date.fromisoformat(raw["expires"])
            except ValueError:
                raise DefectTableError(
                    f"{source}: {name}: expires={raw['expires']!r} is not a date; expected YYYY-MM-DD, e.g. 2027-03-31"
                ) from None
        for bounds in ("versions", "torch"):
            found = _range(raw.get(bounds))
            if found.min and found.below and _cmp(parse_version(found.min), parse_version(found.below)) >= 0:
                raise DefectTableError(f"{source}: {name}: {bounds} range is empty ({found.describe()})")
        if raw["id"] in seen:
            raise DefectTableError(f"{source}: {name}: the id appears twice")
        seen.add(raw["id"])
        entries.append(
            KnownDefect(
                id=raw["id"],
                summary=raw["summary"],
                upstream=tuple(raw["upstream"]),
                library=raw["library"],
                versions=_range(raw["versions"]),
                backend=raw["backend"],
                archs=tuple(raw["archs"]),
                torch=_range(raw.get("torch")),
                tests=tuple(raw["tests"]),
                checks=tuple(raw["checks"]),
                workaround=raw["workaround"],
                measured=raw["measured"],
                source=source if site else SHIPPED,
                owner=raw.get("owner"),
                expires=expires,
            )
        )
    return tuple(entries)


def unmatched_tests(defects: Iterable[KnownDefect], collected: Sequence[str]) -> list[str]:
    """Each site entry that names only tests absent from the files this run collected: 'entry
    <id>: names no collected test of suites/x.py (...)'. Files the run did not collect say nothing."""
    files = {nodeid.split("::", 1)[0] for nodeid in collected}
    problems = []
    for defect in defects:
        mine = [p for p in defect.tests if p.split("::", 1)[0] in files]
        if mine and not any(glob(n, p) for p in mine for n in collected):
            problems.append(f"entry {defect.id!r} of {defect.source}: no test matches {', '.join(mine)}")
    return problems
