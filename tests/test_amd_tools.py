"""Parsers of AMD tool output, fed with outputs in each tool's real format."""

from pathlib import Path

import pytest

from rocm_validate.errors import ToolOutputError
from rocm_validate.platform import amd_tools

FIXTURES = Path(__file__).parent / "fixtures" / "amd"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_amd_smi_static_json_of_rocm_6_4_gives_mi300x_facts():
    first = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi300x-rocm6.4.json"))[0]
    assert (first.market_name, first.arch, first.compute_units) == ("AMD Instinct MI300X", "gfx942", 304)
    assert first.memory_bytes == 196592 * 1024**2
    assert (first.l2_cache_bytes, first.last_level_cache_bytes) == (4 * 1024**2, 256 * 1024**2)
    assert (first.max_clock_mhz, first.driver_version) == (2100, "6.8.5")
    assert (first.compute_partition, first.memory_partition, first.bdf) == ("SPX", "NPS1", "0000:0c:00.0")


def test_amd_smi_static_json_of_rocm_7_reads_value_unit_quantities():
    (gpu,) = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi355x-rocm7.json"))
    assert (gpu.arch, gpu.memory_bytes) == ("gfx950", 294896 * 1024**2)
    assert gpu.compute_partition == "SPX"  # ROCm 7 names it accelerator_partition


def test_a_cpx_nps4_node_shows_64_partitions_with_their_modes():
    facts = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi300x-cpx-nps4-64dev.json"))
    assert len(facts) == 64
    assert {(f.compute_partition, f.memory_partition) for f in facts} == {("CPX", "NPS4")}
    assert [f.partition_id for f in facts[:9]] == [0, 1, 2, 3, 4, 5, 6, 7, 0]


def test_rocm_smi_json_turns_the_decimal_gfx9010_into_gfx90a():
    facts = amd_tools.parse_rocm_smi_json(read("rocm-smi-showproductname-mi250x.json"))
    assert [f.arch for f in facts] == ["gfx90a", "gfx90a"]
    assert facts[0].driver_version == "6.3.6"


def test_rocminfo_yields_gpu_agents_with_isa_switches_and_caches():
    (gpu,) = amd_tools.parse_rocminfo(read("rocminfo-mi300x-1gpu.txt"))
    assert gpu.arch == "gfx942"
    assert gpu.arch_features == (("sramecc", True), ("xnack", False))
    assert gpu.bdf == "0000:0c:00.0"  # BDFID 3072 = bus 0x0c
    assert gpu.last_level_cache_bytes == 256 * 1024**2


def test_amdsmi_package_dicts_become_facts():
    asic = {
        "market_name": "AMD Instinct MI308X OAM",
        "vendor_id": "0x1002",
        "device_id": "0x74a2",
        "num_compute_units": 80,
        "target_graphics_version": "gfx942",
    }
    cache = {"cache": [{"cache_properties": ["DATA_CACHE"], "cache_size": 4096, "cache_level": 2}]}
    facts = amd_tools.facts_from_amdsmi(
        0, asic, bdf="0000:0C:00.0", driver={"driver_version": "6.10.5"}, vram={"vram_size": 196592}, cache=cache,
        clock={"max_clk": 2100}, compute_partition="SPX", memory_partition="NPS1",
    )
    assert (facts.arch, facts.compute_units, facts.bdf) == ("gfx942", 80, "0000:0c:00.0")
    assert (facts.memory_bytes, facts.l2_cache_bytes, facts.max_clock_mhz) == (196592 * 1024**2, 4 * 1024**2, 2100)


def test_the_in_box_driver_fallback_string_is_named_as_such():
    assert amd_tools.driver_version("Linuxversion6.14.0-24-generic(buildd@lcy02)") == "inbox (kernel 6.14.0-24-generic)"
    assert amd_tools.driver_version("6.8.5") == "6.8.5"
    assert amd_tools.driver_version("N/A") is None


@pytest.mark.parametrize("text", ["", "{not json", "42"])
def test_unreadable_amd_smi_output_is_a_named_error(text):
    with pytest.raises(ToolOutputError, match="amd-smi"):
        amd_tools.parse_amd_smi_static_json(text)


def test_rocminfo_without_agents_is_a_named_error():
    with pytest.raises(ToolOutputError, match="HSA Agents"):
        amd_tools.parse_rocminfo("ROCk module is NOT loaded")


def test_partitions_sharing_a_pci_device_are_matched_in_order():
    facts = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi300x-cpx-nps4-64dev.json"))
    torch_bdfs = [f"0000:{f.bdf.split(':')[1]}:00.0" for f in facts]  # torch has no PCI function
    matched = amd_tools.match_facts(torch_bdfs, facts)
    assert matched == facts


def test_a_visibility_mask_matches_by_pci_address_not_by_position():
    facts = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi300x-rocm6.4.json"))
    matched = amd_tools.match_facts(["0000:22:00.0"], facts)  # HIP_VISIBLE_DEVICES=1
    assert matched == [facts[1]]


def test_without_pci_addresses_facts_are_paired_only_when_the_counts_agree():
    facts = amd_tools.parse_rocm_smi_json(read("rocm-smi-showproductname-mi250x.json"))
    assert amd_tools.match_facts([None, None], facts) == facts
    assert amd_tools.match_facts([None], facts) == [None]


def test_merging_fills_gaps_and_keeps_the_primary_values():
    smi = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi300x-rocm6.4.json"))[0]
    info = amd_tools.parse_rocminfo(read("rocminfo-mi300x-1gpu.txt"))[0]
    merged = amd_tools.merge_facts(smi, info)
    assert merged.arch_features == (("sramecc", True), ("xnack", False))
    assert merged.driver_version == "6.8.5" and merged.source == "amd-smi static --json+rocminfo"
