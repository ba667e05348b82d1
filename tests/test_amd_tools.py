"""Parsers of AMD tool output, fed with outputs in each tool's real format, one per ROCm release that
changed it (6.0, 6.1, 6.4, 7.x), and with the broken forms real nodes print."""

from pathlib import Path

import pytest

from rocm_validate.errors import ToolOutputError
from rocm_validate.platform import amd_tools

FIXTURES = Path(__file__).parent / "fixtures" / "amd"
MIB = 1024**2


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- amd-smi static --json, by release ---------------------------------------------------------


def test_amd_smi_static_json_of_rocm_6_0_reads_the_dict_shaped_cache_table_and_vram_size_mb():
    first, second = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi300x-rocm6.0.json"))
    assert (first.l2_cache_bytes, first.last_level_cache_bytes) == (4 * MIB, 256 * MIB)
    assert first.memory_bytes == 196592 * MIB and first.driver_version == "6.3.6"  # vram_size_mb, driver_version
    assert first.compute_units is None  # ROCm 6.0 prints no CU count: rocminfo fills it
    assert first.arch == "gfx942"  # no target_graphics_version either: from the PCI device id 0x74a1
    assert (second.bdf, second.compute_partition, second.memory_partition) == ("0000:22:00.0", "SPX", "NPS1")


def test_amd_smi_static_json_of_rocm_6_1_reads_value_unit_sizes_and_the_cache_list():
    first = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi300x-rocm6.1.json"))[0]
    assert (first.memory_bytes, first.l2_cache_bytes, first.last_level_cache_bytes) == (
        196592 * MIB,
        4 * MIB,
        256 * MIB,
    )
    assert (first.driver_version, first.compute_partition, first.errors) == ("6.7.0", "SPX", ())


def test_amd_smi_static_json_of_rocm_6_4_gives_mi300x_facts():
    first = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi300x-rocm6.4.json"))[0]
    assert (first.market_name, first.arch, first.compute_units) == ("AMD Instinct MI300X", "gfx942", 304)
    assert first.memory_bytes == 196592 * MIB
    assert (first.l2_cache_bytes, first.last_level_cache_bytes) == (4 * MIB, 256 * MIB)
    assert (first.max_clock_mhz, first.max_memory_clock_mhz, first.driver_version) == (2100, 1300, "6.8.5")
    assert (first.compute_partition, first.memory_partition, first.bdf) == ("SPX", "NPS1", "0000:0c:00.0")
    assert first.partition_source == "amd-smi static --json"


def test_amd_smi_static_json_of_rocm_7_reads_gpu_data_and_accelerator_partition():
    (gpu,) = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi355x-rocm7.json"))
    assert (gpu.arch, gpu.compute_units, gpu.memory_bytes) == ("gfx950", 256, 294896 * MIB)
    assert gpu.compute_partition == "SPX"  # ROCm 7 names it accelerator_partition


def test_a_cpx_nps4_node_shows_64_partitions_with_their_modes_and_pci_functions():
    facts = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi300x-cpx-nps4-64dev.json"))
    assert len(facts) == 64
    assert {(f.compute_partition, f.memory_partition, f.compute_units) for f in facts} == {("CPX", "NPS4", 38)}
    assert [f.partition_id for f in facts[:9]] == [0, 1, 2, 3, 4, 5, 6, 7, 0]
    assert [f.bdf for f in facts[6:9]] == ["0000:0c:00.6", "0000:0c:00.7", "0000:22:00.0"]


