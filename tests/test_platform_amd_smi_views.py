"""`amd-smi partition`, `amd-smi topology` and `amd-smi metric` in the layouts of ROCm 6.1 to 7.x
(tests/fixtures/amd/amd-smi-{partition,topology,metric}-*, sources in tests/fixtures/amd/README.md),
read tolerantly: other spacing, unknown keys and tables, N/A values, text or JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocm_validate.errors import ToolOutputError
from rocm_validate.platform import amd_smi_views, topology

AMD = Path(__file__).parent / "fixtures" / "amd"


def fixture(name: str) -> str:
    return (AMD / name).read_text()


# --- partition ---------------------------------------------------------------------------------


def test_the_rocm_6_4_current_table_gives_each_partition_its_modes_and_id():
    facts = amd_smi_views.parse_amd_smi_partition(fixture("amd-smi-partition-current-mi3x-cpx-rocm6.4.txt"))
    assert [f.index for f in facts] == list(range(11))
    assert {(f.compute_partition, f.memory_partition, f.partition_source) for f in facts} == {
        ("CPX", "NPS1", "amd-smi partition")
    }
    assert [f.partition_id for f in facts] == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2]


def test_the_rocm_6_3_id_list_on_a_packages_first_row_is_its_first_partition():
    facts = amd_smi_views.parse_amd_smi_partition(fixture("amd-smi-partition-current-mi3x-cpx-rocm6.3.txt"))
    assert [f.partition_id for f in facts][:9] == [0, None, None, None, None, None, None, None, 0]
    assert {f.compute_partition for f in facts} == {"CPX"}


def test_the_rocm_7_json_reads_current_memory_and_the_marked_profile():
    facts = amd_smi_views.parse_amd_smi_partition(fixture("amd-smi-partition-mi300x-x8-spx-rocm7.json"))
    assert len(facts) == 8 and {(f.compute_partition, f.memory_partition) for f in facts} == {("SPX", "NPS1")}


def test_a_partition_json_of_profiles_alone_takes_the_mode_marked_current():
    data = json.loads(fixture("amd-smi-partition-mi300x-x8-spx-rocm7.json"))
    only_profiles = json.dumps({"partition_profiles": data["partition_profiles"], "partition_resources": []})
    facts = amd_smi_views.parse_amd_smi_partition(only_profiles)
    assert len(facts) == 8 and {f.compute_partition for f in facts} == {"SPX"}


def test_profiles_read_without_root_are_no_gpu_and_the_error_says_to_use_sudo():
    with pytest.raises(ToolOutputError, match="no row names a GPU") as error:
        amd_smi_views.parse_amd_smi_partition(fixture("amd-smi-partition-accelerator-nonroot-rocm6.4.txt"))
    assert "sudo amd-smi partition" in str(error.value)


def test_a_partition_table_respaced_with_tabs_and_unknown_columns_still_reads():
    text = "CURRENT_PARTITION:\nGPU_ID\tMEMORY\tACCELERATOR_TYPE\tNEW_COLUMN\tPARTITION_ID\n0\tNPS4\tCPX\tx\t5\n"
    (facts,) = amd_smi_views.parse_amd_smi_partition(text)
    assert (facts.compute_partition, facts.memory_partition, facts.partition_id) == ("CPX", "NPS4", 5)


def test_rocm_6_3_memory_blocks_and_several_json_documents_after_a_warning_read():
    text = (
        "WARNING: User is missing the following required groups: render, video.\n"
        '[{"gpu_id": 0, "memory": "N/A", "accelerator_type": "DPX", "partition_id": [0, 1]}]\n'
        '[{"gpu": 0, "memory_partition": {"caps": "NPS1, NPS4", "current": "NPS4"}}]\n'
    )
    (facts,) = amd_smi_views.parse_amd_smi_partition(text)
    assert (facts.compute_partition, facts.memory_partition, facts.partition_id) == ("DPX", "NPS4", 0)


# --- metric ------------------------------------------------------------------------------------


def test_the_rocm_7_metric_text_and_json_give_the_same_readings():
    (text,) = amd_smi_views.parse_amd_smi_metric_readings(fixture("amd-smi-metric-mi300x-rocm7.1.txt"))
    (as_json,) = amd_smi_views.parse_amd_smi_metric_readings(fixture("amd-smi-metric-mi300x-rocm7.1.json"))
    assert text == as_json
    assert (text.clock_mhz, text.power_w, text.temperature_c, text.edge_temperature_c) == (132, 140.0, 37.0, None)
    assert (text.ecc_correctable, text.ecc_uncorrectable, text.memory_bytes) == (0, 0, 196592 * 1024**2)


def test_the_metric_clock_view_takes_the_highest_of_the_xcds_clocks():
    (reading,) = amd_smi_views.parse_amd_smi_metric_readings(fixture("amd-smi-metric-clock-8xcd-rocm6.1.1.txt"))
    assert (reading.clock_mhz, reading.max_clock_mhz) == (113, 1800)
    assert reading.memory_clock_mhz is not None and reading.power_w is None


def test_the_metric_power_view_of_two_gpus_gives_each_its_socket_power():
    readings = amd_smi_views.parse_amd_smi_metric_readings(fixture("amd-smi-metric-power-navi-rocm6.1.1.txt"))
    assert [(r.index, r.power_w) for r in readings] == [(0, 11.0), (1, 17.0)]


def test_rocm_6_0_plain_numbers_and_older_key_names_read_too():
    text = json.dumps(
        [
            {
                "gpu": 3,
                "power": {"average_socket_power": 120, "power_management": "ENABLED"},
                "clock": {"GFX": {"cur_clk": 1200, "max_clk": 2100}, "MEM": {"cur_clk": 900}},
                "temperature": {"edge": "N/A", "hotspot": 50, "mem": 48},
                "ecc": {"correctable_count": 2, "uncorrectable_count": 0},
                "future_section": {"anything": 1},
            }
        ]
    )
    (reading,) = amd_smi_views.parse_amd_smi_metric_readings(text)
    assert (reading.index, reading.power_w, reading.clock_mhz, reading.max_clock_mhz) == (3, 120.0, 1200, 2100)
    assert (reading.temperature_c, reading.edge_temperature_c, reading.ecc_correctable) == (50.0, None, 2)


def test_a_metric_output_with_no_gpu_says_so():
    with pytest.raises(ToolOutputError, match="amd-smi metric: no 'GPU: N' block"):
        amd_smi_views.parse_amd_smi_metric_readings("AMDSMI Tool: 26.1.0\n")


# --- topology ----------------------------------------------------------------------------------


def test_the_topology_tables_of_eight_mi300x_give_28_xgmi_pairs_of_one_hop():
    links = topology.parse_amd_smi_topology(fixture("amd-smi-topology-x8-xgmi-rocm6.1.txt"))
    assert len(links) == 56 and len(topology.p2p_pairs(links)) == 28
    assert {(link.link_type, link.hops, link.weight, link.accessible, link.max_bandwidth_mbps) for link in links} == {
        ("XGMI", 1, 15, True, 50000)
    }
    assert (links[0].source_bdf, links[0].target_bdf) == ("0000:0c:00.0", "0000:22:00.0")
    assert topology.describe_links(links) == "8 GPUs, 28 pairs: 28 XGMI 1 hop, 50-50 GB/s"
    assert topology.link_problems(links) == []
    assert topology.pair_name(topology.p2p_pairs(links)[0]) == "gpu0-gpu1"


def test_one_pcie_pair_among_xgmi_pairs_is_a_link_down():
    text = fixture("amd-smi-topology-x8-xgmi-rocm6.1.txt")
    head, _, tail = text.partition("LINK TYPE TABLE:")
    rows = tail.splitlines()
    rows[2] = rows[2].replace("XGMI         XGMI", "PCIE         XGMI", 1)  # GPU 0 -> GPU 1 over PCIe
    links = topology.parse_amd_smi_topology(head + "LINK TYPE TABLE:" + "\n".join(rows))
    (problem,) = topology.link_problems(links)
    assert problem.startswith("amd-smi topology: gpu0-gpu1 (PCIE) not over XGMI where the other 27 pairs are")


def test_unknown_tables_beside_the_known_ones_change_nothing():
    known = topology.parse_amd_smi_topology(fixture("amd-smi-topology-x8-xgmi-rocm6.1.txt"))
    both = fixture("amd-smi-topology-x8-xgmi-rocm6.1.txt") + "\n" + fixture("amd-smi-topology-cndz-x8-rocm6.3.txt")
    assert topology.parse_amd_smi_topology(both) == known


def test_only_unknown_tables_link_no_gpus_and_say_so():
    with pytest.raises(ToolOutputError, match="no table or entry links two GPUs"):
        topology.parse_amd_smi_topology(fixture("amd-smi-topology-cndz-x8-rocm6.3.txt"))


@pytest.mark.parametrize(
    "name", ["amd-smi-topology-2gpu-pcie-rocm6.1.json", "amd-smi-topology-a-t-2gpu-rocm6.1.1.json"]
)
def test_both_json_layouts_give_a_pcie_pair_without_p2p_access(name):
    links = topology.parse_amd_smi_topology(fixture(name))
    assert [(link.source, link.target, link.link_type, link.accessible) for link in links] == [
        (0, 1, "PCIE", False),
        (1, 0, "PCIE", False),
    ]
    assert topology.p2p_pairs(links) == []


def test_the_older_json_layout_reads_hops_and_the_newer_one_addresses():
    older = topology.parse_amd_smi_topology(fixture("amd-smi-topology-2gpu-pcie-rocm6.1.json"))
    newer = topology.parse_amd_smi_topology(fixture("amd-smi-topology-a-t-2gpu-rocm6.1.1.json"))
    assert (older[0].hops, older[0].weight) == (2, 40)
    assert (newer[0].source_bdf, newer[0].target_bdf) == ("0000:08:00.0", "0000:44:00.0")


def test_a_topology_list_wrapped_in_an_object_and_with_unknown_keys_reads():
    listed = json.loads(fixture("amd-smi-topology-a-t-2gpu-rocm6.1.1.json"))
    for entry in listed:
        for link in entry["links"]:
            link["future_key"] = "x"
    links = topology.parse_amd_smi_topology(json.dumps({"topology": listed}))
    assert [(link.source, link.target) for link in links] == [(0, 1), (1, 0)]


def test_the_topology_text_respaced_with_tabs_still_reads():
    text = fixture("amd-smi-topology-x8-xgmi-rocm6.1.txt").replace("  ", "\t")
    assert len(topology.parse_amd_smi_topology(text)) == 56


# --- amd-smi (the ROCm 7 summary) and the 7.0.2 accelerator profiles ----------------------------


def test_the_rocm_7_summary_gives_each_partitions_address_name_modes_and_memory():
    facts = amd_smi_views.parse_amd_smi_default(fixture("amd-smi-default-mi300x-x8-dpx-rocm7.0.2.txt"))
    assert len(facts) == 16
    assert [(f.index, f.bdf, f.compute_partition, f.memory_partition) for f in facts[:2]] == [
        (0, "0000:05:00.0", "DPX", "NPS1"),
        (1, "0000:05:00.1", "DPX", "NPS1"),  # printed N/A: the modes of the partition before it at 05:00
    ]
    assert {f.market_name for f in facts} == {"AMD Instinct MI300X"}
    assert [f.memory_bytes for f in facts[:2]] == [196592 * 1024**2, 98296 * 1024**2]


def test_the_rocm_7_summary_gives_each_gpus_temperature_power_and_uncorrectable_errors():
    first, second = amd_smi_views.parse_amd_smi_default_readings(
        fixture("amd-smi-default-mi300x-x8-dpx-rocm7.0.2.txt")
    )[:2]
    assert (first.temperature_c, first.power_w, first.ecc_uncorrectable, first.used_memory_bytes) == (
        40.0,
        142.0,
        0,
        283 * 1024**2,
    )
    assert (second.temperature_c, second.power_w, second.ecc_uncorrectable) == (None, None, 0)


def test_a_summary_row_with_a_device_id_for_a_name_or_a_cut_name_still_reads():
    text = (
        "| 0000:c2:00.0                 0x1586 | N/A        N/A   0             N/A/0 W |\n"
        "|   0       0     N/A             N/A | N/A        N/A           1013/65536 MB |\n"
        "| 0000:1b:00.0 ...Instinct MI300X OAM | N/A        N/A   0           N/A/750 W |\n"
        "|   1       0       1        SPX/NPS1 | N/A        N/A        149820/196592 MB |\n"
    )
    unnamed, cut = amd_smi_views.parse_amd_smi_default(text)
    assert (unnamed.market_name, unnamed.device_id, unnamed.compute_partition) == (None, 0x1586, None)
    assert (cut.market_name, cut.compute_partition, cut.memory_partition) == ("Instinct MI300X OAM", "SPX", "NPS1")


def test_the_7_0_2_profiles_give_each_package_its_marked_mode_and_its_second_partition_the_same():
    facts = amd_smi_views.parse_amd_smi_partition(fixture("amd-smi-partition-accelerator-mi300x-x8-dpx-rocm7.0.2.txt"))
    assert len(facts) == 16
    assert [(f.index, f.compute_partition, f.partition_id) for f in facts[:3]] == [
        (0, "DPX", 0),
        (1, "DPX", 1),
        (2, "DPX", 0),
    ]


def test_the_current_and_memory_tables_together_give_each_gpu_both_modes():
    facts = amd_smi_views.parse_amd_smi_partition(fixture("amd-smi-partition-x4-spx-nps1-rocm6.4.txt"))
    assert [(f.index, f.compute_partition, f.memory_partition, f.partition_id) for f in facts] == [
        (gpu, "SPX", "NPS1", 0) for gpu in range(4)
    ]
