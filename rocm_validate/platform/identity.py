"""Which product a GPU is, from its PCI device ID first and its name last: one identity, and one
device key, per product, whichever tool or ROCm release described it.

Tools name one part many ways ("AMD Instinct MI350X" from amd-smi with libdrm, "AMD Instinct
MI350 OAM" without it, "Aqua Vanjaram [Instinct MI300A]" from rocm-smi, no name at all in the
concise table of ROCm 6.3+), but every one of them prints, or can be made to print, the PCI
device ID. So the ID decides (`PCI_DEVICES`, each entry from the pci.ids database); where one ID
covers several products (0x740c is an MI250X or an MI250 GCD, 0x744c four Radeon RX 7900 cards)
the CU count splits them, then the name. A name is read only where no ID was printed.

Pure functions of discovered facts; live discovery (`devices.py`) and offline discovery
(`offline.py`) both call `identify`, so a node described either way gets the same key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rocm_validate.platform.arch import device_key, normalize_gfx

# pci.ids, the PCI ID database lspci reads (github.com/pciutils/pciids, pci.ids, vendor 1002,
# as of commit c1c12547d626ebf05fd0223144ad87fab5e95d06, 2026-08-22).
PCI_IDS_SOURCE = "pci.ids (pciutils/pciids@c1c12547), vendor 1002"


@dataclass(frozen=True)
class Product:
    """One product as PyTorch sees it: per GCD on MI200 (two devices per package), per package on MI300."""

    name: str  # the canonical name: the datasheet's, as ROCm's own marketing name prints it
    arch: str  # the ISA of production parts
    compute_units: int | None  # CUs of one device (the whole package on MI300, one GCD on MI200)
    memory_gib: float | None  # device memory as the datasheet gives it (GB of HBM / GDDR)
    other_names: tuple[str, ...] = ()  # what tools also print for it; the keys they made are aliases
    early_archs: tuple[str, ...] = ()  # ISAs of engineering samples (MI300A A0 is gfx940)

    @property
    def archs(self) -> tuple[str, ...]:
        return (self.arch, *self.early_archs)


def _product(name: str, arch: str, cus: int | None, gib: float | None, *others: str, early: tuple[str, ...] = ()):
    return Product(name, arch, cus, gib, tuple(others), early)


MI300X = _product("AMD Instinct MI300X", "gfx942", 304, 192, "AMD Instinct MI300X OAM", early=("gfx941",))
MI325X = _product("AMD Instinct MI325X", "gfx942", 304, 256, "AMD Instinct MI325X OAM", "AMD Instinct MI325 OAM")
MI300A = _product("AMD Instinct MI300A", "gfx942", 228, 128, "AMD Instinct MI300A OAM", early=("gfx940",))
MI308X = _product("AMD Instinct MI308X", "gfx942", 80, 192, "AMD Instinct MI308X OAM")
MI300X_HF = _product("AMD Instinct MI300X HF", "gfx942", None, None)
MI350X = _product("AMD Instinct MI350X", "gfx950", 256, 288, "AMD Instinct MI350 OAM", "AMD Instinct MI350X OAM")
MI355X = _product("AMD Instinct MI355X", "gfx950", 256, 288, "AMD Instinct MI355 OAM", "AMD Instinct MI355X OAM")
MI250X = _product("AMD Instinct MI250X", "gfx90a", 110, 64, "AMD Instinct MI250X/MI250")
MI250 = _product("AMD Instinct MI250", "gfx90a", 104, 64, "AMD Instinct MI250X/MI250")
MI210 = _product("AMD Instinct MI210", "gfx90a", 104, 64)
MI100 = _product("AMD Instinct MI100", "gfx908", 120, 32)
# MI50 came with 16 GB and 32 GB of HBM2, and a 32 GB card has been seen under either ID (pci.ids names
# 0x66a1 'MI50 32GB', yet lspci reports of 32 GB MI50s show 0x66a0): no one memory size for the product.
MI50 = _product("AMD Radeon Instinct MI50", "gfx906", 60, None, "AMD Instinct MI50", "Radeon Instinct MI50")
MI60 = _product("AMD Radeon Instinct MI60", "gfx906", 64, 32, "AMD Instinct MI60", "Radeon Instinct MI60")
PRO_VII = _product("AMD Radeon Pro VII", "gfx906", 60, 16, "Radeon Pro VII")
RX_7900_XTX = _product("AMD Radeon RX 7900 XTX", "gfx1100", 96, 24, "Radeon RX 7900 XTX")
RX_7900_XT = _product("AMD Radeon RX 7900 XT", "gfx1100", 84, 20, "Radeon RX 7900 XT")
RX_7900_GRE = _product("AMD Radeon RX 7900 GRE", "gfx1100", 80, 16, "Radeon RX 7900 GRE")
PRO_W7900 = _product("AMD Radeon PRO W7900", "gfx1100", 96, 48, "AMD Radeon Pro W7900")
PRO_W7800 = _product("AMD Radeon PRO W7800", "gfx1100", 70, 32, "AMD Radeon Pro W7800")
RX_9070_XT = _product("AMD Radeon RX 9070 XT", "gfx1201", 64, 16, "Radeon RX 9070 XT")
RX_9070 = _product("AMD Radeon RX 9070", "gfx1201", 56, 16, "Radeon RX 9070")
RX_9070_GRE = _product("AMD Radeon RX 9070 GRE", "gfx1201", 48, 12, "Radeon RX 9070 GRE")
AI_PRO_R9700 = _product("AMD Radeon AI PRO R9700", "gfx1201", 64, 32)
RX_9060_XT = _product("AMD Radeon RX 9060 XT", "gfx1200", 32, 16, "Radeon RX 9060 XT")

PRODUCTS: tuple[Product, ...] = (
    MI300X,
    MI325X,
    MI300A,
    MI308X,
    MI300X_HF,
    MI350X,
    MI355X,
    MI250X,
    MI250,
    MI210,
    MI100,
    MI50,
    MI60,
    PRO_VII,
    RX_7900_XTX,
    RX_7900_XT,
    RX_7900_GRE,
    PRO_W7900,
    PRO_W7800,
    RX_9070_XT,
    RX_9070,
    RX_9070_GRE,
    AI_PRO_R9700,
    RX_9060_XT,
)


@dataclass(frozen=True)
class PciDevice:
    """One PCI device ID of pci.ids: the products it can be (several where the database lists
    several under one ID) and whether it is a virtual function (an SR-IOV guest's view)."""

    label: str  # the database's own text, quoted in messages
    products: tuple[Product, ...]
    virtual_function: bool = False


PCI_DEVICES: dict[int, PciDevice] = {
    0x66A0: PciDevice("Vega 20 [Radeon Pro/Radeon Instinct]", (MI50, MI60)),
    # amd-smi names 0x66a1 "AMD Instinct MI60 / MI50" (gpustack/gpustack#3509) and MI60 cards report it
    # (akash-network/provider-configs#40), beyond pci.ids' label: MI60 is a candidate too.
    0x66A1: PciDevice("Vega 20 [Radeon Pro VII/Radeon Instinct MI50 32GB]", (MI50, MI60, PRO_VII)),
    0x738C: PciDevice("Arcturus GL-XL [Instinct MI100]", (MI100,)),
    0x738E: PciDevice("Arcturus GL-XL [Instinct MI100]", (MI100,)),
    0x7408: PciDevice("Aldebaran/MI200 [Instinct MI250X]", (MI250X,)),
    0x740C: PciDevice("Aldebaran/MI200 [Instinct MI250X/MI250]", (MI250X, MI250)),
    0x740F: PciDevice("Aldebaran/MI200 [Instinct MI210]", (MI210,)),
    0x7448: PciDevice("Navi 31 [Radeon Pro W7900]", (PRO_W7900,)),
    0x744C: PciDevice("Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]", (RX_7900_XTX, RX_7900_XT, RX_7900_GRE)),
    0x745E: PciDevice("Navi 31 [Radeon Pro W7800]", (PRO_W7800,)),
    0x74A0: PciDevice("Aqua Vanjaram [Instinct MI300A]", (MI300A,)),
    0x74A1: PciDevice("Aqua Vanjaram [Instinct MI300X]", (MI300X,)),
    0x74A2: PciDevice("Aqua Vanjaram [Instinct MI308X]", (MI308X,)),
    0x74A5: PciDevice("Aqua Vanjaram [Instinct MI325X]", (MI325X,)),
    0x74A9: PciDevice("Aqua Vanjaram [Instinct MI300X HF]", (MI300X_HF,)),
    0x74B5: PciDevice("Aqua Vanjaram [Instinct MI300X VF]", (MI300X,), virtual_function=True),
    0x74B9: PciDevice("Aqua Vanjaram [Instinct MI325X VF]", (MI325X,), virtual_function=True),
    0x74BD: PciDevice("Aqua Vanjaram [Instinct MI300X HF]", (MI300X_HF,)),
    0x7550: PciDevice("Navi 48 [Radeon RX 9070/9070 XT/9070 GRE]", (RX_9070_XT, RX_9070, RX_9070_GRE)),
    0x7551: PciDevice("Navi 48 [Radeon AI PRO R9700]", (AI_PRO_R9700,)),
    0x7590: PciDevice("Navi 44 [Radeon RX 9050 / 9060 XT]", (RX_9060_XT,)),
    0x75A0: PciDevice("Aqua Vanjaram [Instinct MI350X]", (MI350X,)),
    0x75A3: PciDevice("Aqua Vanjaram [Instinct MI355X]", (MI355X,)),
}


@dataclass(frozen=True)
class Identity:
    """What a GPU is, and what said so."""

    product: Product | None
    arch: str | None  # the ISA the evidence implies (the product's, or the ID's where the product is open)
    evidence: str  # "PCI device 0x74a1", "PCI device 0x740c and 104 CUs", "name 'AMD Instinct MI350 OAM'"
    virtual_function: bool = False
    problem: str | None = None  # an ambiguity or a contradiction, said in full

    family: str | None = None  # what the PCI ID names where it covers several products ('AMD Instinct MI250X/MI250')

    @property
    def name(self) -> str | None:
        """The name to show: the product's, ' VF' added for a virtual function; else the ID's family."""
        if self.product is None:
            return self.family
        return self.product.name + (" VF" if self.virtual_function else "")


def pci_id(value: object) -> int | None:
    """'0x74a1', '0x74A1', '74a1', 29857 -> 0x74a1; None for 'N/A' or garbage."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip().lower()
    if text.startswith("0x"):
        text = text[2:]
    return int(text, 16) if re.fullmatch(r"[0-9a-f]{1,4}", text) else None


def pci_device(device_id: object) -> PciDevice | None:
    """The pci.ids entry of an AMD device ID; None where the database (as tabled here) has none."""
    number = pci_id(device_id)
    return None if number is None else PCI_DEVICES.get(number)


def identify(
    device_id: object = None,
    name: str | None = None,
    arch: str | None = None,
    compute_units: int | None = None,
    subsystem_id: object = None,
) -> Identity:
    """The product a GPU is: by its PCI device ID (a virtual function's subsystem ID names its
    physical part), the CU count where one ID covers several products, the name last."""
    entry = pci_device(device_id) or _physical_of_subsystem(device_id, subsystem_id)
    if entry is not None:
        return _by_pci_entry(entry, pci_id(device_id) or 0, name, arch, compute_units)
    return _by_name(name, arch, compute_units)


def _physical_of_subsystem(device_id: object, subsystem_id: object) -> PciDevice | None:
    """An unlisted ID whose subsystem ID is a listed part: a VF or board variant of that part."""
    if pci_id(device_id) is None:
        return None
    return pci_device(subsystem_id)


def _by_pci_entry(
    entry: PciDevice, number: int, name: str | None, arch: str | None, compute_units: int | None
) -> Identity:
    evidence = f"PCI device {number:#06x} ({entry.label})"
    candidates = entry.products
    if len(candidates) > 1 and compute_units:
        by_units = tuple(p for p in candidates if p.compute_units == compute_units)
        candidates, evidence = by_units or candidates, f"{evidence} and {compute_units} CUs"
    if len(candidates) > 1 and name:
        named = tuple(p for p in candidates if _names_only(p, candidates, name))
        candidates, evidence = (named, f"{evidence} and the name {name!r}") if named else (candidates, evidence)
    product = candidates[0] if len(candidates) == 1 else None
    problem = None
    if product is None:
        choices = " or ".join(p.name for p in candidates)
        problem = (
            f"{evidence} is {choices}, and {'the CU count' if not compute_units else f'{compute_units} CUs'} "
            "does not tell which; the device keeps the tools' name and no datasheet peaks"
        )
    elif arch and normalize_gfx(arch) not in product.archs and arch != "unknown":
        problem = f"{evidence} is {product.name} ({product.arch}), but the tool printed {arch}"
    family_arch = product.arch if product else candidates[0].arch
    return Identity(product, family_arch, evidence, entry.virtual_function, problem, _family(entry))


def _family(entry: PciDevice) -> str | None:
    """'Aldebaran/MI200 [Instinct MI250X/MI250]' -> 'AMD Instinct MI250X/MI250' (ROCm's own name for 0x740c)."""
    bracket = re.search(r"\[([^\]]+)\]", entry.label)
    return f"AMD {bracket.group(1)}" if bracket else None


def _names_only(product: Product, candidates: tuple[Product, ...], name: str) -> bool:
    """Whether `name` names `product` and nothing else ('MI250X/MI250' names both, 'MI60 / MI50'
    names an MI60 too, whether or not the ID's candidates list it)."""
    mentioned = [p for p in candidates if _model(p.name) in _models(name)]
    return mentioned == [product] and set(_models(name)) == {_model(product.name)}


_MODEL_RE = re.compile(
    r"\b(MI\d{2,3}[A-Z]?|RX\s?\d{4}(?:\s?(?:XTX|XT|GRE))?|W\d{4}|R\d{4}|Pro\s?VII)\b",
    re.IGNORECASE,
)


def _model(text: str) -> str:
    models = _models(text)
    return models[0] if models else ""


def _models(text: str) -> list[str]:
    """'AMD Instinct MI250X/MI250' -> ['MI250X', 'MI250']; 'Radeon RX 7900 XTX' -> ['RX7900XTX'];
    pci.ids' 'Radeon RX 7900 XT/7900 XTX/7900M' -> ['RX7900XT', 'RX7900XTX'] (each model after a
    slash keeps the 'RX' of the first)."""
    if re.search(r"\bRX\s?\d{4}", text, re.IGNORECASE):
        text = re.sub(r"/\s*(?=\d{4})", "/RX ", text)
    return [re.sub(r"\s", "", m).upper() for m in _MODEL_RE.findall(text)]


def _qualifiers(product_name: str) -> set[str]:
    """The words after the model that set a product apart: {'HF'} for 'AMD Instinct MI300X HF'."""
    tail = _MODEL_RE.split(product_name, maxsplit=1)[-1]
    return set(re.findall(r"[A-Z0-9]+", tail.upper()))


def _by_name(name: str | None, arch: str | None, compute_units: int | None) -> Identity:
    """The product a tool's name denotes, when no PCI device ID was printed: 'MI350 OAM' is the
    MI350X's board name, 'Mi325X VF' the MI325X; an ISA printed beside it must agree."""
    if not name:
        return Identity(None, None, "no PCI device ID and no name")
    models = _models(name)
    isa = normalize_gfx(arch) if arch else None
    words = set(re.findall(r"[A-Z0-9]+", name.upper()))
    matches = [
        p
        for p in PRODUCTS
        if (_model(p.name) in models and _qualifiers(p.name) <= words)
        or any(_model(other) in models for other in p.other_names if "/" not in other)
    ]
    if isa and isa != "unknown":
        matches = [p for p in matches if isa in p.archs]
    if len(matches) > 1:  # 'MI300X HF' names the HF part, not the MI300X it also mentions
        most = max(len(_qualifiers(p.name)) for p in matches)
        matches = [p for p in matches if len(_qualifiers(p.name)) == most]
    if len(matches) > 1 and compute_units:
        matches = [p for p in matches if p.compute_units == compute_units] or matches
    if len(matches) != 1:
        return Identity(None, None, f"the name {name!r}")
    product = matches[0]
    virtual = bool(re.search(r"\bVF\b", name, re.IGNORECASE))
    return Identity(product, product.arch, f"the name {name!r}", virtual)


def same_silicon(arch_a: str, arch_b: str) -> bool:
    """Whether two printed ISAs can be one GPU: equal, or a product's production and engineering
    ISAs (an MI300A A0 is gfx940 to rocminfo and gfx942 to a tool that reads its device ID)."""
    a, b = normalize_gfx(arch_a), normalize_gfx(arch_b)
    return a == b or any(a in p.archs and b in p.archs for p in PRODUCTS)


def product_key(product: Product, arch: str, compute_partition: str | None, memory_partition: str | None) -> str:
    """The one device key of a product in a partition and memory mode, whichever tool named it."""
    return device_key("rocm", product.name, arch, compute_partition, memory_partition)


def legacy_keys(
    product: Product,
    arch: str,
    compute_partition: str | None,
    memory_partition: str | None,
    tool_names: tuple[str, ...] = (),
) -> tuple[str, ...]:
    """The keys earlier releases gave this device from the names tools printed for it ('AMD
    Instinct MI350 OAM' made amd-instinct-mi350-oam-gfx950): baselines stored under them stay readable."""
    canonical = product_key(product, arch, compute_partition, memory_partition)
    has_vf = any(e.virtual_function and product in e.products for e in PCI_DEVICES.values())
    names = (*product.other_names, *tool_names, *([product.name + " VF"] if has_vf else []))
    keys = (device_key("rocm", name, arch, compute_partition, memory_partition) for name in names if name)
    return tuple(dict.fromkeys(key for key in keys if key != canonical))


def partition_memory(product: Product | None, partitions: int, reported_bytes: int | None) -> int | None:
    """A partition's memory where a tool printed the whole package's for each partition (rocm-smi
    and amd-smi do on MI300X in DPX/QPX/CPX, ROCm/ROCm#4750: the driver's own figure is the
    package's divided among the partitions); other figures are returned as printed."""
    if product is None or not product.memory_gib or partitions <= 1 or not reported_bytes:
        return reported_bytes
    package = product.memory_gib * 1024**3
    if reported_bytes > package * 1.5 / partitions and reported_bytes >= package * 0.75:
        return reported_bytes // partitions
    return reported_bytes
