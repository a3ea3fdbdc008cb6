"""A small builder for hand-written histories in tests.

Each call appends the JSON objects a client or broker would write, with a clock that advances by
one millisecond per line, so a test reads like the story it checks:

    h = Builder()
    h.send("p/0", "a", offset=0)
    h.log("t", 0, ["a"])
    result = check(h.history())
"""

from __future__ import annotations

import json
from typing import Any

from eosim.analysis.history import History, history_from_records, parse_history


class Builder:
    def __init__(self, *, ids: bool = True) -> None:
        self.records: list[dict[str, Any]] = []
        self.ids = ids
        self.clock = 0.0
        self.next_id = 0

    def _op(
        self,
        type: str,
        f: str,
        process: str,
        value: dict[str, Any] | None,
        op_id: int | None,
        error: str | None = None,
    ) -> dict[str, Any]:
        self.clock += 1.0
        op: dict[str, Any] = {"kind": "op", "type": type, "f": f, "process": process}
        if op_id is not None and self.ids:
            op["id"] = op_id
        op.update(time=self.clock, value=value)
        if error is not None:
            op["error"] = error
        self.records.append(op)
        return op

    def invoke_send(
        self, process: str, value: str, *, topic: str = "t", partition: int | None = 0
    ) -> int:
        op_id = self.next_id
        self.next_id += 1
        record = {"topic": topic, "partition": partition, "key": None, "value": value}
        self._op("invoke", "send", process, record, op_id)
        return op_id

    def complete_send(
        self,
        op_id: int,
        process: str,
        value: str,
        outcome: str = "ok",
        *,
        topic: str = "t",
        partition: int | None = 0,
        offset: int | None = None,
    ) -> None:
        record: dict[str, Any] = {"topic": topic, "partition": partition, "value": value}
        if outcome == "ok":
            record["offset"] = -1 if offset is None else offset
        error = None if outcome == "ok" else "TimeoutException: expired"
        self._op(outcome, "send", process, record, op_id, error)

    def send(
        self,
        process: str,
        value: str,
        outcome: str | None = "ok",
        *,
        topic: str = "t",
        partition: int | None = 0,
        offset: int | None = None,
    ) -> int:
        """Invoke and complete a send; outcome None leaves it open (a crashed client)."""
        op_id = self.invoke_send(process, value, topic=topic, partition=partition)
        if outcome is not None:
            self.complete_send(
                op_id, process, value, outcome, topic=topic, partition=partition, offset=offset
            )
        return op_id

    def poll(
        self,
        process: str,
        records: list[tuple[str, int, int, str]],
        *,
        isolation: str | None = None,
        group: str | None = None,
    ) -> None:
        op_id = self.next_id
        self.next_id += 1
        self._op("invoke", "poll", process, None, op_id)
        polled = [
            {"topic": topic, "partition": partition, "offset": offset, "value": value}
            for topic, partition, offset, value in records
        ]
        value: dict[str, Any] = {"records": polled}
        if isolation is not None:
            value["isolation"] = isolation
        if group is not None:
            value["group"] = group
        self._op("ok", "poll", process, value, op_id)

    def read_committed(self, process: str, records: list[tuple[str, int, int, str]]) -> None:
        self.poll(process, records, isolation="read_committed")

    def invoke_txn(
        self,
        process: str,
        transactional_id: str,
        values: list[str],
        *,
        topic: str = "t",
        partition: int | None = 0,
        producer_id: int | None = None,
        epoch: int | None = None,
    ) -> int:
        op_id = self.next_id
        self.next_id += 1
        sends = [
            {"topic": topic, "partition": partition, "key": None, "value": value}
            for value in values
        ]
        txn = {
            "transactional_id": transactional_id,
            "producer_id": producer_id,
            "epoch": epoch,
            "sends": sends,
        }
        self._op("invoke", "txn", process, txn, op_id)
        return op_id

    def complete_txn(
        self,
        op_id: int,
        process: str,
        outcome: str = "ok",
        *,
        offsets: dict[str, int] | None = None,
    ) -> None:
        """Complete a transaction; `offsets` maps values to the offsets an `ok` one reports."""
        value = None
        if offsets:
            sends = [{"value": v, "offset": offset} for v, offset in sorted(offsets.items())]
            value = {"sends": sends}
        error = None if outcome == "ok" else "TimeoutException: commit"
        self._op(outcome, "txn", process, value, op_id, error)

    def txn(
        self,
        process: str,
        transactional_id: str,
        values: list[str],
        outcome: str | None = "ok",
        **fields: Any,
    ) -> int:
        """Invoke and complete a transaction; outcome None leaves it open."""
        op_id = self.invoke_txn(process, transactional_id, values, **fields)
        if outcome is not None:
            self.complete_txn(op_id, process, outcome)
        return op_id

    def step(
        self,
        process: str,
        source: tuple[str, int, int, str],
        outputs: list[str],
        outcome: str | None = "ok",
        *,
        transactional_id: str | None = "app",
        output_topic: str | None = None,
        transaction: int | None = None,
    ) -> int:
        """A consume-transform-produce `process` op for one input record (with `output_topic`
        and `transaction` when given)."""
        op_id = self.next_id
        self.next_id += 1
        topic, partition, offset, value = source
        record = {"topic": topic, "partition": partition, "offset": offset, "value": value}
        body: dict[str, Any] = {
            "input": record,
            "outputs": outputs,
            "transactional_id": transactional_id,
        }
        if output_topic is not None:
            body["output_topic"] = output_topic
        if transaction is not None:
            body["transaction"] = transaction
        self._op("invoke", "process", process, body, op_id)
        if outcome is not None:
            error = None if outcome == "ok" else "TimeoutException: commit"
            self._op(outcome, "process", process, None, op_id, error)
        return op_id

    def log_records(
        self,
        topic: str,
        partition: int,
        records: list[dict[str, Any]],
        markers: list[dict[str, Any]] | None = None,
    ) -> None:
        """A final log with records (and control markers) written out in full."""
        line: dict[str, Any] = {
            "kind": "log",
            "topic": topic,
            "partition": partition,
            "records": records,
        }
        if markers is not None:
            line["markers"] = markers
        self.records.append(line)

    def offsets(self, group: str, offsets: list[tuple[str, int, int]]) -> None:
        entries = [{"topic": t, "partition": p, "offset": o} for t, p, o in offsets]
        self.records.append({"kind": "offsets", "group": group, "offsets": entries})

    def assigned(
        self, process: str, generation: int, partitions: list[tuple[str, int]], group: str = "g"
    ) -> float:
        """A member applied its assignment of ``generation`` at the next clock tick."""
        self.clock += 1.0
        listed = [{"topic": t, "partition": p} for t, p in partitions]
        self.records.append(
            {
                "kind": "group",
                "time": self.clock,
                "process": process,
                "group": group,
                "event": "assigned",
                "member": process,
                "generation": generation,
                "partitions": listed,
            }
        )
        return self.clock

    def commit(
        self,
        process: str,
        generation: int,
        offsets: list[tuple[str, int, int]],
        *,
        invoked: float | None = None,
        error: str | None = None,
        group: str = "g",
    ) -> float:
        """An offset commit that completes at the next clock tick (invoked then too, unless
        ``invoked`` says earlier); returns its completion time."""
        self.clock += 1.0
        line: dict[str, Any] = {
            "kind": "group",
            "time": self.clock,
            "process": process,
            "group": group,
            "event": "commit",
            "member": process,
            "generation": generation,
            "invoked": self.clock if invoked is None else invoked,
            "offsets": [{"topic": t, "partition": p, "offset": o} for t, p, o in offsets],
        }
        if error is not None:
            line["error"] = error
        self.records.append(line)
        return self.clock

    def fence(self, transactional_id: str, producer_id: int, epoch: int) -> float:
        """A fence at the next clock tick; returns its time."""
        self.clock += 1.0
        self.records.append(
            {
                "kind": "fence",
                "time": self.clock,
                "transactional_id": transactional_id,
                "producer_id": producer_id,
                "epoch": epoch,
            }
        )
        return self.clock

    def lso(
        self,
        topic: str,
        partition: int,
        lso: int,
        log_end_offset: int,
        open_transactions: list[tuple[int, int]] | None = None,
    ) -> None:
        self.records.append(
            {
                "kind": "lso",
                "topic": topic,
                "partition": partition,
                "lso": lso,
                "log_end_offset": log_end_offset,
                "open_transactions": [
                    {"producer_id": pid, "first_offset": first}
                    for pid, first in open_transactions or []
                ],
            }
        )

    def meta(self, **fields: Any) -> None:
        """A meta line (first in the history), e.g. with eosim's client `configs`."""
        meta = {"kind": "meta", "format": "eosim-history", "version": 1, **fields}
        self.records.insert(0, meta)

    def end(
        self, time: float, *, cut_by_duration: bool = True, duration: float | None = None
    ) -> None:
        """The `end` line eosim writes when its run was cut by its duration."""
        line: dict[str, Any] = {"kind": "end", "time": time, "cut_by_duration": cut_by_duration}
        if duration is not None:
            line["duration"] = duration
        self.records.append(line)

    def log(
        self, topic: str, partition: int, values: list[str] | dict[int, str], **fields: Any
    ) -> None:
        """A final log: a list of values from offset 0, or a mapping offset -> value; `fields`
        adds to the line (a replicated partition's `leader` and `high_watermark`)."""
        placed = values if isinstance(values, dict) else dict(enumerate(values))
        records = [{"offset": offset, "value": value} for offset, value in sorted(placed.items())]
        self.records.append(
            {"kind": "log", "topic": topic, "partition": partition, "records": records, **fields}
        )

    def replica(
        self,
        topic: str,
        partition: int,
        broker: str,
        values: list[str] | dict[int, str],
        *,
        leader: bool = False,
        leader_epoch: int = 0,
        high_watermark: int | None = None,
        log_end_offset: int | None = None,
        markers: dict[int, str] | None = None,
        producer_id: int = 1000,
        settled: bool | None = None,
        log_start_offset: int | None = None,
    ) -> None:
        """A `replica` line: records as for `log`, control markers as offset -> type (all of
        `producer_id`). The log end defaults to one past the last entry and the high watermark
        to the log end; `settled` and `log_start_offset` are written only when given."""
        placed = values if isinstance(values, dict) else dict(enumerate(values))
        records = [
            {"offset": offset, "value": value, "producer_id": producer_id}
            for offset, value in sorted(placed.items())
        ]
        controls = [
            {"offset": offset, "producer_id": producer_id, "type": kind, "time": 0.0}
            for offset, kind in sorted((markers or {}).items())
        ]
        if log_end_offset is None:
            log_end_offset = 1 + max([*placed, *(markers or {}), -1])
        line: dict[str, Any] = {
            "kind": "replica",
            "topic": topic,
            "partition": partition,
            "broker": broker,
            "leader": leader,
            "leader_epoch": leader_epoch,
            "high_watermark": log_end_offset if high_watermark is None else high_watermark,
            "log_end_offset": log_end_offset,
            "records": records,
            "markers": controls,
        }
        if settled is not None:
            line["settled"] = settled
        if log_start_offset is not None:
            line["log_start_offset"] = log_start_offset
        self.records.append(line)

    def history(self) -> History:
        return history_from_records(self.records)

    def lines(self) -> list[str]:
        return [json.dumps(record) for record in self.records]

    def parsed(self) -> History:
        return parse_history(self.lines())
