"""Seeded random streams.

Every random number in a run comes from a :class:`RandomStreams` built from the run's seed.
Each component asks for a stream by name, and each name maps to its own child of a numpy
``SeedSequence`` (keyed by a CRC of the name, never by Python's salted ``hash``), so adding
draws in one component does not shift the numbers another component sees. Draws are served
from pre-generated blocks because scalar numpy calls are slow in a hot simulation loop.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import TypeVar

import numpy as np

T = TypeVar("T")
_BLOCK = 2048


class RandomStream:
    """One named, buffered stream of uniform and normal variates."""

    __slots__ = ("_gen", "_ni", "_normals", "_ui", "_uniforms")

    def __init__(self, generator: np.random.Generator) -> None:
        self._gen = generator
        self._uniforms: list[float] = []
        self._ui = 0
        self._normals: list[float] = []
        self._ni = 0

    def random(self) -> float:
        """A uniform draw in [0, 1)."""
        i = self._ui
        if i >= len(self._uniforms):
            self._uniforms = self._gen.random(_BLOCK).tolist()
            i = 0
        self._ui = i + 1
        return self._uniforms[i]

    def uniforms(self) -> Iterator[float]:
        """This stream's uniform draws from here on, in the order :meth:`random` would give
        them, as an iterator whose ``__next__`` is cheap in a hot loop. The iterator takes the
        stream's uniforms over: a caller that takes it draws no more through :meth:`random`
        (a stream of its own, such as a background source's)."""
        rest = self._uniforms[self._ui :]
        self._uniforms, self._ui = [], 0
        gen = self._gen

        def blocks() -> Iterator[list[float]]:
            yield rest
            while True:
                yield gen.random(_BLOCK).tolist()

        return chain.from_iterable(blocks())

    def normal(self) -> float:
        i = self._ni
        if i >= len(self._normals):
            self._normals = self._gen.standard_normal(_BLOCK).tolist()
            i = 0
        self._ni = i + 1
        return self._normals[i]

    def chance(self, probability: float) -> bool:
        return probability > 0.0 and self.random() < probability

    def uniform(self, low: float, high: float) -> float:
        return low + (high - low) * self.random()

    def exponential(self, mean: float) -> float:
        return -mean * math.log(1.0 - self.random())

    def lognormal(self, median: float, sigma: float) -> float:
        return median * math.exp(sigma * self.normal())

    def integer(self, n: int) -> int:
        """A uniform integer in [0, n)."""
        return min(int(self.random() * n), n - 1)

    def choice(self, items: Sequence[T]) -> T:
        return items[self.integer(len(items))]


class RandomStreams:
    """The run's generators, one per component name, all derived from one seed."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._streams: dict[str, RandomStream] = {}

    def stream(self, name: str) -> RandomStream:
        stream = self._streams.get(name)
        if stream is None:
            key = zlib.crc32(name.encode("utf-8"))
            seq = np.random.SeedSequence(entropy=self.seed, spawn_key=(key,))
            stream = RandomStream(np.random.Generator(np.random.PCG64(seq)))
            self._streams[name] = stream
        return stream
