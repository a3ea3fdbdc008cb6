"""ExponentialBackoff: how long a client waits before it tries again, for every client wait.

Kafka computes every backoff of its clients with one utility, ``common.utils.
ExponentialBackoff``: the producer's retries (``RecordAccumulator``), reconnects
(``ClusterConnectionStates``, every client), metadata refreshes (``Metadata``, KIP-580) and
the consumer's coordinator waits (``AbstractCoordinator``, ``ConsumerCoordinator``). Its value
for the ``attempts``-th retry (counted from 0) is::

    min(max, floor(random(1 - jitter, 1 + jitter) * initial * multiplier ** min(attempts, expMax)))

where ``expMax`` is the exponent at which the term reaches ``max``: the term is computed, the
jitter applied, and only then is the result capped, so a wait never exceeds ``max`` (jitter at
the cap can only shorten it). When ``max`` is not above ``initial`` the backoff is constant,
``min(initial, max)``, without jitter (Kafka's ``expMax == 0``; ``retry.backoff.ms`` above
``retry.backoff.max.ms`` gives a static backoff of the max, ``CommonClientConfigs.
warnDisablingExponentialBackoff``). The value is whole milliseconds, as Kafka's ``long``.

Kafka draws the jitter from ``ThreadLocalRandom``; eosim draws it from the client's own seeded
stream, so a scenario and seed fix every wait.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

# CommonClientConfigs.RETRY_BACKOFF_EXP_BASE / RETRY_BACKOFF_JITTER, and ClusterConnectionStates'
# RECONNECT_BACKOFF_EXP_BASE / RECONNECT_BACKOFF_JITTER: the same values.
BACKOFF_BASE = 2
BACKOFF_JITTER = 0.2


class Jitter(Protocol):
    """Where a client's backoff jitter comes from (a ``RandomStream`` of the run)."""

    def uniform(self, low: float, high: float) -> float: ...


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """Kafka's ``ExponentialBackoff(initialInterval, multiplier, maxInterval, jitter)``."""

    initial_ms: float
    max_ms: float
    multiplier: int = BACKOFF_BASE
    jitter: float = BACKOFF_JITTER
    _initial: float = field(init=False, repr=False)
    _exp_max: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        initial = min(self.max_ms, self.initial_ms)
        exp_max = (
            math.log(self.max_ms / max(initial, 1), self.multiplier)
            if self.max_ms > initial
            else 0.0
        )
        object.__setattr__(self, "_initial", initial)
        object.__setattr__(self, "_exp_max", exp_max)

    @property
    def constant(self) -> bool:
        """No growth and no jitter: every attempt waits ``min(initial, max)``."""
        return self._exp_max == 0

    def backoff(self, attempts: int, rng: Jitter | None) -> float:
        """The wait before retry number ``attempts`` (from 0), drawing the jitter from
        ``rng`` (none drawn when the backoff is constant, or without ``rng``)."""
        if self.constant:
            return self._initial
        return self.with_factor(attempts, self.draw(rng))

    def draw(self, rng: Jitter | None) -> float:
        """One jitter factor in [1 - jitter, 1 + jitter) (1.0 without ``rng``)."""
        if rng is None or self.jitter <= 0.0:
            return 1.0
        return rng.uniform(1 - self.jitter, 1 + self.jitter)

    def with_factor(self, attempts: int, factor: float) -> float:
        """The wait before retry number ``attempts`` with a jitter ``factor`` already drawn."""
        if self.constant:
            return self._initial
        term = self._initial * self.multiplier ** min(attempts, self._exp_max)
        return min(float(math.floor(factor * term)), self.max_ms)


def exponential_backoff(initial_ms: float, max_ms: float, attempts: int, factor: float) -> float:
    """``ExponentialBackoff(initial_ms, 2, max_ms, 0.2).backoff(attempts)`` with the jitter
    ``factor`` given."""
    return ExponentialBackoff(initial_ms, max_ms).with_factor(attempts, factor)