def test_the_group_warning_before_the_json_is_skipped_and_n_a_sections_are_recorded_not_raised():
    broken, whole = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-broken-rocm6.4.json"))
    assert (broken.arch, broken.compute_units, broken.l2_cache_bytes, broken.max_clock_mhz) == (None, None, None, None)
    assert (broken.memory_bytes, broken.compute_partition) == (196592 * MIB, "SPX")  # the readable sections are kept
    assert broken.errors == (
        "amd-smi static --json: GPU 0: section 'asic' is 'N/A', not a table: unavailable",
        "amd-smi static --json: GPU 0: section 'cache_info' is 'N/A', not a table: unavailable",
        "amd-smi static --json: GPU 0: clock 'sys' is 'N/A', not a table: unavailable",
    )
    assert (whole.arch, whole.errors) == ("gfx942", ())


def test_a_section_of_an_unexpected_shape_is_unavailable_whatever_its_type():
    text = '[{"gpu": 0, "asic": ["gfx942"], "vram": 42, "partition": {"compute_partition": "N/A"}}]'
    (gpu,) = amd_tools.parse_amd_smi_static_json(text)
    assert (gpu.arch, gpu.memory_bytes, gpu.compute_partition, gpu.partition_source) == (None, None, None, None)
    assert [e.split(": ")[2].split(" is ")[0] for e in gpu.errors] == ["section 'asic'", "section 'vram'"]


@pytest.mark.parametrize(
    "text", ["", "{not json", "42", "WARNING: User is missing the following required groups: render."]
)
def test_unreadable_amd_smi_output_is_a_named_error(text):
    with pytest.raises(ToolOutputError, match="amd-smi"):
        amd_tools.parse_amd_smi_static_json(text)


def test_amd_smi_asks_only_for_the_sections_discovery_reads():
    assert amd_tools.AMD_SMI_STATIC_JSON == (
        "amd-smi",
        "static",
        "--asic",
        "--bus",
        "--vram",
        "--cache",
        "--partition",
        "--driver",
        "--clock",
        "--json",
    )


# --- amd-smi text outputs -------------------------------------------------------------------------


def test_amd_smi_static_text_reads_the_same_facts_as_its_json():
    first, second = amd_tools.parse_amd_smi_static_text(read("amd-smi-static-mi300x-rocm7.txt"))
    assert (first.arch, first.compute_units, first.memory_bytes, first.bdf) == (
        "gfx942",
        304,
        196592 * MIB,
        "0000:5c:00.0",
    )
    assert (first.l2_cache_bytes, first.last_level_cache_bytes, first.max_clock_mhz) == (4 * MIB, 256 * MIB, 2100)
    assert (first.compute_partition, first.memory_partition, first.driver_version) == ("SPX", "NPS1", "6.12.12")
    assert second.l2_cache_bytes is None
    assert second.errors == ("amd-smi static: GPU 1: section 'cache_info' is 'N/A', not a table: unavailable",)


def test_amd_smi_static_partition_text_lists_every_cpx_partition():
    facts = amd_tools.parse_amd_smi_static_text(read("amd-smi-static-partition-mi300x-cpx-nps4.txt"))
    assert len(facts) == 16 and {(f.compute_partition, f.memory_partition) for f in facts} == {("CPX", "NPS4")}
    assert [f.partition_id for f in facts[7:10]] == [7, 0, 1]


def test_amd_smi_list_gives_each_cpx_partition_its_own_pci_function():
    facts = amd_tools.parse_amd_smi_list(read("amd-smi-list-mi300x-cpx.txt"))
    assert [f.bdf for f in facts] == [f"0000:0c:00.{n}" for n in range(8)]
    assert [f.partition_id for f in facts] == list(range(8))


def test_text_without_a_gpu_block_is_a_named_error():
    with pytest.raises(ToolOutputError, match="no 'GPU: N' block"):
        amd_tools.parse_amd_smi_list("CPU: 0\n    SMU:\n        FW_VERSION: 85.90.0\n")


# --- rocm-smi -------------------------------------------------------------------------------------


def test_rocm_smi_json_turns_the_decimal_gfx9010_into_gfx90a():
    facts = amd_tools.parse_rocm_smi_json(read("rocm-smi-showproductname-mi250x.json"))
    assert [f.arch for f in facts] == ["gfx90a", "gfx90a"]
    assert facts[0].driver_version == "6.3.6"


