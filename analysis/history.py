"""Load eosim histories (docs/history-format.md) into typed objects.

A history is a sequence of JSON objects, each with a `kind`: `op` lines record a client invoking
or completing an operation, `log` lines give the final contents of a partition, `fault` lines
mark faults, and an optional `meta` line describes the run. Unknown kinds are skipped so that
the format can grow; a known kind with a malformed field is a `HistoryError` that names the
source, line and field, so that a hand-written history is easy to fix.

Besides validating, loading pairs every completion with its invocation: by `id` when the
completion has one, otherwise with the single open invocation of the same process, as in Jepsen.
Each producer `send` then becomes one `Send` (outcome `info` if it never completed) and each
successful `poll` one `Poll`. These, together with the final logs, are what the checker reads.

`history_from_records` is the fast path used by the simulator on its in-memory history; the two
text readers decode JSON and delegate to it.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

FORMAT = "eosim-history"
VERSION = 1
OP_TYPES = ("invoke", "ok", "fail", "info")


class HistoryError(ValueError):
    """A malformed history. `str()` is one line: `source:line: field: message`."""

    def __init__(self, source: str, line: int, field: str, message: str) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.message = message
        text = f"{source}:{line}: {field}: {message}"
        super().__init__(text.replace("\n", " "))


@dataclass(slots=True)
class Op:
    """One `op` line as written."""

    id: int | None
    type: str
    f: str
    process: str
    time: float
    value: dict[str, Any] | None
    error: str | None
    line: int


@dataclass(slots=True)
class Send:
    """A producer write: a `send` invocation joined with its completion.

    `invoke_index` is the send's position among all send invocations, so
    `history.sends[s.invoke_index] is s`. `partition` is the invocation's partition, or the one
    the completion reported. `offset` is set only for an `ok` completion with an offset >= 0.
    """

    id: int | None
    process: str
    invoke_index: int
    invoke_time: float
    complete_time: float | None
    outcome: str
    topic: str
    partition: int | None
    key: str | None
    value: str
    offset: int | None
    error: str | None


class PolledRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    value: str


class Poll(NamedTuple):
    """A successful consumer read; `time` is the completion time."""

    process: str
    time: float
    records: list[PolledRecord]


@dataclass(slots=True)
class LogRecord:
    offset: int
    value: str
    producer_id: int | None = None
    epoch: int | None = None
    sequence: int | None = None


@dataclass
class History:
    """A loaded history. `ops` are in file order, `sends` in invocation order and `polls` (the
    `ok` ones) in completion order; `logs` maps (topic, partition) to records in offset order;
    `meta` and `faults` are the lines as written, without `kind`."""

    meta: dict[str, Any] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    sends: list[Send] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    logs: dict[tuple[str, int], list[LogRecord]] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)


def load_history(path: str | os.PathLike[str]) -> History:
    """Read a JSON Lines history file."""
    source = os.fspath(path)
    with open(path, "rb") as handle:
        return _build(_decode(handle, source), source)


def parse_history(lines: Iterable[str], source: str = "<history>") -> History:
    """Parse JSON Lines text; a single string is split into lines at newlines."""
    if isinstance(lines, str):
        # Not splitlines(): JSON strings may hold U+2028 and other characters it splits at.
        lines = lines.split("\n")
    return _build(_decode(lines, source), source)


def history_from_records(records: Iterable[Any], source: str = "<history>") -> History:
    """Build a history from already-decoded line objects; line numbers count from 1."""
    return _build(enumerate(records, 1), source)


def _decode(lines: Iterable[str | bytes], source: str) -> Iterator[tuple[int, Any]]:
    for number, raw in enumerate(lines, 1):
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise HistoryError(source, number, "line", f"invalid UTF-8: {exc.reason}") from None
        else:
            text = raw
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            message = f"invalid JSON: {exc.msg} (column {exc.colno})"
            raise HistoryError(source, number, "line", message) from None
        yield number, record


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small acyclic objects, which
    would otherwise make it rescan the caller's (often large) heap over and over."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_Fail = Callable[[int, str, str], HistoryError]


# An open invocation: the invoking op and, for a send, the Send it started.
_Open = tuple[Op, Send | None]


def _build(numbered: Iterable[tuple[int, Any]], source: str) -> History:
    with paused_gc():
        return _build_history(numbered, source)


def _build_history(numbered: Iterable[tuple[int, Any]], source: str) -> History:
    history = History()
    ops = history.ops
    sends = history.sends
    polls = history.polls
    meta_line = 0
    invoked_ids: dict[int, int] = {}
    open_by_id: dict[int, _Open] = {}
    open_without_id: dict[str, _Open] = {}
    log_lines: dict[tuple[str, int], int] = {}

    def fail(line: int, where: str, message: str) -> HistoryError:
        return HistoryError(source, line, where, message)

    for line, record in numbered:
        if type(record) is not dict:
            raise fail(line, "line", f"expected a JSON object, got {type(record).__name__}")
        kind = record.get("kind")
        if kind == "op":
            op = _parse_op(record, line, fail)
            ops.append(op)
            op_id = op.id
            if op.type == "invoke":
                send = None
                if op.f == "send":
                    send = _invoked_send(op, len(sends), fail)
                    sends.append(send)
                if op_id is not None:
                    first = invoked_ids.get(op_id)
                    if first is not None:
                        message = f"duplicate id {op_id} (first invoked at line {first})"
                        raise fail(line, "op.id", message)
                    invoked_ids[op_id] = line
                    open_by_id[op_id] = (op, send)
                else:
                    other = open_without_id.get(op.process)
                    if other is not None:
                        raise fail(
                            line,
                            "op.id",
                            f"{op.process!r} invokes without an id while its invocation at line "
                            f"{other[0].line} is still open; ids are needed when a process has "
                            "several operations outstanding",
                        )
                    open_without_id[op.process] = (op, send)
                continue
            if op_id is not None:
                entry = open_by_id.pop(op_id, None)
                if entry is None:
                    first = invoked_ids.get(op_id)
                    if first is None:
                        message = f"completion without invocation: no invoke has id {op_id}"
                    else:
                        message = f"id {op_id} already completed (invoked at line {first})"
                    raise fail(line, "op.id", message)
            else:
                entry = _pop_open_without_id(op, open_by_id, open_without_id, fail)
            invoked, send = entry
            if invoked.process != op.process:
                message = f"expected {invoked.process!r} as invoked at line {invoked.line}"
                raise fail(line, "op.process", f"{message}, got {op.process!r}")
            if invoked.f != op.f:
                message = f"expected {invoked.f!r} as invoked at line {invoked.line}"
                raise fail(line, "op.f", f"{message}, got {op.f!r}")
            if send is not None:
                _complete_send(send, op, fail)
            elif op.f == "poll" and op.type == "ok":
                polls.append(Poll(op.process, op.time, _polled_records(op, fail)))
        elif kind == "log":
            key, records = _parse_log(record, line, fail)
            first = log_lines.get(key)
            if first is not None:
                raise fail(line, "log.partition", f"{key!r} already has a log at line {first}")
            log_lines[key] = line
            history.logs[key] = records
        elif kind == "fault":
            history.faults.append({k: v for k, v in record.items() if k != "kind"})
        elif kind == "meta":
            if meta_line:
                raise fail(line, "meta", f"a second meta line (first at line {meta_line})")
            meta_line = line
            _check_meta(record, line, fail)
            history.meta = {k: v for k, v in record.items() if k != "kind"}
        elif type(kind) is not str:
            what = "missing" if kind is None else f"expected a string, got {_describe(kind)}"
            raise fail(line, "kind", what)
    return history


def _pop_open_without_id(
    op: Op, open_by_id: dict[int, _Open], open_without_id: dict[str, _Open], fail: _Fail
) -> _Open:
    """Pair an id-less completion with its process's one open invocation, Jepsen style."""
    process = op.process
    candidates = [entry for entry in open_by_id.values() if entry[0].process == process]
    if process in open_without_id:
        candidates.append(open_without_id[process])
    if not candidates:
        message = f"completion without invocation: {process!r} has no open invocation"
        raise fail(op.line, "op.process", message)
    if len(candidates) > 1:
        lines = ", ".join(str(entry[0].line) for entry in sorted(candidates, key=_line))
        message = f"completion without id is ambiguous: {process!r} has open invocations at lines"
        raise fail(op.line, "op.id", f"{message} {lines}")
    entry = candidates[0]
    invoked_id = entry[0].id
    if invoked_id is None:
        del open_without_id[process]
    else:
        del open_by_id[invoked_id]
    return entry


