"""The baseline store: one JSON file per device key, `<baselines_dir>/<device_key>.json`.

Only that file is ever read for a device, or, while it does not exist yet, the file of one of the
device's older keys (`DeviceInfo.key_aliases`: the key an earlier release or another tool gave the
same product), said in `note`; the next write creates the device's own file. Other files and
subfolders (the convergence suite's `rcps/`) are left alone. Files are sorted and indented so reviews show one line per change,
checked against a schema on every read, and rewritten only under a file lock, after re-reading,
through `jsonfile.write_json` (temporary file + rename): concurrent `pytest -n 4
--update-baselines` workers each merge their own entries and none is lost.

Whether and how a new measurement enters the file is `decide_update`, a pure function: a run
too noisy to gate within the cap is refused; a run of the stack the entry was recorded on
(same device, torch, runtime, driver and libraries) is folded in, so repeated recordings build
the entry's between-run spread (the last MAX_RUNS runs; the value is their median); a run of
another stack replaces the entry.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rocm_validate.errors import BaselineError, JsonFileError
from rocm_validate.perf.gate import Threshold
from rocm_validate.perf.stats import relative_noise
from rocm_validate.results import jsonfile
from rocm_validate.results.metrics import Verdict

SCHEMA_ID = "rocm-validate/baselines/1"
NAME_PATTERN = "^[a-z0-9][a-z0-9_.+-]*$"
MAX_RUNS = 10  # recording runs folded into one entry; older ones drop out
STACK_KEYS = ("device_name", "torch", "runtime", "driver", "libraries")  # provenance naming the stack
LOCK_TIMEOUT_S = 120.0

ENTRY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["value", "unit", "better", "dispersion", "samples", "provenance"],
    "additionalProperties": False,
    "properties": {
        "value": {"type": "number", "exclusiveMinimum": 0},
        "unit": {"type": "string", "minLength": 1},
        "better": {"enum": ["higher", "lower"]},
        "dispersion": {"type": ["number", "null"], "minimum": 0},
        "samples": {"type": ["integer", "null"], "minimum": 1},
        "provenance": {
            "type": "object",
            "required": ["date"],
            "properties": {
                "date": {"type": "string"},
                "torch": {"type": ["string", "null"]},
                "runtime": {"type": ["string", "null"]},
                "driver": {"type": ["string", "null"]},
                "libraries": {"type": "object", "additionalProperties": {"type": "string"}},
                "git_commit": {"type": ["string", "null"]},
                "telemetry": {"type": ["object", "null"]},
            },
        },
        "clock": {
            "type": ["object", "null"],
            "required": ["mean_mhz"],
            "properties": {
                "mean_mhz": {"type": "number", "exclusiveMinimum": 0},
                "capped_share": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                "per_clock_dispersion": {"type": ["number", "null"], "minimum": 0},
            },
        },
        "runs": {
            "type": "array",
            "maxItems": MAX_RUNS,
            "items": {
                "type": "object",
                "required": ["value"],
                "additionalProperties": False,
                "properties": {
                    "value": {"type": "number", "exclusiveMinimum": 0},
                    "clock_mhz": {"type": ["number", "null"], "exclusiveMinimum": 0},
                    "date": {"type": "string"},
                },
            },
        },
    },
}

BASELINES_SCHEMA: dict[str, Any] = {
    "title": "rocm-validate baselines",
    "type": "object",
    "required": ["schema", "device_key", "metrics"],
    "additionalProperties": False,
    "properties": {
        "schema": {"const": SCHEMA_ID},
        "device_key": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$"},
        "metrics": {"type": "object", "propertyNames": {"pattern": NAME_PATTERN}, "additionalProperties": ENTRY_SCHEMA},
    },
}


def _significant(value: float | None, digits: int) -> float | None:
    """Round to `digits` significant digits: stable files, no false precision."""
    if value is None or value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


STORED_CLOCK_KEYS = ("mean_mhz", "capped_share", "per_clock_dispersion")


def stored_clock(window_clock: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What an entry keeps of a metric's window clock (`extra.clock`), or None without one."""
    if not window_clock or not window_clock.get("mean_mhz"):
        return None
    return {key: window_clock.get(key) for key in STORED_CLOCK_KEYS}


def _run(value: float, provenance: Mapping[str, Any], clock: Mapping[str, Any] | None) -> dict[str, Any]:
    """One folded run: its value, date and window clock."""
    run: dict[str, Any] = {"value": float(value), "date": str(provenance.get("date", ""))}
    if clock and clock.get("mean_mhz"):
        run["clock_mhz"] = float(clock["mean_mhz"])
    return run


