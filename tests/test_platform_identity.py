"""Product identity: the PCI device ID first (pci.ids), the CU count where one ID covers several
products, the name last; one device key per product, partition and memory mode."""

from __future__ import annotations

import pytest

from rocm_validate.platform import identity


@pytest.mark.parametrize(
    ("device_id", "product"),
    [
        ("0x74a1", "AMD Instinct MI300X"),
        ("0x74A5", "AMD Instinct MI325X"),
        ("0x74a2", "AMD Instinct MI308X"),
        ("0x74a0", "AMD Instinct MI300A"),
        ("0x75a0", "AMD Instinct MI350X"),
        ("0x75A3", "AMD Instinct MI355X"),
        ("0x740f", "AMD Instinct MI210"),
        ("0x7408", "AMD Instinct MI250X"),
        (29857, "AMD Instinct MI300X"),  # rocminfo's decimal Chip ID
    ],
)
def test_a_pci_device_id_names_its_product(device_id, product):
    who = identity.identify(device_id)
    assert who.product is not None and who.product.name == product


@pytest.mark.parametrize(
    ("device_id", "name"), [("0x74b5", "AMD Instinct MI300X VF"), ("0x74b9", "AMD Instinct MI325X VF")]
)
def test_a_virtual_function_is_its_physical_product_and_says_so(device_id, name):
    who = identity.identify(device_id)
    assert who.virtual_function and who.name == name
    assert who.product in (identity.MI300X, identity.MI325X)


@pytest.mark.parametrize(("units", "product"), [(104, identity.MI250), (110, identity.MI250X)])
def test_one_id_of_two_products_is_split_by_the_cu_count(units, product):
    assert identity.identify("0x740c", "AMD Instinct MI250X/MI250", "gfx90a", units).product is product


def test_one_id_of_two_products_without_a_cu_count_stays_open_and_says_why():
    who = identity.identify("0x740c", "AMD Instinct MI250X/MI250", "gfx90a")
    assert who.product is None and who.arch == "gfx90a"
    assert who.problem is not None and "AMD Instinct MI250X or AMD Instinct MI250" in who.problem


@pytest.mark.parametrize(("units", "product"), [(96, identity.RX_7900_XTX), (84, identity.RX_7900_XT)])
def test_radeon_rx_7900_cards_sharing_an_id_are_told_apart_by_their_cus(units, product):
    assert identity.identify("0x744c", None, "gfx1100", units).product is product


@pytest.mark.parametrize(
    ("name", "arch", "product"),
    [
        ("AMD Instinct MI350 OAM", "gfx950", identity.MI350X),  # the board name amd-smi prints without libdrm
        ("AMD Instinct Mi325X VF", "gfx942", identity.MI325X),
        ("Aqua Vanjaram [Instinct MI300A]", None, identity.MI300A),
        ("Radeon RX 7900 XTX", "gfx1100", identity.RX_7900_XTX),
        ("AMD Instinct MI300A", "gfx940", identity.MI300A),  # the A0 engineering sample
    ],
)
def test_without_an_id_the_name_decides(name, arch, product):
    assert identity.identify(None, name, arch).product is product


def test_a_name_does_not_borrow_a_variants_identity():
    assert identity.identify(None, "AMD Instinct MI300X").product is identity.MI300X  # not the MI300X HF
    assert identity.identify(None, "AMD Instinct MI300X HF").product is identity.MI300X_HF


def test_a_name_whose_isa_contradicts_it_names_nothing():
    assert identity.identify(None, "AMD Instinct MI300X", "gfx950").product is None


def test_an_id_and_a_printed_isa_that_disagree_are_said_to():
    who = identity.identify("0x74a1", None, "gfx90a")
    assert who.product is identity.MI300X and "printed gfx90a" in (who.problem or "")


@pytest.mark.parametrize("garbage", ["N/A", "", None, "0xZZZZ", "0x1234", True])
def test_an_unknown_or_unreadable_id_names_no_product(garbage):
    assert identity.pci_device(garbage) is None