def _line(entry: _Open) -> int:
    return entry[0].line


def _parse_op(record: dict[str, Any], line: int, fail: _Fail) -> Op:
    get = record.get
    op_id = get("id")
    if op_id is not None and type(op_id) is not int:
        raise fail(line, "op.id", f"expected an integer or null, got {_describe(op_id)}")
    op_type = get("type")
    if op_type not in OP_TYPES:
        raise fail(
            line, "op.type", f"expected one of {', '.join(OP_TYPES)}, got {_describe(op_type)}"
        )
    f = get("f")
    if type(f) is not str or not f:
        raise fail(line, "op.f", f"expected a non-empty string, got {_describe(f)}")
    process = get("process")
    if type(process) is not str or not process:
        raise fail(line, "op.process", f"expected a non-empty string, got {_describe(process)}")
    time = get("time")
    time_type = type(time)
    # `time - time` is NaN for both NaN and infinities, which JSON decoders accept.
    if (time_type is not float and time_type is not int) or time - time != 0:
        raise fail(line, "op.time", f"expected a finite number, got {_describe(time)}")
    value = get("value")
    if value is not None and type(value) is not dict:
        raise fail(line, "op.value", f"expected an object or null, got {_describe(value)}")
    error = get("error")
    if error is not None and type(error) is not str:
        raise fail(line, "op.error", f"expected a string or null, got {_describe(error)}")
    return Op(op_id, op_type, f, process, float(time), value, error, line)


