"""Real tool outputs from public ROCm issues and docs (tests/fixtures/amd/nodes/, each source in
tests/fixtures/amd/README.md), described as `rocm-validate devices --from DIR` describes them: one
folder per node, the files named as `rocm-validate bundle` names them."""

from __future__ import annotations

import re
from pathlib import Path

import fake_devices
import pytest

from rocm_validate.platform import amd_tools, offline, peaks

NODES = Path(__file__).parent / "fixtures" / "amd" / "nodes"
AMD = Path(__file__).parent / "fixtures" / "amd"
GIB = 1024**3
FNUZ = ("e4m3fnuz", "e5m2fnuz")
OCP = ("e4m3fn", "e5m2")


def describe(folder: Path) -> offline.OfflineNode:
    return offline.describe_outputs(offline.read_saved_outputs(folder))


def described_with(tmp_path: Path, files: dict[str, str]) -> offline.OfflineNode:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return describe(tmp_path)


# folder: GPU count, then what every GPU is: name, arch, CUs, memory (GiB, 1 decimal), compute and memory
# mode, FP8 formats, device key, bf16 datasheet peak (TFLOP/s), driver
EXPECTED = {
    "mi300x-spx-x8-rocm6.3": (
        8,
        ("AMD Instinct MI300X", "gfx942", 304, 192.0, "SPX", "NPS1", FNUZ, "amd-instinct-mi300x-gfx942", 1307.4, None),
    ),
    "mi300x-qpx-rocm6.3": (
        4,
        (
            "AMD Instinct MI300X",
            "gfx942",
            76,
            48.0,
            "QPX",
            "NPS1",
            FNUZ,
            "amd-instinct-mi300x-gfx942-qpx",
            326.85,
            None,
        ),
    ),
    "mi300x-cpx-nps4-x8-rocm6.3": (
        63,
        (
            "AMD Instinct MI300X",
            "gfx942",
            38,
            24.0,
            "CPX",
            "NPS4",
            FNUZ,
            "amd-instinct-mi300x-gfx942-cpx-nps4",
            163.43,
            None,
        ),
    ),
    "mi300x-dpx-x8-rocm6.4.1": (
        16,
        (
            "AMD Instinct MI300X",
            "gfx942",
            152,
            96.0,  # derived: half the MI300X's 192 GB
            "DPX",
            "NPS1",
            FNUZ,
            "amd-instinct-mi300x-gfx942-dpx",
            653.7,
            "6.10.5",
        ),
    ),
    "mi300x-cpx-agents-paste": (
        2,
        ("AMD Instinct MI300X", "gfx942", 38, 24.0, "CPX", None, FNUZ, "amd-instinct-mi300x-gfx942-cpx", 163.43, None),
    ),
    "mi300a-spx-rocm6.3": (
        1,
        ("AMD Instinct MI300A", "gfx942", 228, 93.8, "SPX", "NPS1", FNUZ, "amd-instinct-mi300a-gfx942", 980.6, None),
    ),
    "mi300a-tpx-rocm6.3": (
        3,
        (
            "AMD Instinct MI300A",
            "gfx942",
            76,
            31.3,
            "TPX",
            "NPS1",
            FNUZ,
            "amd-instinct-mi300a-gfx942-tpx",
            326.87,
            None,
        ),
    ),
    "mi300a-tpx-rocm6.4.1": (
        3,
        (
            "AMD Instinct MI300A",
            "gfx942",
            76,
            42.7,  # derived: a third of the MI300A's 128 GB
            "TPX",
            "NPS1",
            FNUZ,
            "amd-instinct-mi300a-gfx942-tpx",
            326.87,
            "6.10.5",
        ),
    ),
    "mi300a-a0-rocm6.3.3": (
        1,
        ("AMD Instinct MI300A", "gfx940", 228, 93.8, "SPX", None, FNUZ, "amd-instinct-mi300a-gfx940", 980.6, "6.10.5"),
    ),
    "mi325x-rocm7.2-condensed": (
        1,
        (
            "AMD Instinct MI325X",
            "gfx942",
            304,
            256.0,
            "SPX",
            None,
            FNUZ,
            "amd-instinct-mi325x-gfx942",
            1307.4,
            "6.14.14",
        ),
    ),
    "mi325x-vf-amd-smi": (
        2,
        ("AMD Instinct MI325X VF", "gfx942", 304, 256.0, "SPX", None, FNUZ, "amd-instinct-mi325x-gfx942", 1307.4, None),
    ),
    "mi350x-host-amd-smi": (
        2,
        (
            "AMD Instinct MI350X",
            "gfx950",
            256,
            252.0,
            "SPX",
            "NPS1",
            OCP,
            "amd-instinct-mi350x-gfx950",
            2306.9,
            "8.6.0.K-dev-107-1dfb7bfa73",
        ),
    ),
    "mi250-rocm6.2.3": (
        1,
        ("AMD Instinct MI250", "gfx90a", 104, 64.0, None, None, (), "amd-instinct-mi250-gfx90a", 181.0, "5.16.9.22.20"),
    ),
    "mi250x-gcd-rocm6.2.1": (
        1,
        ("AMD Instinct MI250X", "gfx90a", 110, 64.0, None, None, (), "amd-instinct-mi250x-gfx90a", 191.5, "6.3.6"),
    ),
    "mi210-x4-rocm6.2.4": (
        4,
        ("AMD Instinct MI210", "gfx90a", 104, 64.0, None, None, (), "amd-instinct-mi210-gfx90a", 181.0, "6.10.5"),
    ),
    "mi350x-dpx-concise-cut": (
        8,
        (
            "AMD Instinct MI350X",
            "gfx950",
            128,
            144.0,  # derived: half the MI350X's 288 GB
            "DPX",
            "NPS1",
            OCP,
            "amd-instinct-mi350x-gfx950-dpx",
            1153.45,
            None,
        ),
    ),
    "mi250-agent-paste-from-uuid": (
        1,
        ("AMD Instinct MI250", "gfx90a", 104, 64.0, None, None, (), "amd-instinct-mi250-gfx90a", 181.0, None),
    ),
    "rx9070xt-agent-paste-mid": (
        1,
        ("AMD Radeon RX 9070 XT", "gfx1201", 64, 16.0, None, None, OCP, "amd-radeon-rx-9070-xt-gfx1201", None, None),
    ),
    "mi100-x2-csv-rocm4": (
        2,
        ("AMD Instinct MI100", "gfx908", 120, 32.0, None, None, (), "amd-instinct-mi100-gfx908", None, None),
    ),
    "rx7900xt-wsl-rocm6.3.4": (
        1,
        ("AMD Radeon RX 7900 XT", "gfx1100", 84, 19.9, None, None, (), "amd-radeon-rx-7900-xt-gfx1100", None, None),
    ),
    "rx7900xtx-vm-rocm6.1": (
        1,
        ("AMD Radeon RX 7900 XTX", "gfx1100", 96, 24.0, None, None, (), "amd-radeon-rx-7900-xtx-gfx1100", None, None),
    ),
}


