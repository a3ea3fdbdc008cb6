"""The run's history: operations, faults and final logs, in the order they happened.

While the run is hot, send ops are kept as columns (:class:`SendLog`) and other entries as
compact tuples; they are turned into the JSON objects of ``docs/history-format.md`` only when
asked (``records()``), so that the bytes written for a given scenario and seed are the same
in every process.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice, repeat
from typing import IO, Any, overload

import numpy as np

FORMAT = "eosim-history"
VERSION = 1


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


# Codes of `SendLog.order` and `SendLog.outcome`.
_INVOKED, _COMPLETED, _OTHER = 0, 1, 2
OUTCOMES = ("ok", "fail", "info")  # a completion's type, by its code in `SendLog.outcome`
_OUTCOME_CODE = {name: code for code, name in enumerate(OUTCOMES)}
NONE = -(2**63)  # `SendLog.partition` and `SendLog.offset`: None
_COMPLETED_BYTE = bytes((_COMPLETED,))


class SendLog:
    """The send ops of a run as columns, the form the model records them in: one row per
    invocation (process, time, topic, partition, key, value) and one per completion (its
    invocation's id, outcome, time, partition, offset, error), plus ``order``, one byte per
    history entry, which says whether it was an invocation, a completion or another entry.

    A completion names the invocation it completes by id and repeats nothing of it: the
    process, topic, key and value of a send's lines are its invocation's. Numbers are kept
    unboxed (``array``); :data:`NONE` stands for None in ``partition`` and ``offset``; the
    rare error and the rare integer time are kept aside (``errors``, ``int_times``), so that
    a send costs about a hundred bytes however long the run. The checks read these columns
    directly (``eosim.analysis.columns.SendColumns.of_log``); :meth:`entries` gives the
    compact tuples the line writer and the object builders read.

    Extending it: a new per-send field is one more column here, filled by
    :meth:`HistoryRecorder.send_invoker` (which :meth:`HistoryRecorder.invoke_send` uses),
    :meth:`HistoryRecorder.complete_send` and :meth:`HistoryRecorder.complete_sends`, written in
    :meth:`entries` and read in ``SendColumns.of_log``; ``tests/test_columns.py`` compares the
    result with the history parsed back from its lines."""

    __slots__ = (
        "completed_id",
        "completed_partition",
        "completed_time",
        "errors",
        "int_times",
        "invoked_id",
        "invoked_partition",
        "invoked_time",
        "key",
        "offset",
        "order",
        "outcome",
        "process",
        "topic",
        "value",
    )

    def __init__(self) -> None:
        self.order = bytearray()  # per history entry: _INVOKED, _COMPLETED or _OTHER
        self.invoked_id = array("q")
        self.process: list[str] = []
        self.invoked_time = array("d")
        self.topic: list[str] = []
        self.invoked_partition = array("q")
        self.key: list[str | None] = []
        self.value: list[str] = []
        self.completed_id = array("q")
        self.outcome = bytearray()  # codes of OUTCOMES
        self.completed_time = array("d")
        self.completed_partition = array("q")
        self.offset = array("q")
        self.errors: dict[int, str] = {}  # completion row -> its error
        # (invoked?, row) of the times that were ints, written as ints
        self.int_times: set[tuple[bool, int]] = set()

    def __len__(self) -> int:
        """The number of send ops (invocations and completions)."""
        return len(self.invoked_id) + len(self.completed_id)

    def invocation_rows(self) -> list[int]:
        """For each completion, its invocation's row (ids increase with invocation order)."""
        invoked = np.frombuffer(self.invoked_id, dtype=np.int64)
        return np.searchsorted(invoked, np.frombuffer(self.completed_id, dtype=np.int64)).tolist()

    def entries(self) -> Iterator[tuple]:
        """The send ops in history order, each as the compact tuple ``("op", id, type,
        "send", process, time, topic, partition, key, value, offset, error)``, its time not
        yet rounded to the history's microseconds."""
        invoked = self._invocations()
        completed = self._completions()
        for code in self.order:
            if code == _INVOKED:
                yield next(invoked)
            elif code == _COMPLETED:
                yield next(completed)

    def _invocations(self) -> Iterator[tuple]:
        int_times = self.int_times
        columns = (self.invoked_id, self.process, self.invoked_time, self.topic)
        columns += (self.invoked_partition, self.key, self.value)
        for row, (op_id, process, time, topic, partition, key, value) in enumerate(
            zip(*columns, strict=True)
        ):
            if int_times and (True, row) in int_times:
                time = int(time)
            yield (
                "op", op_id, "invoke", "send", process, time, topic,
                None if partition == NONE else partition, key, value, None, None,
            )  # fmt: skip

    def _completions(self) -> Iterator[tuple]:
        int_times, errors = self.int_times, self.errors
        process, topic, key, value = self.process, self.topic, self.key, self.value
        columns = (self.invocation_rows(), self.completed_id, self.outcome, self.completed_time)
        columns += (self.completed_partition, self.offset)
        for row, (invoked, op_id, code, time, partition, offset) in enumerate(
            zip(*columns, strict=True)
        ):
            if int_times and (False, row) in int_times:
                time = int(time)
            yield (
                "op", op_id, OUTCOMES[code], "send", process[invoked], time, topic[invoked],
                None if partition == NONE else partition, key[invoked], value[invoked],
                None if offset == NONE else offset, errors.get(row),
            )  # fmt: skip

    def lines(self) -> Iterator[str]:
        """The send ops' lines in history order: byte for byte what ``_ENCODER`` makes of
        :func:`send_record` of each of :meth:`entries` (keys in the same order, strings
        escaped the same way), written from the columns a few thousand rows at a time, each
        field formatted by one mapped builtin per chunk; ``tests/test_columns.py`` compares
        them with ``json.dumps``."""
        invocations = self._invocation_lines()
        completions = self._completion_lines()
        for code in self.order:
            if code == _INVOKED:
                yield next(invocations)
            elif code == _COMPLETED:
                yield next(completions)

    def _invocation_lines(self) -> Iterator[str]:
        process, topic, key, value = self.process, self.topic, self.key, self.value
        for start in range(0, len(self.invoked_id), _CHUNK):
            end = start + _CHUNK
            times = _times(self.invoked_time[start:end], self.int_times, True, start)
            yield from [
                f'{{"kind":"op","id":{i},"type":"invoke","f":"send","process":{p},"time":{t},'
                f'"value":{{"topic":{tp},"partition":{n},"key":{k},"value":{v}}}}}'
                for i, p, t, tp, n, k, v in zip(
                    self.invoked_id[start:end],
                    _texts(process[start:end]),
                    times,
                    _texts(topic[start:end]),
                    _numbers(self.invoked_partition[start:end]),
                    _texts(key[start:end]),
                    map(_string, value[start:end]),
                    strict=True,
                )
            ]

    def _completion_lines(self) -> Iterator[str]:
        invoked_rows = self.invocation_rows()
        errors = self.errors
        for start in range(0, len(self.completed_id), _CHUNK):
            end = start + _CHUNK
            rows = invoked_rows[start:end]
            times = _times(self.completed_time[start:end], self.int_times, False, start)
            ends = ["}}"] * len(rows)
            for row, error in errors.items():  # few
                if start <= row < end:
                    ends[row - start] = f'}},"error":{_string(error)}}}'
            yield from [
                f'{{"kind":"op","id":{i},"type":"{OUTCOMES[c]}","f":"send","process":{p},'
                f'"time":{t},"value":{{"topic":{tp},"partition":{n},"key":{k},"value":{v}'
                f"{'' if c != _OK else f',{_OFFSET}{o}'}{e}"
                for i, c, p, t, tp, n, k, v, o, e in zip(
                    self.completed_id[start:end],
                    self.outcome[start:end],
                    _texts(map(self.process.__getitem__, rows)),
                    times,
                    _texts(map(self.topic.__getitem__, rows)),
                    _numbers(self.completed_partition[start:end]),
                    _texts(map(self.key.__getitem__, rows)),
                    map(_string, map(self.value.__getitem__, rows)),
                    _numbers(self.offset[start:end]),
                    ends,
                    strict=True,
                )
            ]


_CHUNK = 4096  # rows a line writer formats at a time
_OK = OUTCOMES.index("ok")
_OFFSET = '"offset":'


def _texts(items: Iterable[str | None]) -> Iterator[str]:
    """Each item as its JSON text (None as null): strings repeat (processes, topics, keys),
    so each distinct one is escaped once."""
    items = list(items)
    escaped = {item: "null" if item is None else _string(item) for item in set(items)}
    return map(escaped.__getitem__, items)


def _numbers(column: array) -> Iterator[str]:
    """An integer column's items as JSON text, :data:`NONE` as null."""
    return ("null" if n == NONE else str(n) for n in column) if NONE in column else map(str, column)


def _times(column: array, int_times: set[tuple[bool, int]], invoked: bool, start: int) -> list[str]:
    """Times as the history writes them, ``float.__repr__(round(time, 6))`` (an int stays an
    int). Completions come a batch at a time, so their times repeat and each distinct one is
    written once; an invocation's is written by :func:`time_text`."""
    if invoked:
        texts = list(map(time_text, column))
    else:
        written = {t: time_text(t) for t in set(column)}
        texts = list(map(written.__getitem__, column))
    for was_invoked, row in int_times:  # few
        if was_invoked is invoked and start <= row < start + len(texts):
            texts[row - start] = int.__repr__(round(int(column[row - start]), 6))
    return texts


def time_text(time: float) -> str:
    """``float.__repr__(round(time, 6))``, the way a history writes a float time, made
    faster for times from 0.0001 ms to 1e9 ms (11.5 days): there the time rounded to 6
    decimals has at most 15 significant digits, so the shortest text that gives back the
    rounded float is those digits, which ``f"{time:.6f}"`` writes (rounding correctly, as ``round``
    does), less its trailing zeros. Other times take the long way (``repr`` writes exponents
    there). ``tests/test_columns.py`` compares the two."""
    if 1e-4 <= time < 1e9:
        text = f"{time:.6f}".rstrip("0")
        return text + "0" if text[-1] == "." else text
    return float.__repr__(round(time, 6))


class LogRecords(Sequence[dict[str, Any]]):
    """A partition's final data records, as a history's ``log`` and ``replica`` lines hold
    them, kept as columns: read one by one, each is the record's JSON object (``offset``,
    ``value``, ``producer_id``, ``epoch``, ``sequence``, and for a transactional record
    ``transactional`` and ``time``). A run's logs hold about as many records as it sends, so
    they cost tens of bytes a record instead of an object each; :meth:`rows` gives them to the
    history reader and :meth:`json` to the line writer without building those objects."""

    __slots__ = (
        "epoch",
        "int_times",
        "offset",
        "producer_id",
        "sequence",
        "time",
        "transactional",
        "value",
    )

    def __init__(self) -> None:
        self.offset = array("q")
        self.value: list[str] = []
        self.producer_id = array("q")
        self.epoch = array("q")
        self.sequence = array("q")
        self.transactional = bytearray()
        self.time = array("d")  # when appended, rounded; 0 for a record not transactional
        self.int_times: set[int] = set()  # the rows whose time was an int, written as one

    def append(
        self,
        offset: int,
        value: str,
        producer_id: int,
        epoch: int,
        sequence: int,
        time: float | None = None,
    ) -> None:
        """One more record, in offset order; ``time`` (when it was appended) for a
        transactional record only."""
        self.offset.append(offset)
        self.value.append(value)
        self.producer_id.append(producer_id)
        self.epoch.append(epoch)
        self.sequence.append(sequence)
        self.transactional.append(time is not None)
        if type(time) is int:
            self.int_times.add(len(self.time))
        self.time.append(0.0 if time is None else round(time, 6))

    def extend(
        self,
        offsets: range,
        values: Sequence[str],
        producer_id: int,
        epoch: int,
        sequences: Iterable[int],
        time: float | None = None,
    ) -> None:
        """Records of one batch at once (``offsets`` and ``values`` of the same length), as
        :meth:`append` would add them one by one."""
        n = len(offsets)
        if len(values) != n:
            raise ValueError(f"{n} offsets for {len(values)} values")
        if time is not None and type(time) is int:
            self.int_times.update(range(len(self.time), len(self.time) + n))
        self.offset.extend(offsets)
        self.value.extend(values)
        self.producer_id.extend(repeat(producer_id, n))
        self.epoch.extend(repeat(epoch, n))
        self.sequence.extend(sequences)
        self.transactional.extend(repeat(time is not None, n))
        self.time.extend(repeat(0.0 if time is None else round(time, 6), n))

    def __len__(self) -> int:
        return len(self.offset)

    def rows(self) -> Iterator[tuple[int, str, int, int, int, float | None, bool | None]]:
        """(offset, value, producer_id, epoch, sequence, time, transactional) per record;
        time and transactional are None for a record not transactional."""
        columns = (self.offset, self.value, self.producer_id, self.epoch, self.sequence)
        int_times = self.int_times
        for i, (*row, transactional, time) in enumerate(
            zip(*columns, self.transactional, self.time, strict=True)
        ):
            if not transactional:
                yield (*row, None, None)
            else:
                yield (*row, int(time) if int_times and i in int_times else time, True)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return list(self)[index]
        return self._record(index if index >= 0 else len(self) + index)

    def _record(self, i: int) -> dict[str, Any]:
        record: dict[str, Any] = {
            "offset": self.offset[i],
            "value": self.value[i],
            "producer_id": self.producer_id[i],
            "epoch": self.epoch[i],
            "sequence": self.sequence[i],
        }
        if self.transactional[i]:
            record["transactional"] = True
            record["time"] = int(self.time[i]) if i in self.int_times else self.time[i]
        return record

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(self._record, range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LogRecords | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"LogRecords({len(self)} records)"

    def json(self) -> str:
        """The records as ``_ENCODER`` writes the list of their objects, byte for byte."""
        parts = []
        for offset, value, producer_id, epoch, sequence, time, transactional in self.rows():
            text = (
                f'{{"offset":{offset},"value":{_string(value)},"producer_id":{producer_id},'
                f'"epoch":{epoch},"sequence":{sequence}'
            )
            if transactional:
                text += f',"transactional":true,"time":{_json_number(time)}'
            parts.append(text + "}")
        return "[" + ",".join(parts) + "]"


def _listed(line: dict[str, Any]) -> dict[str, Any]:
    """A line whose ``records`` are :class:`LogRecords`, with them as a list of objects."""
    records = line.get("records")
    if type(records) is LogRecords:
        return {**line, "records": list(records)}
    return line


def _encode_line(line: dict[str, Any]) -> str:
    """A line as ``_ENCODER`` writes :func:`_listed` of it; :class:`LogRecords` write
    themselves, in place of an empty list (no string in a line holds an unescaped quote, so
    the first ``"records":[]`` is the key's)."""
    records = line.get("records")
    if type(records) is not LogRecords:
        return _ENCODER.encode(line)
    text = _ENCODER.encode({**line, "records": []})
    return text.replace('"records":[]', '"records":' + records.json(), 1)


class HistoryRecorder:
    def __init__(self, meta: dict[str, Any]) -> None:
        self.meta = {"kind": "meta", "format": FORMAT, "version": VERSION, **meta}
        self.sends = SendLog()
        # The entries other than send ops, in order (few, among the sends); `sends.order`
        # places them.
        self._others: list[tuple] = []
        self._next_id = 0
        self.logs: list[dict[str, Any]] = []
        self.end_lines: list[dict[str, Any]] = []
        sends = self.sends
        self._order = sends.order.append
        self._invoked = (
            sends.invoked_id.append, sends.process.append, sends.invoked_time.append,
            sends.topic.append, sends.invoked_partition.append, sends.key.append,
            sends.value.append,
        )  # fmt: skip
        self._completed = (
            sends.completed_id.append, sends.outcome.append, sends.completed_time.append,
            sends.completed_partition.append, sends.offset.append,
        )  # fmt: skip

    def _add(self, entry: tuple) -> None:
        """Record an entry other than a send op."""
        self._order(_OTHER)
        self._others.append(entry)

    def invoke_send(
        self,
        process: str,
        time: float,
        topic: str,
        partition: int | None,
        key: str | None,
        value: str,
    ) -> int:
        """Invoke a send; returns its op id, which its completion names."""
        return self.send_invoker(process, topic, partition)(time, key, value)

    def send_invoker(
        self, process: str, topic: str, partition: int | None
    ) -> Callable[[float, str | None, str], int]:
        """:meth:`invoke_send` with its process, topic and partition fixed: a function of the
        time, key and value, for an application that invokes many sends alike."""
        sends = self.sends
        order = sends.order.append
        ids, processes, times, topics, partitions, keys, values = self._invoked
        int_times = sends.int_times
        invoked = sends.invoked_id
        partition_code = NONE if partition is None else partition

        def invoke(time: float, key: str | None, value: str) -> int:
            op_id = self._next_id
            self._next_id = op_id + 1
            order(_INVOKED)
            if type(time) is int:
                int_times.add((True, len(invoked)))
            ids(op_id)
            processes(process)
            times(time)
            topics(topic)
            partitions(partition_code)
            keys(key)
            values(value)
            return op_id

        return invoke

    def complete_send(
        self,
        op_id: int,
        type_: str,
        time: float,
        partition: int | None,
        offset: int | None,
        error: str | None,
    ) -> None:
        """Complete the send invoked as ``op_id``: ``type_`` is ``ok``, ``fail`` or ``info``;
        its line repeats the invocation's process, topic, key and value."""
        self._order(_COMPLETED)
        ids, outcomes, times, partitions, offsets = self._completed
        if type(time) is int or error is not None:
            row = len(self.sends.completed_id)
            if type(time) is int:
                self.sends.int_times.add((False, row))
            if error is not None:
                self.sends.errors[row] = error
        ids(op_id)
        outcomes(_OUTCOME_CODE[type_])
        times(time)
        partitions(NONE if partition is None else partition)
        offsets(NONE if offset is None else offset)

    def complete_sends(
        self,
        op_ids: list[int],
        type_: str,
        time: float,
        partition: int | None,
        offsets: list[int] | None,
        error: str | None = None,
    ) -> None:
        """:meth:`complete_send` of each of ``op_ids``, in order, in one step (a whole
        batch's records): the same outcome, time, partition and error for all, and each its
        offset (``offsets`` None: none)."""
        n = len(op_ids)
        if not n:
            return
        sends = self.sends
        row = len(sends.completed_id)
        sends.order += _COMPLETED_BYTE * n
        if type(time) is int:
            sends.int_times.update((False, r) for r in range(row, row + n))
        if error is not None:
            sends.errors.update(dict.fromkeys(range(row, row + n), error))
        sends.completed_id.extend(op_ids)
        sends.outcome += bytes((_OUTCOME_CODE[type_],)) * n
        sends.completed_time.extend([time] * n)
        sends.completed_partition.extend([NONE if partition is None else partition] * n)
        sends.offset.extend([NONE] * n if offsets is None else offsets)

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
        return len(self.sends) + sum(1 for e in self._others if e[0] == "gop")

    def items(self) -> Iterator[tuple | dict[str, Any]]:
        """The history's lines in order, as :meth:`records` gives them, except for two kinds
        of line the model writes by construction well formed, which come as tuples: a send op
        is the compact tuple of :meth:`SendLog.entries`, its time not yet rounded to the
        history's microseconds; a partition's final log is ``("log", line)``."""
        yield self.meta
        sends = self.sends.entries()
        others = iter(self._others)
        for code in self.sends.order:
            yield self._item(next(others)) if code == _OTHER else next(sends)
        for line in self.logs:
            yield ("log", line)
        yield from self.end_lines

    def send_lines(self) -> list[int]:
        """The line numbers of the send ops in :meth:`items` (the meta line is 1)."""
        return [i + 2 for i, code in enumerate(self.sends.order) if code != _OTHER]

    def other_items(self) -> Iterator[tuple[int, tuple | dict[str, Any]]]:
        """Every other item of :meth:`items`, with its line number (the meta line is 1):
        what ``eosim.analysis.history.history_from_recorder`` reads besides the sends,
        without a step per send."""
        yield 1, self.meta
        order = self.sends.order
        position = -1
        for entry in self._others:
            position = order.index(_OTHER, position + 1)
            yield position + 2, self._item(entry)
        line = len(order) + 1
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
        """The history's lines as JSON objects (a log's records as a list of objects)."""
        for item in self.items():
            if type(item) is not tuple:
                yield _listed(item)
            elif item[0] == "log":
                yield _listed(item[1])
            else:
                yield send_record(item)

    def lines(self) -> Iterator[str]:
        """The history's lines as written: compact JSON, one object a line."""
        encode = _ENCODER.encode
        yield encode(self.meta)
        sends = self.sends.lines()
        others = iter(self._others)
        for code in self.sends.order:
            yield encode(self._item(next(others))) if code == _OTHER else next(sends)
        for line in self.logs:
            yield _encode_line(line)
        for line in self.end_lines:
            yield _encode_line(line)

    def write(self, stream: IO[str]) -> None:
        for line in self.lines():
            stream.write(line)
            stream.write("\n")

    def digest(self) -> str:
        """SHA-256 of the bytes :meth:`write` writes (hashed a few thousand lines at a time)."""
        h = hashlib.sha256()
        lines = self.lines()
        while chunk := list(islice(lines, 4096)):
            chunk.append("")
            h.update("\n".join(chunk).encode("utf-8"))
        return h.hexdigest()
