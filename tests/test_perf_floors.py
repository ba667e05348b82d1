"""The shipped floors per SKU (each with its source), and user floors that fail a node below them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import fake_devices
import pytest

from rocm_validate.collectives.busbw import COLLECTIVES
from rocm_validate.collectives.formats import TRAINING_COLLECTIVES
from rocm_validate.errors import BaselineError
from rocm_validate.perf import floors, gate
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.results.metrics import Metric
from rocm_validate.results.sizes import size_label

RECORD = "pytest --rocm-suite=perf --update-baselines"  # the command a message names to record a baseline


def gpu(name: str, arch: str, backend: str = "rocm", **changes) -> DeviceInfo:
    return DeviceInfo(backend=backend, index=0, name=name, arch=arch, **{"device_key": "k", **changes})


def test_an_mi300x_gets_rvs_and_acceptance_figures_with_their_sources():
    mi300x = gpu("AMD Instinct MI300X", "gfx942")
    bf16 = floors.shipped_floor(mi300x, "gemm.bf16.8192x8192x8192")
    fp8 = floors.shipped_floor(mi300x, "gemm.fp8.8192x8192x8192")
    copy = floors.shipped_floor(mi300x, "copy.device.2048mib")
    assert (bf16.value, fp8.value, copy.value) == (552.0, 1215.0, 4177.3)
    assert "ROCm Validation Suite" in bf16.source and "gst_single" in fp8.source and "BabelStream" in copy.source


def test_an_mi325x_has_the_mi300x_compute_figures_and_its_own_memory_share():
    mi325x = gpu("AMD Instinct MI325X", "gfx942")
    assert floors.shipped_floor(mi325x, "gemm.bf16.8192x8192x8192").value == 552.0
    copy = floors.shipped_floor(mi325x, "copy.device.2048mib")
    assert copy.value == pytest.approx(4177.285 / 5300 * 6000, abs=0.1) and "78.8% of the datasheet peak" in copy.source


def test_an_mi355x_gets_the_mi300x_figures_share_of_its_own_peak():
    mi355x = gpu("AMD Instinct MI355X", "gfx950")
    assert floors.shipped_floor(mi355x, "gemm.bf16.8192x8192x8192").value == pytest.approx(
        552 / 1307.4 * 2516.6, abs=0.1
    )
    assert floors.shipped_floor(mi355x, "gemm.fp8.8192x8192x8192").value == pytest.approx(
        1215 / 2614.9 * 5033.2, abs=0.1
    )


def test_a_cpx_partition_gets_an_eighth_of_the_compute_floor_and_no_memory_floor():
    cpx = dataclasses.replace(fake_devices.mi300x("amd-smi-static-mi300x-cpx-nps4-64dev.json"))
    assert cpx.compute_partition and cpx.compute_partition.upper() == "CPX"
    assert floors.shipped_floor(cpx, "gemm.bf16.8192x8192x8192").value == 69.0
    assert floors.shipped_floor(cpx, "copy.device.2048mib") is None


def test_an_mi250x_without_fp8_has_no_fp8_floor():
    assert floors.shipped_floor(gpu("AMD Instinct MI250X", "gfx90a"), "gemm.fp8.8192x8192x8192") is None


def test_an_h100_and_an_h200_get_three_quarters_of_what_was_measured_here():
    h100 = floors.shipped_floor(fake_devices.h100(), "gemm.bf16.8192x8192x8192")
    assert h100.value == round(0.75 * 688.1, 1) and "measured on the lent H100" in h100.source and "DCGM" in h100.source
    h200 = floors.shipped_floor(gpu("NVIDIA H200", "sm_90", "cuda"), "sdpa.forward.llama-8b.8x32x4096x128")
    assert h200.value == round(0.75 * 521.1, 1) and "lent H200" in h200.source


def test_another_nvidia_part_gets_the_h100s_measured_share_of_its_own_peak():
    pcie = floors.shipped_floor(gpu("NVIDIA H100 PCIe", "sm_90", "cuda"), "gemm.bf16.8192x8192x8192")
    assert pcie.value == pytest.approx(0.75 * 688.1 / 989.5 * 756.5, abs=0.1) and "H100 SXM reached here" in pcie.source


@pytest.mark.parametrize(
    "metric", ["launch.empty_kernel.host_us", "copy.h2d.pinned.512mib", "gemm.bf16.4096x4096x4096"]
)
def test_host_side_latency_and_unlisted_metrics_have_no_shipped_floor(metric):
    assert floors.shipped_floor(fake_devices.h100(), metric) is None


def test_an_unlisted_device_has_no_shipped_floors():
    assert floors.shipped_floor(gpu("AMD Radeon PRO W7900", "gfx1100"), "gemm.bf16.8192x8192x8192") is None
    assert floors.shipped_floor(fake_devices.cpu(), "gemm.bf16.8192x8192x8192") is None


def test_an_mi250_gcd_gets_its_own_floors_not_the_mi250xs():
    mi250 = floors.shipped_floor(
        gpu("AMD Instinct MI250X/MI250", "gfx90a", compute_units=104), "gemm.bf16.8192x8192x8192"
    )
    mi250x = floors.shipped_floor(gpu("AMD Instinct MI250X", "gfx90a", compute_units=110), "gemm.bf16.8192x8192x8192")
    assert mi250 is not None and mi250x is not None and mi250.value < mi250x.value


def test_user_floors_stored_under_a_devices_older_key_are_read(tmp_path):
    old = "amd-instinct-mi350-oam-gfx950"
    entry = {
        "value": 900.0,
        "unit": "TFLOP/s",
        "better": "higher",
        "dispersion": None,
        "samples": 1,
        "provenance": {"date": "2026-01-01"},
    }
    data = {"schema": "rocm-validate/baselines/1", "device_key": old, "metrics": {"gemm.bf16.8192x8192x8192": entry}}
    (tmp_path / f"{old}.json").write_text(json.dumps(data))
    mi350x = gpu("AMD Instinct MI350X", "gfx950", device_key="amd-instinct-mi350x-gfx950", key_aliases=(old,))
    table = floors.FloorTable(mi350x, tmp_path)
    assert table.floor("gemm.bf16.8192x8192x8192").value == 900.0 and table.user_file == tmp_path / f"{old}.json"


CONFTEST = """
import pytest
from rocm_validate.perf.recorder import Measurement
from rocm_validate.perf.stats import SampleSummary
from rocm_validate.perf.timing import Timing

