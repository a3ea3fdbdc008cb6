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


def send_record(entry: tuple) -> dict[str, Any]:
    """A recorded send op (the compact tuple of :meth:`HistoryRecorder.items`) as its line's
    JSON object."""
    _, op_id, type_, f, process, time, topic, partition, key, value, offset, error = entry
    v: dict[str, Any] = {"topic": topic, "partition": partition, "key": key, "value": value}
    if type_ == "ok":
        v["offset"] = offset
    return _op_record(op_id, type_, f, process, time, v, error)


# What `json.dumps(record, separators=(",", ":"), ensure_ascii=False)` uses, made once (dumps
# with arguments builds an encoder per call).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_string = json.encoder.encode_basestring  # a JSON string, as _ENCODER writes one


def _json_number(number: float) -> str:
    """A number as _ENCODER writes it (an int as an int, a float by its repr)."""
    return int.__repr__(number) if type(number) is int else float.__repr__(number)


def _send_line(entry: tuple) -> str:
    """A send op's line, byte for byte what _ENCODER makes of its JSON object (:meth:`records`)
    without building that object: keys in the same order, strings escaped the same way."""
    _, op_id, type_, f, process, time, topic, partition, key, value, offset, error = entry
    text = (
        f'{{"kind":"op","id":{op_id},"type":{_string(type_)},"f":{_string(f)},'
        f'"process":{_string(process)},"time":{_json_number(_t(time))},'
        f'"value":{{"topic":{_string(topic)},'
        f'"partition":{"null" if partition is None else partition},'
        f'"key":{"null" if key is None else _string(key)},"value":{_string(value)}'
    )
    if type_ == "ok":
        text += f',"offset":{"null" if offset is None else offset}'
    if error is not None:
        return f'{text}}},"error":{_string(error)}}}'
    return text + "}}"


class HistoryRecorder:
    def __init__(self, meta: dict[str, Any]) -> None:
        self.meta = {"kind": "meta", "format": FORMAT, "version": VERSION, **meta}
        self._entries: list[tuple] = []
        # Positions in _entries of the entries other than send ops (few, next to the sends).
        self._others: list[int] = []
        self._next_id = 0
        self.logs: list[dict[str, Any]] = []
        self.end_lines: list[dict[str, Any]] = []

    def _add(self, entry: tuple) -> None:
        """Record an entry other than a send op."""
        self._others.append(len(self._entries))
        self._entries.append(entry)

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
        self._add(("gop", op_id, "invoke", f, process, time, value, None))
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
        self._add(("gop", op_id, type_, f, process, time, value, error))

    def fence(self, time: float, transactional_id: str, producer_id: int, epoch: int) -> None:
        """From ``time`` on, epochs of ``producer_id`` below ``epoch`` are fenced."""
        self._add(
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
        self._add(("line", line))

    def add_line(self, line: dict[str, Any]) -> None:
        """A line taken as it is, in its place among the operations (a real cluster's
        history, merged from its clients' files)."""
        self._add(("line", line))

    def add_end_line(self, line: dict[str, Any]) -> None:
        """A line written after the logs (``offsets``, ``lso``)."""
        self.end_lines.append(line)

    def fault(
        self, time: float, phase: str, fault: str, targets: list[str], detail: dict[str, Any]
    ) -> None:
        self._add(("fault", time, phase, fault, targets, detail))

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

    def items(self) -> Iterator[tuple | dict[str, Any]]:
        """The history's lines in order, as :meth:`records` gives them, except for two kinds
        of line the model writes by construction well formed, which come as tuples: a send op
        stays the compact tuple it was recorded as, ``("op", id, type, "send", process, time,
        topic, partition, key, value, offset, error)``, its time not yet rounded to the
        history's microseconds; a partition's final log is ``("log", line)``."""
        yield self.meta
        for e in self._entries:
            yield e if e[0] == "op" else self._item(e)
        for line in self.logs:
            yield ("log", line)
        yield from self.end_lines

    def send_ops(self) -> list[tuple]:
        """The send ops of :meth:`items`, in order."""
        return [e for e in self._entries if e[0] == "op"]

    def send_lines(self) -> list[int]:
        """The line numbers of :meth:`send_ops` in :meth:`items` (the meta line is 1)."""
        return [i + 2 for i, e in enumerate(self._entries) if e[0] == "op"]

    def other_items(self) -> Iterator[tuple[int, tuple | dict[str, Any]]]:
        """Every other item of :meth:`items`, with its line number (the meta line is 1):
        what ``eosim.analysis.history.history_from_recorder`` reads besides
        :meth:`send_ops`, without a step per send."""
        yield 1, self.meta
        entries = self._entries
        for index in self._others:
            yield index + 2, self._item(entries[index])
        line = len(entries) + 1
        for log in self.logs:
            line += 1
            yield line, ("log", log)
        for end in self.end_lines:
            line += 1
            yield line, end

    @staticmethod
    def _item(e: tuple) -> dict[str, Any]:
        kind = e[0]
        if kind == "gop":
            _, op_id, type_, f, process, time, value, error = e
            return _op_record(op_id, type_, f, process, time, value, error)
        if kind == "line":
            return e[1]
        _, time, phase, fault, targets, detail = e
        return {
            "kind": "fault",
            "time": _t(time),
            "phase": phase,
            "fault": fault,
            "targets": targets,
            **detail,
        }

    def records(self) -> Iterator[dict[str, Any]]:
        for item in self.items():
            if type(item) is not tuple:
                yield item
            elif item[0] == "log":
                yield item[1]
            else:
                yield send_record(item)

    def lines(self) -> Iterator[str]:
        """The history's lines as written: compact JSON, one object a line."""
        encode = _ENCODER.encode
        for item in self.items():
            if type(item) is not tuple:
                yield encode(item)
            elif item[0] == "log":
                yield encode(item[1])
            else:
                yield _send_line(item)

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