@pytest.mark.parametrize(("folder", "count", "every"), [(k, *v) for k, v in EXPECTED.items()], ids=list(EXPECTED))
def test_each_real_node_is_described_right(folder, count, every):
    node = describe(NODES / folder)
    assert len(node.devices) == count
    described = {
        (
            d.name,
            d.arch,
            d.compute_units,
            None if d.memory_bytes is None else round(d.memory_bytes / GIB, 1),
            d.compute_partition,
            d.memory_partition,
            d.fp8_formats,
            d.device_key,
            peaks.peak_for(d, "bf16"),
            d.driver_version,
        )
        for d in node.devices
    }
    assert described == {every}


def test_radeon_cards_of_one_shared_id_without_a_cu_count_keep_the_ids_family_name():
    rx9070, r9700 = describe(NODES / "rx9070xt-r9700-rocm7.1.1").devices
    assert (rx9070.name, rx9070.arch, rx9070.fp8_formats) == ("AMD Radeon RX 9070/9070 XT/9070 GRE", "gfx1201", OCP)
    assert rx9070.device_key == "amd-radeon-rx-9070-9070-xt-9070-gre-gfx1201"
    assert (r9700.name, r9700.compute_units, r9700.device_key) == (
        "AMD Radeon AI PRO R9700",
        64,
        "amd-radeon-ai-pro-r9700-gfx1201",
    )
    assert any("is AMD Radeon RX 9070 XT or AMD Radeon RX 9070 or AMD Radeon RX 9070 GRE" in e for e in rx9070.errors)


