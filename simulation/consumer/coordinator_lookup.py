"""CoordinatorLookup: how a subscribed consumer finds its group coordinator.

Kafka's ``AbstractCoordinator.lookupCoordinator`` (the classic consumer) and
``CoordinatorRequestManager`` (the AsyncKafkaConsumer): one FindCoordinator in flight at a
time, to the brokers in turn; after a failure the next waits out an exponential backoff
(``retry.backoff.ms`` to ``retry.backoff.max.ms``, jittered from the consumer's stream).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy

from eosim.simulation.exponential_backoff import ExponentialBackoff
from eosim.simulation.protocol import Errors, FindCoordinatorRequest


class CoordinatorLookup:
    def __init__(
        self,
        consumer: Any,
        group_id: str,
        backoff: ExponentialBackoff,
        on_found: Callable[[], None],
    ) -> None:
        self.consumer = consumer
        self.env: simpy.Environment = consumer.env
        self.group_id = group_id
        self.backoff = backoff
        self.on_found = on_found
        self._event: simpy.Event | None = None
        self._sent = 0
        self._failures = 0
        self._retry_at = 0.0

    def lookup(self) -> simpy.Event:
        """The event that fires when the lookup in flight (or a new one) is answered, or when
        the backoff after a failure has passed. A found coordinator is set on the consumer."""
        if self._event is not None and not self._event.triggered:
            return self._event
        if self.env.now < self._retry_at:
            return self.env.timeout(self._retry_at - self.env.now)
        client = self.consumer.client
        brokers = self.consumer.metadata.brokers
        broker = brokers[self._sent % len(brokers)]
        self._sent += 1
        request = FindCoordinatorRequest(client.next_correlation_id(), self.group_id, "group")
        event = client.send(broker, request)
        self._event = event
        event.callbacks.append(self._answered)
        return event

    def _answered(self, event: simpy.Event) -> None:
        response = event.value
        if response is not None and response.error is Errors.NONE:
            self.consumer.coordinator = response.node
            self._failures = 0
            self.on_found()
        else:
            self._retry_at = self.env.now + self.backoff.backoff(self._failures, self.consumer.rng)
            self._failures += 1
