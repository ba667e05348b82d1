"""Collectives: torch.distributed over the selected devices, data checked bit for bit, bus bandwidth gated."""