def test_a_boards_name_printed_as_the_subsystem_tells_a_card_the_series_name_leaves_open():
    xtx, other_xtx, igpu = describe(NODES / "rx7900-x2-raphael-showproductname").devices
    assert (xtx.name, xtx.arch, xtx.compute_units, xtx.device_key) == (
        "AMD Radeon RX 7900 XTX",
        "gfx1100",
        96,
        "amd-radeon-rx-7900-xtx-gfx1100",
    )
    assert other_xtx.device_key == xtx.device_key
    assert (igpu.name, igpu.arch, igpu.compute_units) == ("Raphael", "gfx1036", None)


def test_a_series_name_listing_several_cards_names_none_of_them(tmp_path):
    text = (NODES / "rx7900-x2-raphael-showproductname" / "rocm-smi.txt").read_text()
    without_board = re.sub(r"Subsystem ID: \tNITRO\+ RX 7900 XTX Vapor-X", "Subsystem ID: \t0x471e", text)
    first = described_with(tmp_path, {"rocm-smi.txt": without_board}).devices[0]
    assert first.compute_units is None and first.device_key.startswith("navi-31-radeon-rx-7900-xt-7900-xtx")
    assert any("does not tell which" in error for error in first.errors)


def test_a_paste_of_only_rocm_smi_showtopo_counts_the_gpus_and_reads_their_links():
    node = describe(NODES / "pcie-x4-showtopo-only")
    assert len(node.devices) == 4 and node.errors == ()
    assert {(link.link_type, link.hops, link.weight) for link in node.links} == {("PCIE", 3, 52)}
    assert len({link.pair for link in node.links}) == 6
    assert all(d.arch == "unknown" and d.compute_units is None for d in node.devices)
    assert node.links_tool == "rocm-smi --showtopo"


def test_a_table_whose_last_row_stops_after_its_first_cell_makes_the_count_a_lower_bound():
    node = describe(NODES / "mi350x-dpx-concise-cut")
    assert node.at_least and node.truncated == ("rocm-smi.txt: the table's last row stops after '8'",)
    assert not any("disagree" in error for error in node.errors)


def test_a_full_last_row_or_a_closing_banner_is_no_cut(tmp_path):
    text = (NODES / "mi350x-dpx-concise-cut" / "rocm-smi.txt").read_text()
    whole = text.rsplit("\n8\n", 1)[0] + "\n"
    assert offline.truncation_marker(whole) is None
    assert offline.truncation_marker(whole + "=" * 60 + "\n") is None
    assert not described_with(tmp_path, {"rocm-smi.txt": whole}).at_least


def test_cut_short_amd_smi_views_of_one_node_are_combined_without_a_problem():
    node = describe(NODES / "mi300x-x8-amd-smi-blog-cut")
    assert node.at_least and len(node.devices) == 8 and len(node.truncated) == 4
    assert node.errors == ()
    named = [d for d in node.devices if d.name == "AMD Instinct MI300X"]
    assert [d.pci_bus_id for d in named] == ["0000:05:00.0", "0000:26:00.0", "0000:46:00.0"]
    assert all(d.compute_partition == "SPX" and d.compute_units == 304 for d in named)
    (reading,) = node.metrics
    assert reading.index == 0 and "saved amd-smi metric" in node.devices[0].sources


def test_no_mode_is_inferred_for_the_last_address_of_a_listing_cut_short(tmp_path):
    folder = NODES / "mi300x-x8-amd-smi-blog-cut"
    node = described_with(tmp_path, {"amd-smi-static.txt": (folder / "amd-smi-static.txt").read_text()})
    (gpu,) = node.devices
    assert node.at_least and gpu.name == "AMD Instinct MI300X"
    assert (gpu.compute_partition, gpu.compute_units, gpu.memory_bytes) == (None, None, None)


def test_a_topology_table_cut_after_its_first_rows_still_counts_every_gpu_its_header_names():
    node = describe(NODES / "x8-showtopo-hops-cut")
    assert len(node.devices) == 8 and node.errors == ()
    assert {link.hops for link in node.links} == {1}
    assert {link.pair for link in node.links} >= {(0, 7), (1, 5)}


def test_an_amd_smi_text_pasted_from_inside_a_block_is_cut_short_and_its_two_product_name_stays_open():
    node = describe(NODES / "mi60-mi50-amd-smi-static-cut")
    (gpu,) = node.devices
    assert node.at_least and "starts part-way into the block before GPU 3" in node.truncated[0]
    assert (gpu.name, gpu.arch, gpu.compute_units) == ("AMD Instinct MI60 / MI50", "gfx906", None)
    assert any("does not tell which" in error for error in gpu.errors)


