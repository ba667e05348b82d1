"""The baseline store: one JSON file per device key, `<baselines_dir>/<device_key>.json`.

Only that file is ever read for a device; other files and subfolders (the convergence suite's
`rcps/`) are left alone. Files are sorted and indented so reviews show one line per change,
checked against a schema on every read, and rewritten only under a file lock, after re-reading,
through `jsonfile.write_json` (temporary file + rename): concurrent `pytest -n 4
--update-baselines` workers each merge their own entries and none is lost.

Whether a new measurement replaces an entry is `decide_update`, a pure function: a run too
noisy to gate within the cap is refused, and a value inside the hysteresis band (a third of the
gate's band) keeps the old entry, so re-recording an unchanged stack leaves the file untouched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from rocm_validate.errors import BaselineError, JsonFileError
from rocm_validate.perf.gate import UPDATE_COMMAND, Threshold
from rocm_validate.perf.stats import combined_noise, relative_noise
from rocm_validate.results import jsonfile

SCHEMA_ID = "rocm-validate/baselines/1"
NAME_PATTERN = "^[a-z0-9][a-z0-9_.+-]*$"
HYSTERESIS_FRACTION = 1 / 3  # of the gate's band, as PyTorch's pr_time_benchmarks does
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


@dataclass(frozen=True)
class BaselineEntry:
    """One metric's stored baseline: the central estimate, its spread, and where it came from."""

    value: float
    unit: str
    better: str
    dispersion: float | None
    samples: int | None
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": _significant(self.value, 4),
            "unit": self.unit,
            "better": self.better,
            "dispersion": _significant(self.dispersion, 3),
            "samples": self.samples,
            "provenance": dict(self.provenance),
        }


@dataclass(frozen=True)
class UpdateDecision:
    """What --update-baselines did with one measurement, and why."""

    action: str  # "write", "keep" or "refuse"
    verdict: str  # "updated", "kept" or "noisy"
    message: str


def decide_update(old: Mapping[str, Any] | None, new: BaselineEntry, threshold: Threshold) -> UpdateDecision:
    """Write, keep or refuse `new` given the stored entry `old` (pure)."""
    own = relative_noise(new.dispersion)
    if not threshold.informational and own > threshold.noise_limit():
        return UpdateDecision(
            "refuse",
            "noisy",
            f"not recorded: this run's round-to-round noise {own:.2%} exceeds {threshold.noise_limit():.2%} "
            f"(cap {threshold.cap:.1%} / k {threshold.k:g}), so a baseline from it could not gate within the cap; "
            "rerun on an idle device",
        )
    if old is None:
        return UpdateDecision("write", "updated", "new baseline recorded")
    if (old["unit"], old["better"]) != (new.unit, new.better):
        return UpdateDecision(
            "write", "updated", f"baseline replaced: it was in {old['unit']} ({old['better']} is better)"
        )
    noise = combined_noise(relative_noise(old.get("dispersion")), own)
    band = threshold.allowed(noise) * HYSTERESIS_FRACTION
    change = new.value / float(old["value"]) - 1
    if abs(change) <= band:
        return UpdateDecision(
            "keep", "kept", f"baseline kept: {change:+.1%} is inside the hysteresis band of +/-{band:.1%}"
        )
    return UpdateDecision("write", "updated", f"baseline updated: {old['value']:.4g} -> {new.value:.4g} ({change:+.1%})")


class BaselineStore:
    """The baselines of one device key in one folder."""

    def __init__(
        self, folder: Path, device_key: str, lock_timeout_s: float = LOCK_TIMEOUT_S, update_command: str = UPDATE_COMMAND
    ) -> None:
        self.folder = folder
        self.device_key = device_key
        self.lock_timeout_s = lock_timeout_s
        self.update_command = update_command
        self._snapshot: dict[str, Any] | None = None

    @property
    def path(self) -> Path:
        return self.folder / f"{self.device_key}.json"

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
        if not self.path.exists():
            return {}
        try:
            data = jsonfile.read_json(self.path, BASELINES_SCHEMA, fix=self._fix())
        except JsonFileError as exc:
            raise BaselineError(str(exc)) from None
        if data["device_key"] != self.device_key:
            raise BaselineError(
                f"{self.path} holds baselines for device key {data['device_key']!r}, but its name says "
                f"{self.device_key!r}; it was copied or renamed. {self._fix()}"
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
        """Under the lock: re-read, let `decide` judge against the current entry, write if told to."""
        from filelock import FileLock, Timeout

        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            with FileLock(str(self.lock_path), timeout=self.lock_timeout_s):
                current = self.read()
                decision = decide(current.get(name), new)
                if decision.action == "write":
                    current[name] = new.to_dict()
                    data = {"schema": SCHEMA_ID, "device_key": self.device_key, "metrics": current}
                    jsonfile.write_json(self.path, data, BASELINES_SCHEMA)
        except Timeout:
            raise BaselineError(
                f"could not lock {self.lock_path} within {self.lock_timeout_s:.0f} s; another --update-baselines "
                "run holds it. Wait for it to finish (the lock is released when it exits)"
            ) from None
        return decision
