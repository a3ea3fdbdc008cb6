"""ProducerIdManager: producer ids handed out in blocks of 1000.

Each broker asks the controller for a block and serves InitProducerId requests from it. A
restarted broker has lost its block and takes a fresh one, so ids are unique but not dense.
"""

from __future__ import annotations

BLOCK_SIZE = 1000


class ProducerIdBlockAllocator:
    """The controller's side: the next unallocated block, shared by all brokers."""

    __slots__ = ("_next_block_start",)

    def __init__(self) -> None:
        self._next_block_start = 0

    def allocate(self) -> range:
        start = self._next_block_start
        self._next_block_start += BLOCK_SIZE
        return range(start, start + BLOCK_SIZE)


class ProducerIdManager:
    """One broker's producer-id dispenser."""

    __slots__ = ("_allocator", "_block", "_index")

    def __init__(self, allocator: ProducerIdBlockAllocator) -> None:
        self._allocator = allocator
        self._block: range = range(0)
        self._index = 0

    def generate_producer_id(self) -> int:
        if self._index >= len(self._block):
            self._block = self._allocator.allocate()
            self._index = 0
        pid = self._block[self._index]
        self._index += 1
        return pid

    def reset(self) -> None:
        """Forget the current block (broker restart)."""
        self._block = range(0)
        self._index = 0