def _invoked_send(op: Op, index: int, fail: _Fail) -> Send:
    value = op.value
    line = op.line
    if value is None:
        raise fail(line, "op.value", "a send invocation needs topic, partition, key and value")
    topic = value.get("topic")
    if type(topic) is not str:
        raise fail(line, "op.value.topic", f"expected a string, got {_describe(topic)}")
    partition = value.get("partition")
    if partition is not None and (type(partition) is not int or partition < 0):
        raise fail(
            line,
            "op.value.partition",
            f"expected an integer >= 0 or null, got {_describe(partition)}",
        )
    key = value.get("key")
    if key is not None and type(key) is not str:
        raise fail(line, "op.value.key", f"expected a string or null, got {_describe(key)}")
    payload = value.get("value")
    if type(payload) is not str:
        raise fail(line, "op.value.value", f"expected a string, got {_describe(payload)}")
    return Send(
        op.id, op.process, index, op.time, None, "info", topic, partition, key, payload, None, None
    )


def _complete_send(send: Send, op: Op, fail: _Fail) -> None:
    send.complete_time = op.time
    send.outcome = op.type
    send.error = op.error
    value = op.value
    if value is None:
        return
    line = op.line
    get = value.get
    topic = get("topic", send.topic)
    if topic != send.topic:
        raise fail(
            line, "op.value.topic", f"expected {send.topic!r} as invoked, got {_describe(topic)}"
        )
    payload = get("value", send.value)
    if payload != send.value:
        raise fail(
            line, "op.value.value", f"expected {send.value!r} as invoked, got {_describe(payload)}"
        )
    partition = get("partition")
    if partition is not None:
        if type(partition) is not int or partition < 0:
            raise fail(
                line,
                "op.value.partition",
                f"expected an integer >= 0 or null, got {_describe(partition)}",
            )
        if send.partition is not None and partition != send.partition:
            raise fail(
                line, "op.value.partition", f"expected {send.partition} as invoked, got {partition}"
            )
        send.partition = partition
    offset = get("offset")
    if offset is not None and (type(offset) is not int or offset < -1):
        raise fail(
            line, "op.value.offset", f"expected an integer >= -1 or null, got {_describe(offset)}"
        )
    if op.type == "ok" and offset is not None and offset >= 0:
        send.offset = offset