def test_every_listed_id_is_a_product_of_an_amd_isa():
    for number, entry in identity.PCI_DEVICES.items():
        assert 0x6000 <= number <= 0x7FFF and entry.products
        assert all(p.arch.startswith("gfx") for p in entry.products)


def test_one_key_per_product_whichever_name_a_tool_printed():
    keys = {
        identity.product_key(identity.identify(device_id, name, "gfx950").product, "gfx950", "DPX", "NPS1")
        for device_id, name in [
            ("0x75a0", "AMD Instinct MI350X"),
            ("0x75a0", "AMD Instinct MI350 OAM"),
            (None, "MI350 OAM"),
        ]
    }
    assert keys == {"amd-instinct-mi350x-gfx950-dpx"}


def test_the_keys_earlier_names_made_are_kept_as_aliases():
    aliases = identity.legacy_keys(identity.MI350X, "gfx950", "DPX", None)
    assert "amd-instinct-mi350-oam-gfx950-dpx" in aliases
    assert "amd-instinct-mi350x-gfx950-dpx" not in aliases  # the canonical key is not its own alias


def test_the_keys_of_products_with_committed_baselines_do_not_change():
    assert identity.product_key(identity.MI300X, "gfx942", "SPX", "NPS1") == "amd-instinct-mi300x-gfx942"
    assert identity.product_key(identity.MI355X, "gfx950", None, None) == "amd-instinct-mi355x-gfx950"


@pytest.mark.parametrize(
    ("product", "partitions", "reported", "share"),
    [
        (identity.MI300X, 8, 206141652992, 206141652992 // 8),  # rocm-smi's package figure in CPX
        (identity.MI300X, 8, 25767706624, 25767706624),  # the partition's own figure is kept
        (identity.MI300A, 3, 33580773376, 33580773376),  # MI300A partitions print their own share
        (identity.MI300X, 1, 206141652992, 206141652992),
    ],
)
def test_a_partition_gets_its_share_only_where_a_tool_printed_the_package(product, partitions, reported, share):
    assert identity.partition_memory(product, partitions, reported) == share


def test_only_parts_with_a_virtual_function_have_a_vf_key_among_their_aliases():
    assert "amd-instinct-mi300x-vf-gfx942" in identity.legacy_keys(identity.MI300X, "gfx942", None, None)
    assert not any("-vf-" in key for key in identity.legacy_keys(identity.MI210, "gfx90a", None, None))


def test_an_engineering_samples_isa_and_its_products_are_one_silicon_and_other_isas_are_not():
    assert identity.same_silicon("gfx940", "gfx942") and identity.same_silicon("gfx9010", "gfx90a")
    assert not identity.same_silicon("gfx90a", "gfx942")


@pytest.mark.parametrize(
    ("units", "name", "product"), [(64, None, "AMD Radeon Instinct MI60"), (60, None, "AMD Radeon Instinct MI50")]
)
def test_vega_20_ids_name_gfx906_and_the_cus_or_name_split_them(units, name, product):
    who = identity.identify("0x66a0", name, None, units)
    assert (who.arch, who.product.name if who.product else None) == ("gfx906", product)


def test_a_vega_20_sharing_its_id_with_a_pro_vii_is_told_apart_by_its_name():
    who = identity.identify("0x66a1", "Radeon Instinct MI50 32GB", None, 60)
    assert (who.product.name if who.product else None, who.arch) == ("AMD Radeon Instinct MI50", "gfx906")


def test_an_mi60_under_0x66a1_is_told_by_its_cus():
    who = identity.identify("0x66a1", None, None, 64)
    assert who.product is not None and who.product.name == "AMD Radeon Instinct MI60"


def test_a_name_that_names_two_products_names_neither_even_if_the_id_lists_one():
    # amd-smi's market name for 0x66a1 (gpustack/gpustack#3509)
    who = identity.identify("0x66a1", "AMD Instinct MI60 / MI50", "gfx906", None)
    assert who.product is None and who.arch == "gfx906"
    assert "does not tell which" in (who.problem or "")