def test_a_rocminfo_cut_before_its_gpu_agents_does_not_say_the_driver_initialised_none():
    node = describe(NODES / "rocm-smi-1gpu-rocminfo-cut")
    assert len(node.devices) == 1 and not node.at_least
    (error,) = node.errors
    assert "cut short" in error and "initialised no GPU" not in error
    assert node.truncated == ("rocminfo.txt: rocminfo's agent 1 stops before its ISA Info",)


def test_a_whole_rocminfo_without_a_gpu_agent_still_says_the_driver_initialised_none(tmp_path):
    text = (NODES / "rocm-smi-1gpu-rocminfo-cut" / "rocminfo.txt").read_text()
    whole = text + "      Cacheline Size:          64\n  ISA Info:\n*** Done ***\n"
    node = described_with(tmp_path, {"rocminfo.txt": whole})
    assert node.truncated == () and "initialised no GPU" in node.errors[0]


def test_every_real_node_folder_has_its_expectation_and_its_source():
    folders = {p.name for p in NODES.iterdir() if p.is_dir()}
    assert folders == set(EXPECTED) | {
        "mi300a-gpu-init-failed-rocm6.4",
        "rx9070xt-r9700-rocm7.1.1",
        "rx7900-x2-raphael-showproductname",
        "pcie-x4-showtopo-only",
        "mi300x-x8-amd-smi-blog-cut",
        "x8-showtopo-hops-cut",
        "mi60-mi50-amd-smi-static-cut",
        "rocm-smi-1gpu-rocminfo-cut",
    }
    readme = (AMD / "README.md").read_text()
    assert all(f"nodes/{folder}" in readme for folder in folders)


# --- what the outputs say beside the devices ------------------------------------------------------


def test_an_mi300a_whose_gpus_did_not_initialise_says_so_instead_of_zero_gpus():
    node = describe(NODES / "mi300a-gpu-init-failed-rocm6.4")
    assert node.devices == ()
    (error,) = node.errors
    assert error.startswith("rocminfo.txt: ToolOutputError: rocminfo lists 4 CPU agents (AMD Instinct MI300A")
    assert "the amdgpu driver did not initialise the MI300A's GPUs" in error and "dmesg" in error


def test_an_amd_smi_list_of_more_gpus_than_its_static_output_is_flagged_and_the_fuller_kept():
    node = describe(NODES / "mi325x-vf-amd-smi")
    assert [d.pci_bus_id for d in node.devices] == ["0000:83:00.0", "0000:8b:00.0"]
    assert node.errors == (
        "the outputs disagree on the GPU count (amd-smi-static.txt 1, amd-smi-list.txt 2); the node is described with "
        "2: those amd-smi-list.txt lists and any other output adds. Save every output on the node at one time, for "
        "every GPU (`rocm-validate bundle DIR`)",
    )


def test_rocm_smis_package_memory_for_each_partition_is_corrected_and_said():
    node = describe(NODES / "mi300x-qpx-rocm6.3")
    assert node.errors == (
        "rocm-smi printed the whole package's memory (192.0 GiB) for each of the 4 QPX partitions "
        "(ROCm/ROCm#4750); each partition's share, 48.0 GiB, is used",
    )


def test_a_package_listed_with_a_partition_missing_is_said():
    node = describe(NODES / "mi300x-cpx-nps4-x8-rocm6.3")
    assert node.errors[0].startswith(
        "GPUs 40-46 are 7 CPX partitions of one AMD Instinct MI300X package, which has 8 in that mode"
    )


def test_partitions_rocm_smi_6_4_1_prints_as_n_a_take_their_packages_id_and_modes():
    devices = describe(NODES / "mi300x-dpx-x8-rocm6.4.1").devices
    assert [d.compute_partition for d in devices[:2]] == ["DPX", "DPX"]
    assert devices[1].sources == (
        "saved rocm-smi",
        "derived from the product table (AMD Instinct MI300X): arch, compute units, memory",
    )


