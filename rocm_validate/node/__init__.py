"""Whole-node runs (`--rocm-device=all` or a list such as `0,3,5`), torch-free at import.

workers (the pytest and pytest-xdist wiring: one worker pinned to each selected GPU), facts (a
node run's devices as the controller found them, handed to each worker), pinning (which
visibility variable pins a process), work and sharing (per-GPU, shared and node-wide work; what
each worker of a node run keeps), scheduling (the pytest-xdist scheduler of a node run), budget
(the node-time model, budgets per level and node size, where the time went).
"""
