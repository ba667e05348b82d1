"""The baseline store: schema-checked reads that name the file and the fix, update decisions
(refuse noisy, fold runs of one stack, replace for another), locked merging writes, and no lost
entries under concurrency."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import tempfile
from pathlib import Path

import pytest

from rocm_validate.errors import BaselineError
from rocm_validate.perf.baselines import BaselineEntry, BaselineStore, decide_update
from rocm_validate.perf.gate import Threshold

KEY = "amd-instinct-mi300x-gfx942"
RECORD = "pytest --rocm-suite=perf --update-baselines"  # the command a message names to record a baseline
THRESHOLD = Threshold(min_band=0.03, noise_multiple=3.0, cap=0.08)


def entry(
    value: float = 700.0,
    dispersion: float | None = 0.005,
    unit: str = "TFLOP/s",
    torch: str = "2.11.0",
    clock: float | None = None,
) -> BaselineEntry:
    provenance = {"date": "2026-11-21T00:00:00+00:00", "torch": torch}
    return BaselineEntry(
        value, unit, "higher", dispersion, 20, provenance, {"mean_mhz": clock, "capped_share": 0.9} if clock else None
    )


def write(store: BaselineStore, name: str, value: float) -> str:
    return store.update(name, entry(value), lambda old, new: decide_update(old, new, THRESHOLD)).verdict


def test_a_missing_file_means_no_baselines_yet(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path, KEY, RECORD)
    assert store.read() == {} and store.entry("gemm.bf16.8192x8192x8192") is None


def test_a_written_entry_reads_back_rounded_sorted_and_with_provenance(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path, KEY, RECORD)
    assert write(store, "gemm.bf16.8192x8192x8192", 731.23456) == "updated"
    write(store, "copy.device.2048mib", 2971.0)
    text = (tmp_path / f"{KEY}.json").read_text()
    data = json.loads(text)
    assert data["schema"] == "rocm-validate/baselines/1" and data["device_key"] == KEY
    assert list(data["metrics"]) == ["copy.device.2048mib", "gemm.bf16.8192x8192x8192"]
    stored = data["metrics"]["gemm.bf16.8192x8192x8192"]
    assert stored["value"] == 731.2 and stored["provenance"]["torch"] == "2.11.0"
    assert text.endswith("}\n") and '\n  "metrics": {\n' in text


@pytest.mark.parametrize(
    "content, problem",
    [
        ('{"schema": "rocm-validate/baselines/1", "device_key": "amd', "is not valid JSON"),
        ("", "is empty"),
        (
            '{"schema": "rocm-validate/baselines/1", "device_key": "' + KEY + '", "metrics": {"x": {"value": -1}}}',
            "does not match",
        ),
        ('{"rcp": [1, 2, 3]}', "does not match"),
        (
            '{"schema": "rocm-validate/baselines/1", "device_key": "' + KEY + '", "metrics": {"x": {"value": NaN}}}',
            "NaN",
        ),
    ],
)
def test_an_unusable_file_is_an_error_naming_the_file_the_problem_and_the_fix(
    tmp_path: Path, content: str, problem: str
) -> None:
    (tmp_path / f"{KEY}.json").write_text(content)
    with pytest.raises(BaselineError) as error:
        BaselineStore(tmp_path, KEY, RECORD).read()
    message = str(error.value)
    assert str(tmp_path / f"{KEY}.json") in message and problem in message
    assert "git checkout --" in message and "--update-baselines" in message


def test_a_file_renamed_from_another_device_is_an_error(tmp_path: Path) -> None:
    write(BaselineStore(tmp_path, "nvidia-h100-80gb-hbm3-sm90", RECORD), "gemm.bf16.8192x8192x8192", 700.0)
    (tmp_path / "nvidia-h100-80gb-hbm3-sm90.json").rename(tmp_path / f"{KEY}.json")
    with pytest.raises(BaselineError, match="holds baselines for device key 'nvidia-h100-80gb-hbm3-sm90'"):
        BaselineStore(tmp_path, KEY, RECORD).read()


def test_only_this_devices_file_is_read_and_subfolders_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "rcps").mkdir()
    (tmp_path / "rcps" / "bert.json").write_text("not json")
    (tmp_path / "other-device.json").write_text("{truncated")
    write(BaselineStore(tmp_path, KEY, RECORD), "copy.device.2048mib", 2971.0)
    assert list(BaselineStore(tmp_path, KEY, RECORD).read()) == ["copy.device.2048mib"]


def test_a_run_too_noisy_to_gate_within_the_cap_is_refused() -> None:
    decision = decide_update(None, entry(dispersion=0.05), THRESHOLD)
    assert (decision.action, decision.verdict) == ("refuse", "noisy")
    assert "3.71%" in decision.message and "exceeds 2.67%" in decision.message
    assert decide_update(None, entry(dispersion=0.03), THRESHOLD).action == "write"


def test_an_informational_metric_is_recorded_however_noisy() -> None:
    assert decide_update(None, entry(dispersion=0.5), Threshold(informational="compile time")).action == "write"


def test_a_run_of_the_same_stack_is_folded_in_and_the_value_becomes_the_runs_median() -> None:
    first = decide_update(None, entry(700.0), THRESHOLD)
    assert (first.verdict, [r["value"] for r in first.entry.runs]) == ("updated", [700.0])
    second = decide_update(first.entry.to_dict(), entry(690.0), THRESHOLD)
    third = decide_update(second.entry.to_dict(), entry(706.0), THRESHOLD)
    assert third.verdict == "folded" and [r["value"] for r in third.entry.runs] == [700.0, 690.0, 706.0]
    assert third.entry.value == 700.0
    assert "3 runs of this stack, median 700" in third.message and "between-run spread 1.16%" in third.message


def test_folding_keeps_the_last_ten_runs_and_their_median_clock() -> None:
    stored = decide_update(None, entry(700.0, clock=1500.0), THRESHOLD).entry.to_dict()
    for index in range(12):
        stored = decide_update(stored, entry(700.0 + index, clock=1600.0 + index), THRESHOLD).entry.to_dict()
    assert [r["value"] for r in stored["runs"]] == [702.0 + i for i in range(10)]
    assert stored["value"] == 706.5 and stored["clock"]["mean_mhz"] == 1606.0


def test_an_entry_from_before_folding_counts_as_one_run() -> None:
    legacy = entry(700.0).to_dict()
    legacy.pop("runs", None)
    folded = decide_update(legacy, entry(710.0), THRESHOLD).entry
    assert [r["value"] for r in folded.runs] == [700.0, 710.0] and folded.value == 705.0


def test_a_run_of_another_stack_replaces_the_entry_and_names_the_change() -> None:
    old = decide_update(None, entry(700.0), THRESHOLD).entry.to_dict()
    decision = decide_update(old, entry(650.0, torch="2.12.0"), THRESHOLD)
    assert decision.verdict == "updated" and [r["value"] for r in decision.entry.runs] == [650.0]
    assert "new stack (torch 2.11.0 -> 2.12.0): 700 -> 650" in decision.message


def test_a_baseline_in_another_unit_is_replaced() -> None:
    decision = decide_update(entry(700.0, unit="GB/s").to_dict(), entry(700.0), THRESHOLD)
    assert decision.action == "write" and "it was in GB/s" in decision.message


def test_rerecording_the_same_stack_adds_one_run_to_the_file(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path, KEY, RECORD)
    write(store, "gemm.bf16.8192x8192x8192", 700.0)
    assert write(store, "gemm.bf16.8192x8192x8192", 701.0) == "folded"
    stored = store.read()["gemm.bf16.8192x8192x8192"]
    assert [r["value"] for r in stored["runs"]] == [700.0, 701.0] and stored["value"] == 700.5


def test_a_stored_run_list_longer_than_ten_is_a_schema_error(tmp_path: Path) -> None:
    data = {
        "schema": "rocm-validate/baselines/1",
        "device_key": KEY,
        "metrics": {"x.y": {**entry(1.0).to_dict(), "runs": [{"value": 1.0}] * 11}},
    }
    (tmp_path / f"{KEY}.json").write_text(json.dumps(data))
    with pytest.raises(BaselineError, match="runs"):
        BaselineStore(tmp_path, KEY, RECORD).read()


def test_an_update_merges_with_entries_written_since_this_process_first_read(tmp_path: Path) -> None:
    mine, theirs = BaselineStore(tmp_path, KEY, RECORD), BaselineStore(tmp_path, KEY, RECORD)
    assert mine.entry("a.metric") is None  # snapshot taken while the file is empty
    write(theirs, "b.metric", 2.0)
    write(mine, "a.metric", 1.0)
    assert sorted(BaselineStore(tmp_path, KEY, RECORD).read()) == ["a.metric", "b.metric"]


def _write_many(folder: str, worker: int, start: object) -> None:
    store = BaselineStore(Path(folder), KEY, RECORD)
    assert store.entry("metric.none") is None  # every writer holds a stale snapshot, as xdist workers do
    start.wait(60)  # type: ignore[attr-defined]
    for index in range(10):
        write(store, f"metric.w{worker}.n{index}", 100.0 + index)


def test_concurrent_writers_lose_no_entry(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    workers = [context.Process(target=_write_many, args=(str(tmp_path), w, start)) for w in range(4)]
    for process in workers:
        process.start()
    start.set()
    for process in workers:
        process.join(60)
    assert [p.exitcode for p in workers] == [0, 0, 0, 0]
    assert len(BaselineStore(tmp_path, KEY, RECORD).read()) == 40


def test_baselines_stored_under_a_devices_older_key_are_read_and_said(tmp_path: Path) -> None:
    old_key = "amd-instinct-mi350-oam-gfx950"
    write(BaselineStore(tmp_path, old_key, RECORD), "copy.device.2048mib", 5900.0)
    store = BaselineStore(tmp_path, "amd-instinct-mi350x-gfx950", RECORD, aliases=(old_key,))
    assert list(store.read()) == ["copy.device.2048mib"]
    assert store.note == (
        f"read from {tmp_path / (old_key + '.json')}, stored under this device's older key {old_key!r}; "
        "the next --update-baselines writes amd-instinct-mi350x-gfx950.json"
    )


def test_the_next_write_moves_an_older_keys_baselines_to_the_devices_own_file(tmp_path: Path) -> None:
    old_key = "amd-instinct-mi350-oam-gfx950"
    write(BaselineStore(tmp_path, old_key, RECORD), "copy.device.2048mib", 5900.0)
    store = BaselineStore(tmp_path, "amd-instinct-mi350x-gfx950", RECORD, aliases=(old_key,))
    write(store, "gemm.bf16.8192x8192x8192", 1500.0)
    own = json.loads((tmp_path / "amd-instinct-mi350x-gfx950.json").read_text())
    assert own["device_key"] == "amd-instinct-mi350x-gfx950"
    assert sorted(own["metrics"]) == ["copy.device.2048mib", "gemm.bf16.8192x8192x8192"] and store.note is None


def test_a_devices_own_file_wins_over_an_older_keys(tmp_path: Path) -> None:
    write(BaselineStore(tmp_path, "old-key", RECORD), "copy.device.2048mib", 1.0)
    write(BaselineStore(tmp_path, KEY, RECORD), "gemm.bf16.8192x8192x8192", 700.0)
    assert list(BaselineStore(tmp_path, KEY, RECORD, aliases=("old-key",)).read()) == ["gemm.bf16.8192x8192x8192"]


@pytest.mark.parametrize(
    ("call", "code"),
    [("replace", errno.ENOSPC), ("replace", errno.EACCES), ("mkstemp", errno.EROFS)],
    ids=["full-disk", "file-not-replaceable", "folder-read-only"],
)
def test_a_baselines_file_that_cannot_be_written_is_an_error_naming_it_and_stays_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, code: int
) -> None:
    store = BaselineStore(tmp_path, KEY, RECORD)
    write(store, "copy.device.2048mib", 2971.0)
    before = store.path.read_text()

    def failing(*args: object, **kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os if call == "replace" else tempfile, call, failing)
    with pytest.raises(BaselineError) as raised:
        write(store, "gemm.bf16.8192x8192x8192", 731.0)
    assert str(raised.value).startswith(f"cannot write {store.path}: {os.strerror(code)}; the file is unchanged")
    assert RECORD in str(raised.value)
    assert store.path.read_text() == before and sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".tmp") == []
