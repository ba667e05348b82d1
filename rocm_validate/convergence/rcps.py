"""Reference convergence points of the built-in mini-BERT: one file per device, in
mlperf-logging's RCP JSON format, so its RCP checker reads them as it reads its own tables.

`<baselines>/rcps/<device-key>.json` holds one record, `bert_ref_<batch size>`, with the
fields the checker reads (Benchmark, BS, Hyperparams, "Epochs to converge", which for BERT
counts samples) and the provenance MLPerf's tables carry (Creator, When, Platform).
`Hyperparams.mini_bert` is the benchmark definition's fingerprint: RCPs recorded for another
definition (other corpus, model, schedule or target) are stale and are not compared against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocm_validate.convergence.minibert import BENCHMARK, MiniBertSpec
from rocm_validate.convergence.mlperf import RCP_FILE_SCHEMA
from rocm_validate.errors import RcpUnavailable
from rocm_validate.results import jsonfile

FOLDER = "rcps"

RCP_STORE_SCHEMA: dict[str, Any] = {
    "title": "rocm-validate mini-BERT RCP",
    "type": "object",
    "minProperties": 1,
    "maxProperties": 1,
    "additionalProperties": {
        "allOf": [RCP_FILE_SCHEMA["additionalProperties"]],
        "type": "object",
        "required": ["Benchmark", "BS", "Hyperparams", "Epochs to converge", "Creator", "When", "Platform"],
        "properties": {
            "Benchmark": {"const": BENCHMARK},
            "Hyperparams": {
                "type": "object",
                "required": ["mini_bert"],
                "properties": {"mini_bert": {"type": "string"}},
            },
            "Epochs to converge": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 3},
            "Creator": {"type": "string"},
            "When": {"type": "string"},
            "Platform": {"type": "string"},
        },
    },
}


SHIPPED = Path(__file__).with_name("reference_rcps")


def shipped_rcp_path(spec: MiniBertSpec) -> Path:
    """The RCPs shipped with the package for a preset: they belong to the benchmark definition,
    not to a device, so the convergence suite checks on any device from its first run."""
    return SHIPPED / f"mini-bert-{spec.name}.json"


def rcp_path(baselines_dir: Path, device_key: str) -> Path:
    """Where a device's mini-BERT RCPs live (the perf store owns <baselines>/<device-key>.json)."""
    return baselines_dir / FOLDER / f"{device_key}.json"


def build_rcp(spec: MiniBertSpec, samples: Sequence[int], creator: str, when: str, system: str) -> dict[str, Any]:
    """The RCP file content for reference runs that converged after `samples` samples each."""
    return {
        f"{BENCHMARK}_ref_{spec.batch_size}": {
            "Benchmark": BENCHMARK,
            "Creator": creator,
            "When": when,
            "Platform": system,
            "BS": spec.batch_size,
            "Hyperparams": spec.hyperparameters(),
            "Epochs to converge": [int(s) for s in samples],
        }
    }


def write_rcp(path: Path, data: dict[str, Any]) -> None:
    """Validate and replace atomically: a crash never leaves half an RCP file."""
    jsonfile.write_json(path, data, RCP_STORE_SCHEMA)


@dataclass(frozen=True)
class StoredRcp:
    """An RCP file that matches the benchmark definition being run."""

    path: Path
    batch_size: int
    samples: tuple[int, ...]
    system: str  # the RCP file's Platform: where the reference ran
    when: str


def check_rcp_file(path: Path, record_command: str) -> None:
    """Raise JsonFileError (naming the file and `record_command`) when an RCP file exists but is
    corrupt or breaks its schema; a missing file is fine (the tests say how to record it)."""
    if path.exists():
        jsonfile.read_json(path, RCP_STORE_SCHEMA, fix=f"Record them again with: {record_command}")


def load_rcp(path: Path, spec: MiniBertSpec, record_command: str) -> StoredRcp:
    """The device's RCPs for `spec`.

    Raises RcpUnavailable (missing or stale: record them with `record_command`) or
    JsonFileError (corrupt: the message names the file and the same command).
    """
    if not path.exists():
        raise RcpUnavailable(f"no mini-BERT RCPs for this device at {path}; record them with: {record_command}")
    data = jsonfile.read_json(path, RCP_STORE_SCHEMA, fix=f"Record them again with: {record_command}")
    record = next(iter(data.values()))
    recorded = record["Hyperparams"]["mini_bert"]
    if recorded != spec.fingerprint() or record["BS"] != spec.batch_size:
        raise RcpUnavailable(
            f"{path} holds RCPs for mini-BERT definition {recorded} (batch {record['BS']}), this run is "
            f"{spec.fingerprint()} (batch {spec.batch_size}); record them again with: {record_command}"
        )
    return StoredRcp(path, record["BS"], tuple(record["Epochs to converge"]), record["Platform"], record["When"])
