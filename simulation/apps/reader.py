"""ReaderApp: a consumer that polls a topic and records every non-empty poll.

Readers show what downstream applications see (from where ``auto.offset.reset`` puts them:
they have no group, so no committed offsets): a read_uncommitted reader returns records of
aborted transactions, a read_committed one must not. The runner's final drain is a reader
too: a fresh read_committed consumer that reads every partition from offset 0 to its last
stable offset.
"""

from __future__ import annotations

import simpy

from eosim.simulation.consumer.kafka_consumer import (
    ConsumerException,
    ConsumerRecord,
    KafkaConsumer,
)
from eosim.simulation.history import HistoryRecorder


def record_poll(
    history: HistoryRecorder,
    process: str,
    time: float,
    records: list[ConsumerRecord],
    isolation: str,
    group: str | None,
) -> None:
    polled = [
        {"topic": topic, "partition": partition, "offset": offset, "value": value}
        for (topic, partition), offset, value in records
    ]
    op_id = history.invoke("poll", process, time, None)
    value = {"records": polled, "isolation": isolation, "group": group}
    history.complete(op_id, "ok", "poll", process, time, value)


def record_failed_poll(history: HistoryRecorder, process: str, time: float, error: str) -> None:
    """A poll that raised ``error`` (``Name: message``) to the application: ``fail``, since
    it returned no records."""
    op_id = history.invoke("poll", process, time, None)
    history.complete(op_id, "fail", "poll", process, time, None, error)


class ReaderApp:
    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        consumer: KafkaConsumer,
        history: HistoryRecorder,
        poll_interval: float,
        stop: simpy.Event,
    ) -> None:
        self.env = env
        self.name = name
        self.consumer = consumer
        self.history = history
        self.poll_interval = poll_interval
        self.stop = stop
        self.polls = 0
        self.process = env.process(self._run())

    # -- frozen by its JVM (the resource model: a collection, a wait for a core) ---------------
    def pause(self) -> None:
        """The process stops: what reaches its consumer waits in its socket."""
        self.consumer.client.network.pause_node(self.consumer.node)
        self.consumer.pause()

    def resume(self) -> None:
        self.consumer.resume()
        self.consumer.client.network.resume_node(self.consumer.node)

    def _run(self):  # type: ignore[no-untyped-def]
        while not self.stop.triggered:
            try:
                records = yield from self.consumer.poll()
            except ConsumerException as exc:
                # Nothing in the reader catches it: the application stops reading.
                record_failed_poll(self.history, f"{self.name}/0", self.env.now, exc.describe())
                break
            if records:
                self.polls += 1
                record_poll(
                    self.history,
                    f"{self.name}/0",
                    self.env.now,
                    records,
                    self.consumer.isolation,
                    None,
                )
            else:
                yield self.env.timeout(self.poll_interval)
        self.consumer.close()


def drain(env: simpy.Environment, consumer: KafkaConsumer, history: HistoryRecorder, process: str):  # type: ignore[no-untyped-def]
    """Read every assigned partition from offset 0 to its end (the LSO for
    read_committed)."""
    for tp in consumer.assignment:
        consumer.seek(tp, 0)
    while True:
        records = yield from consumer.poll()
        if records:
            record_poll(history, process, env.now, records, consumer.isolation, None)
        elif consumer.caught_up():
            return
        else:
            yield env.timeout(10.0)
