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

from analysis.history import History, history_from_records, parse_history


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

    def poll(self, process: str, records: list[tuple[str, int, int, str]]) -> None:
        op_id = self.next_id
        self.next_id += 1
        self._op("invoke", "poll", process, None, op_id)
        polled = [
            {"topic": topic, "partition": partition, "offset": offset, "value": value}
            for topic, partition, offset, value in records
        ]
        self._op("ok", "poll", process, {"records": polled}, op_id)

    def log(self, topic: str, partition: int, values: list[str] | dict[int, str]) -> None:
        """A final log: a list of values from offset 0, or a mapping offset -> value."""
        placed = values if isinstance(values, dict) else dict(enumerate(values))
        records = [{"offset": offset, "value": value} for offset, value in sorted(placed.items())]
        self.records.append(
            {"kind": "log", "topic": topic, "partition": partition, "records": records}
        )

    def history(self) -> History:
        return history_from_records(self.records)

    def lines(self) -> list[str]:
        return [json.dumps(record) for record in self.records]

    def parsed(self) -> History:
        return parse_history(self.lines())