def test_rocm_smi_json_gives_bus_memory_and_partitions_where_asked_for_them():
    first, second = amd_tools.parse_rocm_smi_json(read("rocm-smi-mi300x-rocm6.4.json"))
    assert (first.bdf, first.memory_bytes, first.arch) == ("0000:0c:00.0", 196592 * MIB, "gfx942")
    assert (second.compute_partition, second.memory_partition, second.driver_version) == ("SPX", "NPS1", "6.10.5")


def test_rocm_smi_json_of_rocm_5_has_no_gfx_version_so_the_device_id_names_the_isa():
    facts = amd_tools.parse_rocm_smi_json(read("rocm-smi-a-mi250-rocm5.json"))
    assert [(f.arch, f.bdf) for f in facts] == [("gfx90a", "0000:2f:00.0"), ("gfx90a", "0000:32:00.0")]
    assert facts[0].market_name == "AMD INSTINCT MI250 (MCM) OAM AC MBA"  # "Card series", lower-case s


def test_rocm_smi_a_text_of_an_sr_iov_guest_gives_bus_name_and_partitions():
    facts = amd_tools.parse_rocm_smi_text(read("rocm-smi-a-mi300x-sriov.txt"))
    assert [f.bdf for f in facts] == ["0000:26:00.0", "0000:46:00.0"]
    assert {(f.market_name, f.arch, f.compute_partition, f.memory_partition, f.driver_version) for f in facts} == {
        ("AMD Instinct MI300X OAM", "gfx942", "SPX", "NPS1", "6.8.5")
    }


def test_rocm_smi_showhw_lists_partitions_sharing_one_pci_address():
    facts = amd_tools.parse_rocm_smi_text(read("rocm-smi-showhw-mi300a-tpx.txt"))
    assert len(facts) == 6 and {f.arch for f in facts} == {"gfx942"}
    assert [f.partition_id for f in facts] == [0, 1, 2, 0, 1, 2]
    assert [f.bdf for f in facts[2:4]] == ["0000:01:00.0", "0001:01:00.0"]
    assert facts[0].market_name == "AMD Instinct MI300A"  # from DID 0x74a0


def test_rocm_smi_concise_table_gives_name_and_both_modes():
    facts = amd_tools.parse_rocm_smi_text(read("rocm-smi-concise-mi300x.txt"))
    assert [(f.market_name, f.arch, f.memory_partition, f.compute_partition) for f in facts] == [
        ("AMD Instinct MI300X", "gfx942", "NPS1", "SPX")
    ] * 3


def test_rocm_smi_showproduct_board_code_name_becomes_the_product_name():
    facts = amd_tools.parse_rocm_smi_text(read("rocm-smi-showproduct-mi300a.txt"))
    assert [(f.market_name, f.arch) for f in facts] == [("AMD Instinct MI300A", "gfx942")] * 2


def test_rocm_smi_text_without_any_gpu_is_a_named_error():
    with pytest.raises(ToolOutputError, match="rocm-smi"):
        amd_tools.parse_rocm_smi_text("===== ROCm System Management Interface =====\nWARNING: No AMD GPUs specified\n")


# --- rocminfo and the amdsmi package --------------------------------------------------------------


def test_rocminfo_yields_gpu_agents_with_isa_switches_caches_and_memory():
    first, second = amd_tools.parse_rocminfo(read("rocminfo-mi300x-2gpu.txt"))
    assert (first.arch, first.compute_units) == ("gfx942", 304)
    assert first.arch_features == (("sramecc", True), ("xnack", False))
    assert (first.bdf, second.bdf) == ("0000:0c:00.0", "0000:22:00.0")  # BDFID 3072 = bus 0x0c, 8704 = 0x22
    assert first.l2_cache_bytes == 32 * MIB  # rocminfo's L2 is the package's 8 XCDs together
    assert first.last_level_cache_bytes == 256 * MIB
    assert first.memory_bytes == 201310208 * 1024  # the coarse-grained global pool