@dataclass(frozen=True)
class BaselineEntry:
    """One metric's stored baseline: the central estimate, its spread, and where it came from."""

    value: float
    unit: str
    better: str
    dispersion: float | None
    samples: int | None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    clock: Mapping[str, Any] | None = None  # mean clock over the window(s), capped share, per-clock noise
    runs: tuple[Mapping[str, Any], ...] = ()  # folded recording runs: value, clock_mhz, date

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "value": _significant(self.value, 4),
            "unit": self.unit,
            "better": self.better,
            "dispersion": _significant(self.dispersion, 3),
            "samples": self.samples,
            "provenance": dict(self.provenance),
        }
        if self.clock:
            data["clock"] = {k: _significant(v, 4) if isinstance(v, float) else v for k, v in self.clock.items()}
        if self.runs:
            data["runs"] = [
                {k: _significant(v, 4) if isinstance(v, float) else v for k, v in run.items()} for run in self.runs
            ]
        return data

    def run(self) -> dict[str, Any]:
        """This recording as one folded run."""
        return _run(self.value, self.provenance, self.clock)


@dataclass(frozen=True)
class UpdateDecision:
    """What --update-baselines did with one measurement, and why."""

    action: str  # "write" or "refuse"
    verdict: Verdict  # updated, folded or noisy
    message: str
    entry: BaselineEntry | None = None  # what to write


