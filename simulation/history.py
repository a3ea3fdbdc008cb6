"""The run's history: operations, faults and final logs, in the order they happened.

Operations are kept as compact tuples while the run is hot and turned into the JSON objects
of ``docs/history-format.md`` only when asked (``records()``), so that the bytes written for
a given scenario and seed are the same in every process.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import IO, Any

FORMAT = "eosim-history"
VERSION = 1

# (kind, id, type, f, process, time, topic, partition, key, value, offset, error)
_Op = tuple[
    str, int, str, str, str, float, str, "int | None", "str | None", str, "int | None", "str | None"
]


def _t(time: float) -> float:
    return round(time, 6)


def _op_record(
    op_id: int,
    type_: str,
    f: str,
    process: str,
    time: float,
    value: dict[str, Any] | None,
    error: str | None,
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "kind": "op",
        "id": op_id,
        "type": type_,
        "f": f,
        "process": process,
        "time": _t(time),
        "value": value,
    }
    if error is not None:
        rec["error"] = error
    return rec


class HistoryRecorder:
    def __init__(self, meta: dict[str, Any]) -> None:
        self.meta = {"kind": "meta", "format": FORMAT, "version": VERSION, **meta}
        self._entries: list[tuple] = []
        self._next_id = 0
        self.logs: list[dict[str, Any]] = []
        self.end_lines: list[dict[str, Any]] = []

    def invoke_send(
        self,
        process: str,
        time: float,
        topic: str,
        partition: int | None,
        key: str | None,
        value: str,
    ) -> int:
        op_id = self._next_id
        self._next_id += 1
        self._entries.append(
            ("op", op_id, "invoke", "send", process, time, topic, partition, key, value, None, None)
        )
        return op_id

    def complete_send(
        self,
        op_id: int,
        type_: str,
        process: str,
        time: float,
        topic: str,
        partition: int | None,
        key: str | None,
        value: str,
        offset: int | None,
        error: str | None,
    ) -> None:
        self._entries.append(
            ("op", op_id, type_, "send", process, time, topic, partition, key, value, offset, error)
        )

    def invoke(self, f: str, process: str, time: float, value: dict[str, Any] | None) -> int:
        """Invoke an operation other than ``send`` (``txn``, ``process``, ``poll``)."""
        op_id = self._next_id
        self._next_id += 1
        self._entries.append(("gop", op_id, "invoke", f, process, time, value, None))
        return op_id

    def complete(
        self,
        op_id: int,
        type_: str,
        f: str,
        process: str,
        time: float,
        value: dict[str, Any] | None,
        error: str | None = None,
    ) -> None:
        self._entries.append(("gop", op_id, type_, f, process, time, value, error))

    def fence(self, time: float, transactional_id: str, producer_id: int, epoch: int) -> None:
        """From ``time`` on, epochs of ``producer_id`` below ``epoch`` are fenced."""
        self._entries.append(
            (
                "line",
                {
                    "kind": "fence",
                    "time": _t(time),
                    "transactional_id": transactional_id,
                    "producer_id": producer_id,
                    "epoch": epoch,
                },
            )
        )

    def group_event(
        self, time: float, process: str, group: str, event: str, detail: dict[str, Any]
    ) -> None:
        """A consumer group's story as a member saw it: ``assigned`` (with the generation),
        ``revoked``, ``lost``, and ``commit`` (when it was ``invoked``, the member and generation
        it named, the offsets, ``async`` for commitAsync, and the error if any)."""
        line = {"kind": "group", "time": _t(time), "process": process, "group": group}
        line["event"] = event
        line.update(detail)
        if "invoked" in line:
            line["invoked"] = _t(line["invoked"])
        self._entries.append(("line", line))

    def add_line(self, line: dict[str, Any]) -> None:
        """A line taken as it is, in its place among the operations (a real cluster's
        history, merged from its clients' files)."""
        self._entries.append(("line", line))

    def add_end_line(self, line: dict[str, Any]) -> None:
        """A line written after the logs (``offsets``, ``lso``)."""
        self.end_lines.append(line)

    def fault(
        self, time: float, phase: str, fault: str, targets: list[str], detail: dict[str, Any]
    ) -> None:
        self._entries.append(("fault", time, phase, fault, targets, detail))

    def add_log(
        self,
        topic: str,
        partition: int,
        records: list[dict[str, Any]],
        markers: list[dict[str, Any]] | None = None,
        **replication: Any,
    ) -> None:
        """A partition's final log; a replicated partition's line also names its ``leader``
        and ``high_watermark``."""
        line: dict[str, Any] = {
            "kind": "log",
            "topic": topic,
            "partition": partition,
            "records": records,
        }
        if markers:
            line["markers"] = markers
        line.update(replication)
        self.logs.append(line)

    @property
    def operation_count(self) -> int:
        return sum(1 for e in self._entries if e[0] in ("op", "gop"))

    def records(self) -> Iterator[dict[str, Any]]:
        yield self.meta
        for e in self._entries:
            if e[0] == "op":
                _, op_id, type_, f, process, time, topic, partition, key, value, offset, error = e
                v: dict[str, Any] = {
                    "topic": topic,
                    "partition": partition,
                    "key": key,
                    "value": value,
                }
                if type_ == "ok":
                    v["offset"] = offset
                yield _op_record(op_id, type_, f, process, time, v, error)
            elif e[0] == "gop":
                _, op_id, type_, f, process, time, value, error = e
                yield _op_record(op_id, type_, f, process, time, value, error)
            elif e[0] == "line":
                yield e[1]
            else:
                _, time, phase, fault, targets, detail = e
                yield {
                    "kind": "fault",
                    "time": _t(time),
                    "phase": phase,
                    "fault": fault,
                    "targets": targets,
                    **detail,
                }
        yield from self.logs
        yield from self.end_lines

    def lines(self) -> Iterator[str]:
        for rec in self.records():
            yield json.dumps(rec, separators=(",", ":"), ensure_ascii=False)

    def write(self, stream: IO[str]) -> None:
        for line in self.lines():
            stream.write(line)
            stream.write("\n")

    def digest(self) -> str:
        h = hashlib.sha256()
        for line in self.lines():
            h.update(line.encode("utf-8"))
            h.update(b"\n")
        return h.hexdigest()