def test_rocminfo_of_a_node_without_the_kernel_driver_says_to_load_it():
    with pytest.raises(ToolOutputError, match=r"ROCk module is NOT loaded.*modprobe amdgpu"):
        amd_tools.parse_rocminfo("ROCk module is NOT loaded, possibly no GPU devices")


def test_rocminfo_without_any_agent_is_a_named_error():
    with pytest.raises(ToolOutputError, match="no agent in the output"):
        amd_tools.parse_rocminfo("=====================\nHSA System Attributes\n")


def test_amdsmi_package_dicts_become_facts():
    # amdsmi_get_gpu_asic_info as an MI308X prints it (gpustack issue 4123): a cut-down part, 80 CUs
    asic = {
        "market_name": "AMD Instinct MI308X OAM",
        "vendor_id": "0x1002",
        "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
        "subvendor_id": "0x1002",
        "device_id": "0x74a2",
        "rev_id": "0x00",
        "asic_serial": "0xC027D079FACA2939",
        "oam_id": 0,
        "num_compute_units": 80,
        "target_graphics_version": "gfx942",
        "subsystem_id": "0x74a2",
    }
    cache = {"cache": [{"cache_properties": ["DATA_CACHE", "SIMD_CACHE"], "cache_size": 4096, "cache_level": 2}]}
    facts = amd_tools.facts_from_amdsmi(
        0,
        asic,
        bdf="0000:0C:00.0",
        driver={"driver_version": "6.10.5"},
        vram={"vram_size": 196592},
        cache=cache,
        clock={"clk": 132, "max_clk": 2100},
        compute_partition="SPX",
        memory_partition="NPS1",
    )
    assert (facts.arch, facts.compute_units, facts.bdf) == ("gfx942", 80, "0000:0c:00.0")
    assert (facts.memory_bytes, facts.l2_cache_bytes, facts.max_clock_mhz) == (196592 * MIB, 4 * MIB, 2100)


def test_amdsmi_dicts_of_rocm_6_0_and_6_1_are_read_by_their_old_key_names():
    asic = {"market_name": "AMD Instinct MI300X", "device_id": 0x74A1, "vendor_id": 0x1002}  # 6.0: ints, no gfx, no CUs
    cache = {
        "cache 0": {"cache_size": 32, "cache_level": 1, "data_cache": True, "instruction_cache": False},
        "cache 1": {"cache_size": 64, "cache_level": 1, "data_cache": False, "instruction_cache": True},
        "cache 2": {"cache_size": 4096, "cache_level": 2, "data_cache": True, "instruction_cache": False},
        "cache 3": {"cache_size": 262144, "cache_level": 3, "data_cache": True, "instruction_cache": False},
    }
    facts = amd_tools.facts_from_amdsmi(
        1, asic, vram={"vram_type": 7, "vram_size_mb": 196592}, cache=cache, clock={"cur_clk": 132, "max_clk": 2100}
    )
    assert (facts.arch, facts.memory_bytes, facts.max_clock_mhz) == ("gfx942", 196592 * MIB, 2100)
    assert (facts.l2_cache_bytes, facts.last_level_cache_bytes) == (4 * MIB, 256 * MIB)


def test_the_in_box_driver_fallback_string_is_named_as_such():
    assert amd_tools.driver_version("Linuxversion6.14.0-24-generic(buildd@lcy02)") == "inbox (kernel 6.14.0-24-generic)"
    assert amd_tools.driver_version("6.8.5") == "6.8.5"
    assert amd_tools.driver_version("N/A") is None