@pytest.fixture
def timed():
    def make(seconds):
        return Measurement(Timing(SampleSummary(tuple(seconds for _ in range(12)), 1), "synthetic", 0.0, True), {})
    return make
"""

MEASURED = {  # name -> (seconds per call, work per call, unit): what the fake device does
    "gemm.bf16.8192x8192x8192": (0.0015, 2 * 8192**3, "TFLOP/s"),
    "copy.device.2048mib": (0.001, 2 * 2**31, "GB/s"),
    "sdpa.forward.bert-large.48x16x512x64": (0.0002, 5.2e10, "TFLOP/s"),
}
DIVISOR = {"TFLOP/s": 1e12, "GB/s": 1e9}


@pytest.mark.parametrize("scale, outcome", [(10.0, "failed"), (0.1, "passed")])
def test_floors_ten_times_what_the_device_does_fail_every_metric_and_a_tenth_pass(pytester, scale, outcome):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.h100()) + CONFTEST)
    tests = "\n".join(
        f"def test_{i}(perf, timed):\n    perf.throughput({name!r}, timed({s}), {work}, {unit!r})\n"
        for i, (name, (s, work, unit)) in enumerate(MEASURED.items())
    )
    pytester.makepyfile(test_floored=f"import pytest\n\npytestmark = pytest.mark.rocm_suite('perf')\n\n{tests}")
    folder = pytester.mkdir("floors")
    metrics = {
        name: {
            "value": scale * work / s / DIVISOR[unit],
            "unit": unit,
            "better": "higher",
            "dispersion": None,
            "samples": None,
            "provenance": {"date": "2026-11-23", "source": f"x{scale:g}"},
        }
        for name, (s, work, unit) in MEASURED.items()
    }
    (folder / "nvidia-h100-80gb-hbm3-sm90.json").write_text(
        __import__("json").dumps(
            {"schema": "rocm-validate/baselines/1", "device_key": "nvidia-h100-80gb-hbm3-sm90", "metrics": metrics}
        )
    )
    pytester.mkdir("baselines")
    result = pytester.runpytest(
        "--rocm-suite=perf", f"--rocm-floors={folder}", f"--rocm-baselines={pytester.path / 'baselines'}"
    )
    result.assert_outcomes(**{outcome: len(MEASURED)})


# --- the interconnect, FP8 training steps and ceilings: day 0 gates them too ----------------------

MEASUREMENTS = Path(__file__).resolve().parents[1] / "docs" / "measurements" / "node-x2-nvidia-h200-sm90.json"
BASELINES = Path(__file__).resolve().parents[1] / "baselines"
H200 = gpu("NVIDIA H200", "sm_90", "cuda")
GATED = [f"collective.{op}.2ranks.{size}" for op in COLLECTIVES for size in ("256mib", "1gib")]


@pytest.mark.parametrize("device", [fake_devices.h100(), H200], ids=["h100", "h200"])
def test_every_gated_collective_size_and_the_p2p_copy_of_two_nvlink_gpus_has_a_floor(device):
    found = {name: floors.shipped_floor(device, name) for name in [*GATED, "p2p.gpu0-gpu1.256mib"]}
    assert all(found.values()) and len(found) == 11
    assert all(f.unit == "GB/s" and "lent 2 x H200" in f.source and "DCGM rule" in f.source for f in found.values())
    assert found["collective.all_reduce.2ranks.1gib"].value == round(0.75 * 325.9, 1)


@pytest.mark.parametrize(
    "name",
    ["collective.all_reduce.2ranks.1mib", "collective.all_gather.2ranks.16mib", "collective.all_reduce.8ranks.1gib"],
)
def test_latency_bound_sizes_and_unmeasured_world_sizes_have_no_nvidia_floor(name):
    assert floors.shipped_floor(fake_devices.h100(), name) is None


def test_no_nvlink_floor_is_above_any_of_the_four_runs_the_2_x_h200_measured():
    measured = json.loads(MEASUREMENTS.read_text())
    runs = {
        f"collective.{row['collective']}.2ranks.{size_label(row['bytes']).lower()}": min(row["busbw_gbps"].values())
        for row in measured["busbw"]
    }
    runs["p2p.gpu0-gpu1.256mib"] = min(measured["p2p_gpu0_gpu1_256mib_gbps"].values())
    for name in [*GATED, "p2p.gpu0-gpu1.256mib"]:
        floor = floors.shipped_floor(H200, name)
        assert floor.value < 0.85 * runs[name], (name, floor.value, runs[name])


TRAINING_MEASURED = MEASUREMENTS.parent / "collectives-training-2xh200-2026-11-28.json"


def test_the_training_collectives_at_256_mib_have_floors_below_every_run_the_2_x_h200_measured():
    measured = json.loads(TRAINING_MEASURED.read_text())["metrics"]
    for op in TRAINING_COLLECTIVES:
        name = f"collective.{op}.2ranks.256mib"
        floor = floors.shipped_floor(H200, name)
        assert floor is not None and "DCGM rule" in floor.source, name
        assert floor.value < 0.85 * min(measured[name]["busbw_gbps"]), (name, floor.value)
    assert floors.shipped_floor(H200, "collective.all_reduce_bf16.2ranks.16mib") is None


def test_an_mi300x_node_gets_amds_all_reduce_and_transferbench_figures_with_their_sources():
    mi300x = gpu("AMD Instinct MI300X", "gfx942")
    all_reduce = floors.shipped_floor(mi300x, "collective.all_reduce.8ranks.1gib")
    p2p = floors.shipped_floor(mi300x, "p2p.gpu2-gpu5.256mib")
    assert (all_reduce.value, p2p.value) == (228.0, 33.9)
    assert "0.75 x 304 GB/s, the all_reduce_perf bus bandwidth at 8 GB" in all_reduce.source
    assert "docs/gpus/mi300x.md" in all_reduce.source and "TransferBench p2p" in p2p.source


@pytest.mark.parametrize(
    "device, name",
    [
        (gpu("AMD Instinct MI300X", "gfx942"), "collective.all_gather.8ranks.1gib"),  # no figure published
        (gpu("AMD Instinct MI300X", "gfx942"), "collective.all_reduce.8ranks.256mib"),
        (gpu("AMD Instinct MI355X", "gfx950"), "p2p.gpu0-gpu1.256mib"),
        (gpu("AMD Instinct MI300X", "gfx942"), "p2p.gpu0-gpu1.32mib"),  # beyond 8 ranks the copies are smaller
    ],
)
def test_amd_collectives_without_a_published_figure_have_no_floor(device, name):
    assert floors.shipped_floor(device, name) is None


def test_a_cpx_partitions_collectives_have_no_floor():
    cpx = fake_devices.mi300x("amd-smi-static-mi300x-cpx-nps4-64dev.json")
    assert floors.shipped_floor(cpx, "collective.all_reduce.64ranks.1gib") is None


@pytest.mark.parametrize("device", [fake_devices.h100(), H200], ids=["h100", "h200"])
def test_the_fp8_llama_step_has_a_floor(device):
    for name in ("train.llama-3.1-8b-2l.fp8.tokens_per_s", "train.llama-3.1-8b-2l.fp8.model_tflops"):
        floor = floors.shipped_floor(device, name)
        assert floor is not None and floor.better == "higher" and "DCGM rule" in floor.source


@pytest.mark.parametrize("device", [fake_devices.h100(), H200], ids=["h100", "h200"])
def test_peak_memory_gets_a_ceiling_of_a_third_above_what_was_measured(device):
    ceiling = floors.shipped_floor(device, "train.bert-large.eager.peak_memory")
    assert (ceiling.value, ceiling.unit, ceiling.better, ceiling.kind) == (
        round(35.47 / 0.75, 2),
        "GiB",
        "lower",
        "ceiling",
    )


@pytest.mark.parametrize("baseline", sorted(BASELINES.glob("*.json")), ids=lambda p: p.stem)
def test_no_shipped_floor_is_above_and_no_ceiling_below_any_committed_run(baseline):
    """A floor must never fail a healthy node: every folded run of the committed baselines passes it."""
    entries = json.loads(baseline.read_text())["metrics"]
    device = fake_devices.h100() if "h100" in baseline.stem else H200
    checked = 0
    for name, entry in entries.items():
        floor = floors.shipped_floor(device, name)
        if floor is None:
            continue
        values = [r["value"] for r in entry.get("runs") or ()] or [entry["value"]]
        worst = min(values) if floor.better == "higher" else max(values)
        assert (worst > floor.value) if floor.better == "higher" else (worst < floor.value), (name, worst, floor)
        checked += 1
    assert checked >= 30


def _metric(value: float, better: str = "lower", unit: str = "GiB") -> Metric:
    return Metric("train.bert-large.eager.peak_memory", value, unit, better)


def test_a_peak_memory_above_its_ceiling_fails_naming_the_ceiling_and_one_below_passes():
    ceiling = floors.Floor(47.29, "GiB", "the DCGM rule mirrored", better="lower")
    above = gate.judge_floor(_metric(64.0), ceiling, "nvidia-h100-80gb-hbm3-sm90", RECORD)
    below = gate.judge_floor(_metric(35.5), ceiling, "nvidia-h100-80gb-hbm3-sm90", RECORD)
    assert above.fails and above.message.startswith("above the ceiling: 64 GiB vs the ceiling 47.29 (ratio 1.353")
    assert (below.verdict, below.fails) == ("floor-pass", False) and "gated by the ceiling" in below.message


def test_a_ceiling_on_a_higher_is_better_metric_is_a_mismatch():
    ceiling = floors.Floor(47.29, "GiB", "x", better="lower")
    assert gate.judge_floor(_metric(35.0, better="higher"), ceiling, "k", RECORD).verdict == "mismatch"


def _one_floor_file(folder: Path, name: str, value: float, unit: str, better: str) -> Path:
    """A user floor file for device key 'k' holding one entry."""
    row = {"value": value, "unit": unit, "better": better, "dispersion": None, "samples": None}
    path = folder / "k.json"
    metrics = {name: {**row, "provenance": {"date": "x"}}}
    path.write_text(json.dumps({"schema": "rocm-validate/baselines/1", "device_key": "k", "metrics": metrics}))
    return path


def test_a_user_ceiling_file_entry_is_read_as_a_ceiling(tmp_path):
    path = _one_floor_file(tmp_path, "train.x.peak_memory", 30.0, "GiB", "lower")
    assert floors.read_floor_file(path, "k")["train.x.peak_memory"].kind == "ceiling"


def test_the_metric_families_are_those_the_gate_has_a_band_for():
    assert set(floors.FAMILIES) == {"gemm", "sdpa", "copy", "launch", "train", "collective", "p2p"}
    assert gate.metric_families(gate.DEFAULT_RULES) == floors.FAMILIES


def test_a_family_is_known_once_a_rule_gives_it_a_band():
    rules = (*gate.DEFAULT_RULES, gate.ThresholdRule("moe.*", gate.Threshold()))
    assert "moe" not in gate.metric_families() and "moe" in gate.metric_families(rules)


def test_a_user_floor_for_a_family_with_no_band_is_refused_as_a_typo(tmp_path):
    path = _one_floor_file(tmp_path, "gemn.x", 1.0, "GB/s", "higher")
    with pytest.raises(BaselineError, match=r"'gemn\.x' names no metric the suites record"):
        floors.read_floor_file(path, "k")


def _user_floors(folder: Path, names: list[str]) -> Path:
    row = {
        "value": 1.0,
        "unit": "TFLOP/s",
        "better": "higher",
        "dispersion": None,
        "samples": None,
        "provenance": {"date": "2026-11-23"},
    }
    (folder / "k.json").write_text(
        json.dumps({"schema": "rocm-validate/baselines/1", "device_key": "k", "metrics": dict.fromkeys(names, row)})
    )
    return folder


def test_a_user_floor_no_recorded_metric_is_named_by_is_listed_with_the_closest_name(tmp_path):
    table = floors.FloorTable(
        gpu("AMD Instinct MI300X", "gfx942"),
        _user_floors(tmp_path, ["gemm.bf16.8192x8192x8193", "gemm.bf16.8192x8192x8192", "sdpa.forward.other"]),
    )
    assert table.unmatched(["gemm.bf16.8192x8192x8192", "copy.device.2048mib"]) == [
        "gemm.bf16.8192x8192x8193 (closest: gemm.bf16.8192x8192x8192)",
        "sdpa.forward.other",
    ]


PARTIAL = """
import pytest