def test_outputs_of_different_cards_are_not_combined(tmp_path):
    node = described_with(
        tmp_path,
        {
            "rocminfo.txt": (NODES / "mi250x-gcd-rocm6.2.1" / "rocminfo.txt").read_text(),
            "rocm-smi.txt": (NODES / "mi300a-spx-rocm6.3" / "rocm-smi.txt").read_text(),
        },
    )
    (gpu,) = node.devices
    assert (gpu.name, gpu.arch, gpu.compute_partition) == ("AMD Instinct MI250X", "gfx90a", None)
    assert any("describe different GPUs" in e and "rocm-smi.txt was not combined" in e for e in node.errors)


def test_a_truncated_json_file_is_called_truncated_with_its_file_and_line(tmp_path):
    text = (AMD / "amd-smi-static-mi300x-rocm6.4.json").read_text()
    node = described_with(tmp_path, {"amd-smi-static.json": text[: len(text) // 2]})
    (error,) = node.errors
    assert error.startswith("amd-smi-static.json: ToolOutputError: amd-smi static --json: the JSON is cut short")
    line = text[: len(text) // 2].count("\n") + 1
    assert f"at line {line}" in error and "Save the command's whole output again" in error


def test_text_after_a_json_document_is_ignored(tmp_path):
    text = (AMD / "amd-smi-static-mi355x-rocm7.json").read_text() + "\nuser@node:~$ \n"
    node = described_with(tmp_path, {"amd-smi-static.json": text})
    assert [d.device_key for d in node.devices] == ["amd-instinct-mi355x-gfx950"] and node.errors == ()


# --- rocminfo as people save and paste it ------------------------------------------------------------


def _same_description(node: offline.OfflineNode, reference: offline.OfflineNode) -> None:
    fields = ("name", "arch", "compute_units", "memory_bytes", "device_key", "driver_version", "pci_bus_id")
    assert [tuple(getattr(d, f) for f in fields) for d in node.devices] == [
        tuple(getattr(d, f) for f in fields) for d in reference.devices
    ]


@pytest.mark.parametrize(
    "paste",
    [
        pytest.param(lambda text: "\n".join("\t" + line for line in text.splitlines()), id="indented with a tab"),
        pytest.param(lambda text: text.replace("\n", "\r\n"), id="CRLF"),
        pytest.param(lambda text: "\n".join(line.rstrip() for line in text.splitlines()), id="trailing spaces cut"),
        pytest.param(
            lambda text: "\n".join(line.replace("    ", "\t").replace("  ", "\t") for line in text.splitlines()),
            id="tab-separated",
        ),
        pytest.param(lambda text: re.sub(r"=+\s*\nHSA Agents\s*\n=+\s*\n", "", text), id="no HSA Agents banner"),
        pytest.param(
            lambda text: "\n".join(s for s in text.splitlines() if not s.strip().startswith(("*", "Agent"))),
            id="no agent headers",
        ),
    ],
)
def test_rocminfo_pasted_any_way_reads_as_printed(tmp_path, paste):
    text = (NODES / "mi210-x4-rocm6.2.4" / "rocminfo.txt").read_text()
    reference = describe(NODES / "mi210-x4-rocm6.2.4")
    _same_description(described_with(tmp_path, {"rocminfo.txt": paste(text)}), reference)


# --- one identity, live and offline -----------------------------------------------------------------


def test_a_gpu_described_live_and_from_its_bundle_gets_the_same_key():
    node = describe(NODES / "mi300x-cpx-agents-paste")
    amd = amd_tools.parse_rocminfo((NODES / "mi300x-cpx-agents-paste" / "rocminfo.txt").read_text())[0]
    live = fake_devices.instinct(amd, "AMD Instinct MI300X", 4, "7.0.51831-a3e329ad8")  # torch's facts, and rocminfo's
    assert live.sources == ("torch", "rocminfo") and live.compute_units == 38
    assert live.device_key == node.devices[0].device_key == "amd-instinct-mi300x-gfx942-cpx"


def test_the_board_name_amd_smi_prints_without_libdrm_gives_the_same_device(tmp_path):
    text = (NODES / "mi350x-host-amd-smi" / "amd-smi-static.txt").read_text()
    without_libdrm = "\n".join(line for line in text.splitlines() if "MARKET_NAME" not in line)
    node = described_with(tmp_path, {"amd-smi-static.txt": without_libdrm})
    assert {(d.name, d.device_key) for d in node.devices} == {("AMD Instinct MI350X", "amd-instinct-mi350x-gfx950")}
    assert "amd-instinct-mi350-oam-gfx950" in node.devices[0].key_aliases