# --- matching and merging ---------------------------------------------------------------------------


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
    smi = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi300x-rocm6.0.json"))[0]
    info = amd_tools.parse_rocminfo(read("rocminfo-mi300x-2gpu.txt"))[0]
    merged = amd_tools.merge_facts(smi, info)
    assert merged.arch_features == (("sramecc", True), ("xnack", False))
    assert merged.compute_units == 304  # ROCm 6.0's amd-smi does not say; rocminfo does
    assert merged.l2_cache_bytes == 4 * MIB  # amd-smi's, not rocminfo's package-wide figure
    assert merged.driver_version == "6.3.6" and merged.source == "amd-smi static --json+rocminfo"


def test_merging_keeps_both_tools_errors_and_the_partition_with_its_source():
    broken = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-broken-rocm6.4.json"))[0]
    sysfs = amd_tools.AmdGpuFacts(
        source="sysfs", compute_partition="CPX", partition_source="sysfs", errors=("sysfs: x",)
    )
    merged = amd_tools.merge_facts(amd_tools.AmdGpuFacts(source="rocminfo"), sysfs)
    assert (merged.compute_partition, merged.partition_source) == ("CPX", "sysfs")
    assert amd_tools.merge_facts(broken, sysfs).errors == (*broken.errors, "sysfs: x")


def test_amd_smi_list_as_json_gives_the_same_facts_as_its_text():
    text = '[{"gpu": 0, "bdf": "0000:05:00.0", "uuid": "75ff75a3-0000-1000-80e3-fd74aab3f72c", "partition_id": 0}]'
    (gpu,) = amd_tools.parse_amd_smi_list(text)
    assert (gpu.bdf, gpu.device_id, gpu.arch, gpu.market_name) == (
        "0000:05:00.0",
        0x75A3,
        "gfx950",
        "AMD Instinct MI355X",
    )


def test_the_device_id_in_amd_smis_uuid_is_read_and_a_foreign_uuid_is_not():
    assert amd_tools.device_id_of_uuid("9fff74b9-0000-1000-8044-4a2fb30adeb0") == 0x74B9
    assert amd_tools.device_id_of_uuid("GPU-9f444a2fb30adeb0") is None


def test_the_concise_table_of_rocm_6_1_reads_the_model_and_the_name_under_it():
    text = read("rocm-smi-concise-mi300x.txt").replace("0x74a1", "0x74b5")
    facts = amd_tools.parse_rocm_smi_text(text)
    assert {(f.device_id, f.market_name, f.compute_partition) for f in facts} == {
        (0x74B5, "AMD Instinct MI300X", "SPX")
    }


def test_the_concise_table_of_rocm_5_counts_gpus_without_naming_them():
    text = (
        "================================= Concise Info =================================\n"
        "GPU  Temp (DieEdge)  AvgPwr  SCLK    MCLK     Fan  Perf  PwrCap  VRAM%  GPU%  \n"
        "0    33.0c           39.0W   800Mhz  1600Mhz  0%   auto  560.0W    0%   0%    \n"
        "1    35.0c           41.0W   800Mhz  1600Mhz  0%   auto  560.0W    0%   0%    \n"
        "============================= End of ROCm SMI Log ==============================\n"
    )
    assert [(f.index, f.device_id) for f in amd_tools.parse_rocm_smi_text(text)] == [(0, None), (1, None)]


def test_rows_outside_a_concise_table_are_not_read_as_gpus():
    text = "KFD process information:\nPID    \tPROCESS NAME\tGPU(s)\n1058463\t<daemon>     \t0     \t0\n"
    with pytest.raises(ToolOutputError, match="no GPU line"):
        amd_tools.parse_rocm_smi_text(text)


def test_colour_codes_and_crlf_are_cleaned_from_a_saved_output():
    assert amd_tools.clean_text("\x1b[37mROCk module version 6.3.6 is loaded\x1b[0m\r\nx\r") == (
        "ROCk module version 6.3.6 is loaded\nx\n"
    )
    assert amd_tools.clean_text("^[[37mROCk^[[0m") == "ROCk"