def _polled_records(op: Op, fail: _Fail) -> list[PolledRecord]:
    line = op.line
    value = op.value
    records = value.get("records") if value is not None else None
    if type(records) is not list:
        raise fail(line, "op.value.records", f"expected a list, got {_describe(records)}")
    polled = []
    for index, record in enumerate(records):
        where = f"op.value.records[{index}]"
        if type(record) is not dict:
            raise fail(line, where, f"expected an object, got {_describe(record)}")
        topic = record.get("topic")
        if type(topic) is not str:
            raise fail(line, f"{where}.topic", f"expected a string, got {_describe(topic)}")
        partition = record.get("partition")
        if type(partition) is not int or partition < 0:
            raise fail(
                line, f"{where}.partition", f"expected an integer >= 0, got {_describe(partition)}"
            )
        offset = record.get("offset")
        if type(offset) is not int or offset < 0:
            raise fail(
                line, f"{where}.offset", f"expected an integer >= 0, got {_describe(offset)}"
            )
        payload = record.get("value")
        if type(payload) is not str:
            raise fail(line, f"{where}.value", f"expected a string, got {_describe(payload)}")
        polled.append(PolledRecord(topic, partition, offset, payload))
    return polled


def _parse_log(
    record: dict[str, Any], line: int, fail: _Fail
) -> tuple[tuple[str, int], list[LogRecord]]:
    topic = record.get("topic")
    if type(topic) is not str:
        raise fail(line, "log.topic", f"expected a string, got {_describe(topic)}")
    partition = record.get("partition")
    if type(partition) is not int or partition < 0:
        raise fail(line, "log.partition", f"expected an integer >= 0, got {_describe(partition)}")
    entries = record.get("records")
    if type(entries) is not list:
        raise fail(line, "log.records", f"expected a list, got {_describe(entries)}")
    records = []
    previous = -1
    for index, entry in enumerate(entries):
        where = f"log.records[{index}]"
        if type(entry) is not dict:
            raise fail(line, where, f"expected an object, got {_describe(entry)}")
        offset = entry.get("offset")
        if type(offset) is not int or offset < 0:
            raise fail(
                line, f"{where}.offset", f"expected an integer >= 0, got {_describe(offset)}"
            )
        if offset <= previous:
            raise fail(
                line, f"{where}.offset", f"offsets must increase, got {offset} after {previous}"
            )
        previous = offset
        payload = entry.get("value")
        if type(payload) is not str:
            raise fail(line, f"{where}.value", f"expected a string, got {_describe(payload)}")
        extras = []
        for name in ("producer_id", "epoch", "sequence"):
            extra = entry.get(name)
            if extra is not None and type(extra) is not int:
                raise fail(
                    line, f"{where}.{name}", f"expected an integer or null, got {_describe(extra)}"
                )
            extras.append(extra)
        records.append(LogRecord(offset, payload, *extras))
    return (topic, partition), records


def _check_meta(record: dict[str, Any], line: int, fail: _Fail) -> None:
    fmt = record.get("format", FORMAT)
    if fmt != FORMAT:
        raise fail(line, "meta.format", f"expected {FORMAT!r}, got {_describe(fmt)}")
    version = record.get("version", VERSION)
    if version != VERSION or type(version) is not int:
        raise fail(
            line, "meta.version", f"unsupported version {_describe(version)}; expected {VERSION}"
        )
