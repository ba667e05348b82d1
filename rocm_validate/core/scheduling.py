"""The pytest-xdist scheduler of a whole-node run (imported only when pytest-xdist runs one).

Like xdist's `--dist each`, every test runs on every pinned worker, so every GPU is validated.
The node-wide tests (the collectives suite, which drives every selected GPU at once) are held
back and sent once, to the first GPU's worker, when every other worker has finished and that
worker is on its last test of its own: nothing else runs on the node while the collectives
measure it, and the collectives never slow another GPU's timings.

A crashed worker is replaced by xdist from the same spec (so pinned to the same GPU); as with
`--dist each`, the replacement takes over the remaining tests of the one it replaces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from xdist.scheduler.each import EachScheduling


class NodeScheduling(EachScheduling):
    """`--dist each` for per-GPU tests; node-wide tests once, last, on the lead worker."""

    def __init__(
        self, config: pytest.Config, log: Any, node_wide: Callable[[str], bool], is_lead: Callable[[Any], bool]
    ) -> None:
        super().__init__(config, log)
        self._node_wide = node_wide
        self._is_lead = is_lead
        self._held: list[int] | None = None  # node-wide test indices not yet sent

    @property
    def tests_finished(self) -> bool:
        return bool(super().tests_finished) and not self._held

    def schedule(self) -> None:
        assert self.collection_is_completed
        for node, pending in self.node2pending.items():
            if node in self._started:
                continue
            if pending:  # a replacement: it runs what the crashed worker had left
                node.send_runtest_some(pending)
            else:
                collection = self.node2collection[node]
                wide = [i for i, nodeid in enumerate(collection) if self._node_wide(nodeid)]
                if self._held is None:
                    self._held = wide
                held = set(wide)
                pending[:] = [i for i in range(len(collection)) if i not in held]
                if pending:
                    node.send_runtest_some(list(pending))
                if not (self._held and self._is_lead(node)):
                    node.shutdown()
            self._started.append(node)
        self._release()

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        super().mark_test_complete(node, item_index, duration)
        self._release()

    def remove_node(self, node: Any) -> str | None:
        crashed = super().remove_node(node)
        self._release()
        return crashed

    def _release(self) -> None:
        """Send the node-wide tests to the lead worker once every other worker is done and the
        lead holds at most its last test (a worker keeps its last test until told what follows)."""
        if not self._held or self._removed2pending:
            return
        lead = next((n for n in self.node2pending if self._is_lead(n) and n in self._started), None)
        if lead is None or len(self.node2pending[lead]) > 1:
            return
        if any(pending for node, pending in self.node2pending.items() if node is not lead):
            return
        held, self._held = self._held, []
        self.node2pending[lead].extend(held)
        lead.send_runtest_some(held)
        lead.shutdown()