pytestmark = pytest.mark.rocm_suite("perf")


def test_gemm(perf, timed):
    perf.throughput("gemm.bf16.8192x8192x8192", timed(0.0015), 2 * 8192**3, "TFLOP/s")


def test_copy(perf, timed):
    perf.throughput("copy.device.2048mib", timed(0.001), 2 * 2**31, "GB/s")
"""


def test_a_floor_a_partial_run_did_not_measure_is_a_warning_not_an_error(pytester):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.h100()) + CONFTEST)
    pytester.makepyfile(test_partial=PARTIAL)
    folder = pytester.mkdir("floors")
    row = {"value": 1.0, "unit": "GB/s", "better": "higher", "dispersion": None, "samples": None}
    (folder / "nvidia-h100-80gb-hbm3-sm90.json").write_text(
        json.dumps(
            {
                "schema": "rocm-validate/baselines/1",
                "device_key": "nvidia-h100-80gb-hbm3-sm90",
                "metrics": {"copy.device.2048mib": {**row, "provenance": {"date": "2026-11-23"}}},
            }
        )
    )
    pytester.mkdir("baselines")
    common = ("--rocm-suite=perf", f"--rocm-floors={folder}", f"--rocm-baselines={pytester.path / 'baselines'}")
    result = pytester.runpytest(*common, "-k", "gemm")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["rocm-validate perf: 1 floor(s) of * gated nothing: not measured in this run: copy*"])
    assert pytester.runpytest(*common).ret == 0  # the whole suite measures it: the floor gates
