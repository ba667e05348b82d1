"""The preflight suite's logic: read-only checks of the host that affect GPU work (NUMA
auto-balancing, IOMMU mode, PCIe links, RAS / ECC counters, kernel messages, driver and firmware
versions, large pages, locked-memory limits), each with the expected value and its source.

`host.py` reads the facts from a root folder (`/` on a real host, a fake tree in tests, the host's
files mounted into a container); `checks.py` turns them into findings, purely; `ras.py` reads the
error counters the vendor library keeps; `plugin.py` is the pytest side (options, fixtures, the
order that puts preflight first and the end-of-run RAS check last).
"""
