"""Preflight: read-only checks of the host that affect GPU work, each with its expected value and source."""
