"""Offline discovery: a node described from its saved tool outputs, one folder per real output format,
without torch or a GPU; and the bundle that saves those outputs on a node."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rocm_validate.platform import offline

AMD = Path(__file__).parent / "fixtures" / "amd"
NVIDIA_XML = Path(__file__).parent / "fixtures" / "offline" / "nvidia-smi-q-x-h100x2.xml"
MIB = 1024**2


def saved(folder: Path, files: dict[str, Path]) -> Path:
    """A bundle folder holding fixtures under the names `rocm-validate bundle` gives them."""
    folder.mkdir(parents=True)
    for name, source in files.items():
        shutil.copy(source, folder / name)
    return folder


def describe(tmp_path: Path, files: dict[str, Path]) -> offline.OfflineNode:
    return offline.describe_outputs(offline.read_saved_outputs(saved(tmp_path / "bundle", files)))


# Each row: the files of a folder, then the GPU count, arch, CUs, memory (MiB), compute and memory
# partition the outputs show (None where the format does not show it). CUs an output does not
# print come from the product table, for the product and mode the output names.
FORMATS = {
    "amd-smi static json, ROCm 7 gpu_data": (
        {"amd-smi-static.json": AMD / "amd-smi-static-mi355x-rocm7.json"},
        1,
        "gfx950",
        256,
        294896,
        "SPX",
        "NPS1",
    ),
    "amd-smi static json, ROCm 6.4 list": (
        {"amd-smi-static.json": AMD / "amd-smi-static-mi300x-rocm6.4.json"},
        2,
        "gfx942",
        304,
        196592,
        "SPX",
        "NPS1",
    ),
    "amd-smi static json, ROCm 6.1 (no CU count)": (
        {"amd-smi-static.json": AMD / "amd-smi-static-mi300x-rocm6.1.json"},
        2,
        "gfx942",
        304,
        196592,
        "SPX",
        "NPS1",
    ),
    "amd-smi static json, ROCm 6.0, with rocminfo for the CUs": (
        {
            "amd-smi-static.json": AMD / "amd-smi-static-mi300x-rocm6.0.json",
            "rocminfo.txt": AMD / "rocminfo-mi300x-2gpu.txt",
        },
        2,
        "gfx942",
        304,
        196592,
        "SPX",
        "NPS1",
    ),
    "amd-smi static json, CPX/NPS4 node of 64 partitions": (
        {"amd-smi-static.json": AMD / "amd-smi-static-mi300x-cpx-nps4-64dev.json"},
        64,
        "gfx942",
        38,
        24574,
        "CPX",
        "NPS4",
    ),
    "amd-smi static text, ROCm 7": (
        {"amd-smi-static.txt": AMD / "amd-smi-static-mi300x-rocm7.txt"},
        2,
        "gfx942",
        304,
        196592,
        "SPX",
        "NPS1",
    ),
    "amd-smi static --partition text": (
        {"amd-smi-static.txt": AMD / "amd-smi-static-partition-mi300x-cpx-nps4.txt"},
        16,
        "unknown",
        None,
        None,
        "CPX",
        "NPS4",
    ),
    "amd-smi list -e, CPX (the product from the UUID)": (
        {"amd-smi-list.txt": AMD / "amd-smi-list-mi300x-cpx.txt"},
        8,
        "gfx942",
        38,
        24576,  # derived: a CPX eighth of the MI300X's 192 GB
        "CPX",
        None,
    ),
    "rocminfo": ({"rocminfo.txt": AMD / "rocminfo-mi300x-2gpu.txt"}, 2, "gfx942", 304, 196592, "SPX", None),
    "rocm-smi json, ROCm 6.4": (
        {"rocm-smi.json": AMD / "rocm-smi-mi300x-rocm6.4.json"},
        2,
        "gfx942",
        304,
        196592,
        "SPX",
        "NPS1",
    ),
    "rocm-smi json, gfx9010": (
        {"rocm-smi.json": AMD / "rocm-smi-showproductname-mi250x.json"},
        2,
        "gfx90a",
        110,
        65536,  # derived: one GCD's 64 GB
        None,
        None,
    ),
    "rocm-smi -a json, ROCm 5": (
        {"rocm-smi.json": AMD / "rocm-smi-a-mi250-rocm5.json"},
        2,
        "gfx90a",
        104,
        65536,
        None,
        None,
    ),
    "rocm-smi -a text, SR-IOV guest": (
        {"rocm-smi.txt": AMD / "rocm-smi-a-mi300x-sriov.txt"},
        2,
        "gfx942",
        304,
        196608,
        "SPX",
        "NPS1",
    ),
    "rocm-smi --showhw, MI300A TPX": (
        {"rocm-smi.txt": AMD / "rocm-smi-showhw-mi300a-tpx.txt"},
        6,
        "gfx942",
        76,
        43691,  # derived: a third of the MI300A's 128 GB
        "TPX",
        None,
    ),
    "rocm-smi concise": (
        {"rocm-smi.txt": AMD / "rocm-smi-concise-mi300x.txt"},
        3,
        "gfx942",
        304,
        196608,
        "SPX",
        "NPS1",
    ),
    "rocm-smi --showproduct": (
        {"rocm-smi.txt": AMD / "rocm-smi-showproduct-mi300a.txt"},
        2,
        "gfx942",
        None,
        None,
        None,
        None,
    ),
    "nvidia-smi -q -x": ({"nvidia-smi.xml": NVIDIA_XML}, 2, "sm_90", None, 81559, None, None),
}


@pytest.mark.parametrize(
    ("files", "count", "arch", "units", "memory_mib", "compute", "memory"), FORMATS.values(), ids=FORMATS
)
def test_each_saved_format_gives_what_the_output_shows(
    tmp_path, files, count, arch, units, memory_mib, compute, memory
):
    node = describe(tmp_path, files)
    assert len(node.devices) == count
    assert [e for e in node.errors if "is 'N/A'" not in e] == []  # only the sections a fixture writes as N/A
    assert {(d.arch, d.compute_units, d.compute_partition, d.memory_partition) for d in node.devices} == {
        (arch, units, compute, memory)
    }
    assert {d.memory_bytes and round(d.memory_bytes / MIB) for d in node.devices} == {memory_mib}


def test_an_offline_device_says_where_its_facts_came_from_and_carries_no_software_stack(tmp_path):
    node = describe(
        tmp_path,
        {
            "amd-smi-static.json": AMD / "amd-smi-static-mi300x-rocm6.0.json",
            "rocminfo.txt": AMD / "rocminfo-mi300x-2gpu.txt",
        },
    )
    first = node.devices[0]
    assert first.sources == ("saved amd-smi static --json", "saved rocminfo")
    assert (first.device_key, first.pci_bus_id, first.driver_version) == (
        "amd-instinct-mi300x-gfx942",
        "0000:0c:00.0",
        "6.3.6",
    )
    assert first.fp8_formats == ("e4m3fnuz", "e5m2fnuz")  # a fact of the arch
    assert (first.torch_version, first.preferred_blas, first.attention_library, first.scaled_mm) == (
        None,
        None,
        None,
        False,
    )
    assert node.files == ("amd-smi-static.json", "rocminfo.txt")


def test_inferred_modes_say_they_are_inferred(tmp_path):
    showhw = describe(tmp_path / "showhw", {"rocm-smi.txt": AMD / "rocm-smi-showhw-mi300a-tpx.txt"}).devices[0]
    assert showhw.partition_source == "inferred from 3 devices at PCI address 0000:01:00 (AMD Instinct MI300A)"
    assert showhw.device_key == "amd-instinct-mi300a-gfx942-tpx"
    rocminfo = describe(tmp_path / "rocminfo", {"rocminfo.txt": AMD / "rocminfo-mi300x-2gpu.txt"}).devices[0]
    assert rocminfo.partition_source == "inferred from 304 of 304 CUs (AMD Instinct MI300X)"


def test_broken_sections_are_listed_and_the_rest_of_the_node_described(tmp_path):
    node = describe(tmp_path, {"amd-smi-static.json": AMD / "amd-smi-static-broken-rocm6.4.json"})
    broken, whole = node.devices
    # the board section's product name still names it: the product, and so its ISA, are known
    assert (broken.arch, broken.memory_bytes, broken.compute_partition) == ("gfx942", 196592 * MIB, "SPX")
    assert (whole.arch, whole.compute_units) == ("gfx942", 304)
    assert node.errors == broken.errors and len(node.errors) == 3
    assert "section 'asic' is 'N/A'" in node.errors[0]


def test_another_tools_output_fills_what_a_broken_section_lost(tmp_path):
    node = describe(
        tmp_path,
        {
            "amd-smi-static.json": AMD / "amd-smi-static-broken-rocm6.4.json",
            "rocminfo.txt": AMD / "rocminfo-mi300x-2gpu.txt",
        },
    )
    assert [(d.arch, d.compute_units, d.name) for d in node.devices] == [("gfx942", 304, "AMD Instinct MI300X")] * 2
    assert len(node.errors) == 3  # still said


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        (
            "rocm-smi.json",
            "ERROR: GPU[0] : Unable to get compute partition\n",
            "rocm-smi.json: ToolOutputError: rocm-smi --json printed no JSON",
        ),
        (
            "nvidia-smi.xml",
            NVIDIA_XML.read_text()[:900],
            "nvidia-smi.xml: ToolOutputError: nvidia-smi -q -x printed invalid XML",
        ),
        (
            "rocminfo.txt",
            "ROCk module is NOT loaded, possibly no GPU devices\n",
            'rocminfo.txt: ToolOutputError: rocminfo said "ROCk module is NOT loaded, possibly no GPU devices"',
        ),
    ],
)
def test_a_file_that_does_not_parse_is_an_error_beside_the_others(tmp_path, name, text, error):
    folder = saved(tmp_path / "bundle", {"amd-smi-static.json": AMD / "amd-smi-static-mi300x-rocm6.4.json"})
    (folder / name).write_text(text)
    node = offline.describe_outputs(offline.read_saved_outputs(folder))
    assert len(node.devices) == 2 and node.devices[0].arch == "gfx942"
    assert len(node.errors) == 1 and node.errors[0].startswith(error)
    assert node.devices[1].errors == node.errors


def test_unknown_files_in_the_folder_are_not_read(tmp_path):
    folder = saved(tmp_path / "bundle", {"rocminfo.txt": AMD / "rocminfo-mi300x-2gpu.txt"})
    (folder / "notes.txt").write_text("GPU: 0\n")
    assert list(offline.read_saved_outputs(folder)) == ["rocminfo.txt"]


# --- the bundle --------------------------------------------------------------------------------


def _node_runner(calls: list[list[str]]):
    """A node with amd-smi that refuses section flags (ROCm 6.0), rocminfo, a hanging rocm-smi and no nvidia-smi."""
    outputs = {
        "amd-smi static --json": (AMD / "amd-smi-static-mi300x-rocm6.0.json").read_text(),
        "amd-smi static": (AMD / "amd-smi-static-mi300x-rocm7.txt").read_text(),
        "amd-smi list -e": (AMD / "amd-smi-list-mi300x-cpx.txt").read_text(),
        "rocminfo": (AMD / "rocminfo-mi300x-2gpu.txt").read_text(),
    }

    def run(command: list[str], timeout_s: float) -> str:
        calls.append(command)
        line = " ".join(command)
        if command[0] == "nvidia-smi":
            raise FileNotFoundError("nvidia-smi not on PATH")
        if command[0] == "rocm-smi":
            raise subprocess.TimeoutExpired(command, timeout_s)
        if line not in outputs:
            raise RuntimeError(f"{line} exited 2: amd-smi: error: unrecognized arguments: --clock")
        return outputs[line]

    return run


def test_a_bundle_saves_each_output_and_records_what_was_missing_failed_or_timed_out(tmp_path):
    calls: list[list[str]] = []
    records = offline.save_outputs(
        tmp_path / "node", timeout_s=5, run=_node_runner(calls), env={"HIP_VISIBLE_DEVICES": "0,1"}
    )
    status = {r.file: r.status for r in records}
    assert status == {
        "amd-smi-static.json": "saved",
        "amd-smi-static.txt": "saved",
        "amd-smi-list.txt": "saved",
        **dict.fromkeys(  # the fake node's amd-smi refuses the summary, partition, topology and metric views
            (
                "amd-smi.txt",
                "amd-smi-partition.json",
                "amd-smi-partition.txt",
                "amd-smi-topology.json",
                "amd-smi-topology.txt",
                "amd-smi-metric.json",
                "amd-smi-metric.txt",
            ),
            "failed",
        ),
        "rocminfo.txt": "saved",
        "rocm-smi.json": "timeout",
        "rocm-smi.txt": "timeout",
        "nvidia-smi.xml": "missing",
    }
    json_record = records[0]
    assert json_record.command == "amd-smi static --json"  # the sectioned form was refused, the plain one saved
    assert json_record.detail.startswith(
        "amd-smi static --asic --bus --vram --cache --partition --driver --clock --json: RuntimeError"
    )
    assert ["rocm-smi", *offline._ROCM_SMI[1:], *offline._ROCM_SMI_PARTITIONS, "--json"] in calls
    manifest = json.loads((tmp_path / "node" / offline.MANIFEST).read_text())
    assert manifest["schema"] == "rocm-validate/bundle/1" and manifest["variables"] == {"HIP_VISIBLE_DEVICES": "0,1"}
    assert [o["status"] for o in manifest["outputs"]] == list(status.values())
    assert not (tmp_path / "node" / "nvidia-smi.xml").exists()


def test_what_a_bundle_saves_is_what_offline_discovery_reads(tmp_path):
    offline.save_outputs(tmp_path / "node", run=_node_runner([]), env={})
    node = offline.describe_outputs(offline.read_saved_outputs(tmp_path / "node"))
    assert node.files == ("amd-smi-static.json", "amd-smi-static.txt", "amd-smi-list.txt", "rocminfo.txt")
    # the fake node's amd-smi list is of a CPX node: the disagreement is said, and the fuller listing kept
    assert {d.arch for d in node.devices} == {"gfx942"} and len(node.devices) == 9
    assert any(e.startswith("the outputs disagree on the GPU count (amd-smi-static.json 2, ") for e in node.errors)


def test_a_cut_short_output_listing_fewer_gpus_is_no_disagreement_and_the_full_count_stands(tmp_path):
    static = json.loads((AMD / "amd-smi-static-mi300x-rocm6.4.json").read_text())
    listing = "GPU: 0\n    BDF: " + static[0]["bus"]["bdf"] + "\n    UUID: N/A\n[output truncated]\n"
    node = offline.describe_outputs({"amd-smi-static.json": json.dumps(static), "amd-smi-list.txt": listing})
    assert len(node.devices) == 2 and not any("disagree on the GPU count" in e for e in node.errors)
    assert node.truncated == ("amd-smi-list.txt: [output truncated]",) and node.at_least is False


def test_an_output_cut_short_that_sets_the_count_makes_it_a_lower_bound():
    text = (AMD / "rocminfo-mi300x-2gpu.txt").read_text()
    node = offline.describe_outputs({"rocminfo.txt": text + "\n... (output truncated)\n"})
    assert len(node.devices) == 2 and node.at_least is True


@pytest.mark.parametrize("marker", ["[output truncated]", "...", "…", "<snip>", "[...]", "(12 more lines)"])
def test_each_common_truncation_marker_is_recognised(marker):
    assert offline.truncation_marker(f"GPU: 0\n    BDF: 0000:0c:00.0\n{marker}\n") == marker


def test_a_complete_output_has_no_truncation_marker():
    assert offline.truncation_marker((AMD / "rocminfo-mi300x-2gpu.txt").read_text()) is None


def test_a_json_output_cut_before_its_closing_brackets_is_cut_short():
    text = (AMD / "amd-smi-static-mi300x-rocm6.4.json").read_text()
    assert offline.truncation_marker(text[: len(text) // 2]) == "the JSON stops before its closing brackets"


def test_an_amd_smi_text_whose_last_gpu_block_stops_part_way_is_cut_short():
    text = (AMD / "amd-smi-static-mi300x-rocm7.txt").read_text()
    head = text[: text.rindex("GPU: ")]
    partial = head + "GPU: 1\n    ASIC:\n        MARKET_NAME: AMD Instinct MI300X\n"
    assert offline.truncation_marker(partial) == "GPU 1's block stops part-way"
    assert offline.truncation_marker(text) is None


def test_the_rocm_7_summary_and_partition_views_alone_describe_a_dpx_node(tmp_path):
    node = describe(
        tmp_path,
        {
            "amd-smi.txt": AMD / "amd-smi-default-mi300x-x8-dpx-rocm7.0.2.txt",
            "amd-smi-partition.txt": AMD / "amd-smi-partition-accelerator-mi300x-x8-dpx-rocm7.0.2.txt",
        },
    )
    assert len(node.devices) == 16 and node.at_least is False
    (note,) = node.errors  # the first partition of each package printed the package's 196592 MB
    assert note.startswith("amd-smi+amd-smi partition printed the whole package's memory (192.0 GiB)")
    assert {
        (d.name, d.arch, d.compute_units, round(d.memory_gib or 0), d.compute_partition, d.memory_partition)
        for d in node.devices
    } == {("AMD Instinct MI300X", "gfx942", 152, 96, "DPX", "NPS1")}
    assert node.devices[1].sources == (
        "saved amd-smi",
        "saved amd-smi partition",
        "derived from the product table (AMD Instinct MI300X): arch, compute units",
    )
    assert [m.temperature_c for m in node.metrics[:2]] == [40.0, None]


def test_rocm_smi_showtopo_json_pairs_are_the_links_and_a_pcie_pair_among_xgmi_is_said():
    # rocm-smi --showtopo --json keys its upper triangle under "system" (rocm_smi.py's format)
    system = {
        "(Topology) Weight between DRM devices 0 and 1": "15",
        "(Topology) Hops between DRM devices 0 and 1": "1",
        "(Topology) Link type between DRM devices 0 and 1": "XGMI",
        "(Topology) Link type between DRM devices 0 and 2": "PCIE",
        "(Topology) Link type between DRM devices 1 and 2": "XGMI",
    }
    cards = {f"card{i}": {"(Topology) Numa Node": "0"} for i in range(3)}
    node = offline.describe_outputs({"rocm-smi.json": json.dumps({**cards, "system": system})})
    assert len(node.devices) == 3 and node.links_tool == "rocm-smi --showtopo"
    assert {(link.pair, link.link_type) for link in node.links} == {
        ((0, 1), "XGMI"),
        ((0, 2), "PCIE"),
        ((1, 2), "XGMI"),
    }
    (problem,) = node.errors
    assert problem.startswith("rocm-smi --showtopo: gpu0-gpu2 (PCIE) not over XGMI")