def test_a_rocminfo_agent_with_a_condensed_pool_line_has_its_memory():
    text = (
        "Agent 2\n  Name: gfx942\n  Device Type: GPU\n  Pool Info:\n    Pool 1: GLOBAL; COARSE GRAINED   268419072 KB\n"
    )
    (gpu,) = amd_tools.parse_rocminfo(text)
    assert gpu.memory_bytes == 268419072 * 1024


def test_a_fine_grained_pool_is_not_taken_for_device_memory():
    text = "Agent 2\n  Name: gfx942\n  Device Type: GPU\n    Pool 1: GLOBAL; EXTENDED FINE GRAINED   4 KB\n"
    assert amd_tools.parse_rocminfo(text)[0].memory_bytes is None


def test_saved_listings_with_no_address_in_common_are_not_paired_by_order():
    facts = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi300x-rocm6.4.json"))
    assert amd_tools.match_facts(["0000:aa:00.0", "0000:bb:00.0"], facts) == [None, None]


def test_torch_and_a_tool_read_on_one_node_fall_back_to_order_when_the_counts_agree():
    facts = amd_tools.parse_amd_smi_static_json(read("amd-smi-static-mi300x-rocm6.4.json"))
    assert amd_tools.match_facts(["0000:aa:00.0", "0000:bb:00.0"], facts, same_node=True) == facts


def test_a_card_series_printed_as_a_device_id_names_the_product_from_the_table():
    (card,) = amd_tools.parse_rocm_smi_text("GPU[0]\t\t: Card series: \t\t0x740f\n")
    assert (card.market_name, card.arch, card.device_id) == ("AMD Instinct MI210", "gfx90a", 0x740F)
    assert card.derived == ("name", "arch")


def test_a_printed_name_is_not_marked_derived_and_wins_over_a_derived_one():
    derived = amd_tools.AmdGpuFacts(
        "amd-smi list", market_name="AMD Instinct MI300X", arch="gfx942", derived=("name", "arch")
    )
    printed = amd_tools.AmdGpuFacts("rocminfo", market_name="AMD Instinct MI300X OAM", arch="gfx942")
    merged = amd_tools.merge_facts(derived, printed)
    assert (merged.market_name, merged.derived) == ("AMD Instinct MI300X OAM", ())


@pytest.mark.parametrize(
    "prompt",
    ["[root@node01 ~]# amd-smi list --json", "user@node01:~$ amd-smi list --json", "$ amd-smi list --json"],
)
def test_a_shell_prompt_pasted_before_the_json_is_not_read_as_the_json(prompt):
    document = '[{"gpu": 0, "bdf": "0000:05:00.0", "uuid": "afff74a1-0000-1000-8054-e92b0a5d57c8"}]'
    (gpu,) = amd_tools.parse_amd_smi_list(f"{prompt}\n{document}\n[root@node01 ~]#\n")
    assert (gpu.bdf, gpu.device_id) == ("0000:05:00.0", 0x74A1)


def test_a_json_paste_of_only_a_prompt_and_a_warning_says_no_json_was_printed():
    # rocm-smi's answer to --showrasinfo --json (ROCm/legacy-rocm-build#4374)
    text = "[root@vipa1278 ~]# rocm-smi --json --showrasinfo \nWARNING: No JSON data to report\n[root@vipa1278 ~]# \n"
    with pytest.raises(ToolOutputError, match="printed no JSON"):
        amd_tools.parse_rocm_smi_json(text)


def test_a_json_list_or_object_is_still_json_after_a_prompt_line_that_is_not():
    assert amd_tools.looks_like_json('WARNING: User is missing the render group\n[{"gpu": 0}]')
    assert amd_tools.looks_like_json('$ amd-smi metric --json\n{"gpu_data": []}')
    assert not amd_tools.looks_like_json("[root@node ~]# amd-smi list\nGPU: 0\n    BDF: 0000:05:00.0\n")