def same_stack(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether two provenances name the same device and software stack."""
    return all(old.get(key) == new.get(key) for key in STACK_KEYS)


def _stack_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    changes = [
        f"{key} {old.get(key)} -> {new.get(key)}"
        for key in STACK_KEYS
        if key != "libraries" and old.get(key) != new.get(key)
    ]
    if old.get("libraries") != new.get("libraries"):
        changes.append("library versions")
    return ", ".join(changes) or "stack"


def _runs_of(old: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The folded runs of a stored entry; an entry from before folding is one run."""
    if old.get("runs"):
        return [dict(run) for run in old["runs"]]
    return [_run(old["value"], old.get("provenance") or {}, old.get("clock"))]


def fold(old: Mapping[str, Any], new: BaselineEntry) -> BaselineEntry:
    """`new` folded into `old` (same stack): the last MAX_RUNS runs, their median value and clock."""
    runs = (_runs_of(old) + [new.run()])[-MAX_RUNS:]
    clocks = [run["clock_mhz"] for run in runs if run.get("clock_mhz")]
    clock = dict(new.clock or {})
    if clock and clocks:
        clock["mean_mhz"] = statistics.median(clocks)
    return replace(new, value=statistics.median(run["value"] for run in runs), runs=tuple(runs), clock=clock or None)


def decide_update(
    old: Mapping[str, Any] | None, new: BaselineEntry, threshold: Threshold, own_noise: float | None = None
) -> UpdateDecision:
    """Refuse, fold or write `new` given the stored entry `old` (pure). `own_noise` is the
    relative noise of the figure the gate compares (per clock cycle, when it does)."""
    own = relative_noise(new.dispersion) if own_noise is None else own_noise
    if not threshold.informational and own > threshold.noise_limit():
        return UpdateDecision(
            "refuse",
            Verdict.NOISY,
            f"not recorded: this run's round-to-round noise {own:.2%} exceeds {threshold.noise_limit():.2%} "
            f"(cap {threshold.cap:.1%} / noise_multiple {threshold.noise_multiple:g}), so a baseline from it could not gate within the cap; "
            "rerun on an idle device",
        )
    first = replace(new, runs=(new.run(),))
    if old is None:
        return UpdateDecision("write", Verdict.UPDATED, "new baseline recorded", first)
    if (old["unit"], old["better"]) != (new.unit, new.better):
        return UpdateDecision(
            "write", Verdict.UPDATED, f"baseline replaced: it was in {old['unit']} ({old['better']} is better)", first
        )
    if not same_stack(old.get("provenance") or {}, new.provenance):
        change = _stack_change(old.get("provenance") or {}, new.provenance)
        return UpdateDecision(
            "write",
            Verdict.UPDATED,
            f"baseline replaced for a new stack ({change}): {old['value']:.4g} -> {new.value:.4g}",
            first,
        )
    folded = fold(old, new)
    values = [run["value"] for run in folded.runs]
    spread = statistics.stdev(values) / statistics.fmean(values) if len(values) >= 2 else 0.0
    return UpdateDecision(
        "write",
        Verdict.FOLDED,
        f"folded into the baseline: {len(values)} runs of this stack, median {folded.value:.4g} "
        f"(was {float(old['value']):.4g}), between-run spread {spread:.2%}",
        folded,
    )


def _write_problem(exc: BaseException) -> str:
    """'No space left on device', or 'Permission denied (<the lock file>)' when another file failed."""
    cause = exc if isinstance(exc, OSError) else exc.__cause__
    if not isinstance(cause, OSError):
        return str(exc)
    where = f" ({cause.filename})" if cause.filename else ""
    return f"{cause.strerror or cause}{where}"


class BaselineStore:
    """The baselines of one device key in one folder."""

    def __init__(
        self,
        folder: Path,
        device_key: str,
        update_command: str,
        lock_timeout_s: float = LOCK_TIMEOUT_S,
        aliases: Sequence[str] = (),
    ) -> None:
        self.folder = folder
        self.device_key = device_key
        self.lock_timeout_s = lock_timeout_s
        self.update_command = update_command
        self.aliases = tuple(aliases)
        self._snapshot: dict[str, Any] | None = None

    @property
    def path(self) -> Path:
        return self.folder / f"{self.device_key}.json"

    def _source(self) -> tuple[Path, str]:
        """The file read, and the key it must hold: the device's own, else an older key's that exists."""
        if not self.path.exists():
            for alias in self.aliases:
                if (self.folder / f"{alias}.json").exists():
                    return self.folder / f"{alias}.json", alias
        return self.path, self.device_key

    @property
    def note(self) -> str | None:
        """Where the baselines come from when that is the file of an older key, for the header."""
        source, key = self._source()
        if key == self.device_key:
            return None
        return (
            f"read from {source}, stored under this device's older key {key!r}; the next --update-baselines "
            f"writes {self.path.name}"
        )

    @property
    def lock_path(self) -> Path:
        return self.folder / f".{self.device_key}.json.lock"

    def _fix(self) -> str:
        return (
            f"Restore it from version control (git checkout -- {self.path}), or delete it and re-record "
            f"with {self.update_command}"
        )

    def read(self) -> dict[str, Any]:
        """The stored entries by metric name, read now (no file yet: none)."""
        source, key = self._source()
        if not source.exists():
            return {}
        try:
            data = jsonfile.read_json(source, BASELINES_SCHEMA, fix=self._fix())
        except JsonFileError as exc:
            raise BaselineError(str(exc)) from None
        if data["device_key"] != key:
            raise BaselineError(
                f"{source} holds baselines for device key {data['device_key']!r}, but its name says "
                f"{key!r}; it was copied or renamed. {self._fix()}"
            )
        return dict(data["metrics"])

    def entry(self, name: str) -> Mapping[str, Any] | None:
        """A metric's entry as the file stood when first read by this process."""
        if self._snapshot is None:
            self._snapshot = self.read()
        return self._snapshot.get(name)

    def update(
        self, name: str, new: BaselineEntry, decide: Callable[[Mapping[str, Any] | None, BaselineEntry], UpdateDecision]
    ) -> UpdateDecision:
        """Under the lock: re-read, let `decide` judge against the current entry, write if told to.
        A folder or file that cannot be written (a full disk, a read-only mount, a file that cannot
        be replaced) raises BaselineError naming the file and the cause; the file is left as it was."""
        from filelock import FileLock, Timeout

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with FileLock(str(self.lock_path), timeout=self.lock_timeout_s):
                current = self.read()
                decision = decide(current.get(name), new)
                if decision.action == "write":
                    current[name] = (decision.entry or new).to_dict()
                    data = {"schema": SCHEMA_ID, "device_key": self.device_key, "metrics": current}
                    jsonfile.write_json(self.path, data, BASELINES_SCHEMA)
        except Timeout:
            raise BaselineError(
                f"could not lock {self.lock_path} within {self.lock_timeout_s:.0f} s; another --update-baselines "
                "run holds it. Wait for it to finish (the lock is released when it exits)"
            ) from None
        except (OSError, JsonFileError) as exc:
            raise BaselineError(
                f"cannot write {self.path}: {_write_problem(exc)}; the file is unchanged. Free space or make "
                f"{self.folder} writable, then record again with {self.update_command}"
            ) from exc
        return decision
