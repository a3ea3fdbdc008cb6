"""A fast reader for eosim's JSON Lines histories: the send lines straight into columns.

A history from eosim's model is nearly all send lines (``HistoryRecorder._send_line``), each
in one fixed shape::

    {"kind":"op","id":3,"type":"ok","f":"send","process":"p","time":0.5,
     "value":{"topic":"t","partition":2,"key":null,"value":"v","offset":7},"error":"E"}

(one line; ``"offset"`` and ``"error"`` optional, ``"key"`` a string or null). Decoding each
with ``json.loads`` and checking it field by field costs about 8 µs a line. This reader instead
works on the whole file at once, without a Python step per line:

* a scanner picks the send lines, those that match :data:`SEND_LINE` in full (exactly that
  shape, no whitespace, no escape, no control character in a string, numbers as JSON writes
  them, integers of at most 18 digits, strings valid UTF-8), and cuts their fields out into
  columns (:class:`SendLines`): numbers as numbers, strings as byte ranges of the file
  (:class:`Spans`) made into Python strings only where needed;
* invocations and completions are paired by id with sorting, and every rule the line-by-line
  reader applies to a send (ids unique, a completion after its invocation, of the same
  process, topic and value, a partition as invoked) is checked on the columns.

There are two scanners, giving the same columns bit for bit (``tests/test_jsonl_reader.py``
runs every case with each and compares them on every one-character edit of each shape):

* ``"compiled"``: ``_jsonl_scan`` (``analysis/_jsonl_scan.c``), one pass in C over the bytes
  that matches each line against the shape as it cuts it out. It is an optional extension:
  ``setup.py`` builds it where a C compiler is at hand, and it is the default where built;
* ``"arrow"``: :mod:`eosim.analysis.jsonl_arrow`, Arrow's RE2 and numpy, a pass over the
  whole file per step (about 3.5 times slower). Used where the C scanner was not built.

:data:`SCANNER` names the one in use.

A ``log`` or ``replica`` line whose records are as the model writes them (:data:`LOG_RECORDS`:
``offset``, ``value``, ``producer_id``, ``epoch``, ``sequence``, in that order, not
transactional) has its records read by the scanner too, into the model's own columns
(``eosim.simulation.history.LogRecords``), which the history keeps as a ``LogTable``, as it
does a model's logs; the rest of the line is decoded as JSON.

Every other line (meta, faults, other ops, a send line or records in any other shape) is read
by ``eosim.analysis.history``'s own per-line reader. The result is a ``History`` equal field by
field to the one the line-by-line reader gives: ``history.sends`` is a :class:`ReadSendTable`
(a ``SendTable`` whose columns were read, not derived), ``history.ops`` builds its ``Op``
objects when first read.

The fallback rule: whenever anything is not as above (invalid UTF-8, a line that does not
decode or fails a check, a send line in another shape, an op without an id, ids shared by
send and other ops, a pairing rule broken), :func:`read_history` returns None and the caller
reads the whole file line by line, which gives the same history or names the first bad line
as it always did. To extend it (say a second common line shape): give the shape its own
pattern, teach both scanners to cut it out into the same columns (the C one in
``_jsonl_scan.c``, the Arrow one in ``jsonl_arrow``), and add its lines to the cases of
``tests/test_jsonl_reader.py``, which compares the scanners with each other and this reader
with the line-by-line one.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from eosim.analysis.columns import (
    NO_OFFSET,
    NO_PARTITION,
    SendColumns,
    SendTable,
    _BuiltOnDemand,
    object_array,
)
from eosim.analysis.history import (
    BLANK,
    History,
    HistoryError,
    Op,
    Send,
    _build_history,
    _decode_line,
    paused_gc,
)
from eosim.simulation.history import LogRecords

try:  # the optional C accelerator (setup.py builds it where a C compiler is at hand)
    from eosim.analysis import _jsonl_scan
except ImportError:  # pragma: no cover - exercised where the build skipped it
    _jsonl_scan = None

# A JSON string without escapes or control characters (the process's must not be empty).
_STRING = r'"[^"\\\x00-\x1f]*"'
_INT = r"-?(?:0|[1-9][0-9]{0,17})"  # fits an int64
_COUNT = r"(?:0|[1-9][0-9]{0,17})"
# The send line's one shape, in full (RE2 syntax; `\n?` for the line's newline).
SEND_LINE = (
    r'^\{"kind":"op","id":' + _INT + r',"type":"(?:invoke|ok|fail|info)","f":"send"'
    r',"process":"[^"\\\x00-\x1f]+"'
    r',"time":-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?'
    r',"value":\{"topic":' + _STRING + r',"partition":(?:null|' + _COUNT + r")"
    r',"key":(?:null|'
    + _STRING
    + r'),"value":'
    + _STRING
    + r'(?:,"offset":(?:null|-1|'
    + _COUNT
    + r"))?\}"
    r'(?:,"error":' + _STRING + r")?\}\n?$"
)
# A `log` or `replica` line's records as the model writes them (not transactional), in full:
# the array from `[` to `]`.
_LOG_RECORD = (
    r'\{"offset":' + _COUNT + r',"value":' + _STRING + r',"producer_id":' + _INT
    + r',"epoch":' + _INT + r',"sequence":' + _INT + r"\}"
)  # fmt: skip
LOG_RECORDS = r"^\[" + _LOG_RECORD + r"(?:," + _LOG_RECORD + r")*\]$"
_RECORDS_LINES = (b'{"kind":"log",', b'{"kind":"replica",')
_RECORDS_NAME = b'"records"'
_RECORDS_KEY = _RECORDS_NAME + b":"
# Fewer send lines than this: the line-by-line reader is as quick.
MIN_SEND_LINES = 64
# An op type's code in SendLines.types: its index here.
_TYPES = np.array(["invoke", "ok", "fail", "info"], dtype=object)
INVOKE, OK, _INFO = 0, 1, 3
# How the send lines are found and cut out: "compiled" (`_jsonl_scan`, one pass in C) where it
# was built, else "arrow" (`jsonl_arrow`: an RE2 pass, then numpy and Arrow between known
# quotes). Both give the same columns; tests set it to run each.
SCANNER = "compiled" if _jsonl_scan is not None else "arrow"
_SEND_COLUMNS = 15  # per send line in `_jsonl_scan.scan`'s ints


# The lines that are not send lines: (row, start, stop) each, stop before or after a newline.
Others = list[tuple[int, int, int]]
# A line's records as columns: offset, value, producer_id, epoch, sequence.
RecordColumns = tuple[np.ndarray, list[str], np.ndarray, np.ndarray, np.ndarray]
# A scanner: the send lines and the other lines of a file (None: decline it), and each records
# array given by its `[` and its line's end: the position of its `]` (the first `}]` after the
# `[`, less one) and its records, or None when it is not in LOG_RECORDS' shape in full or a
# value is "records" or holds "}]".
ScanLines = Callable[[bytes, np.ndarray], "tuple[SendLines, Others] | None"]
ReadRecords = Callable[
    [bytes, np.ndarray, list[tuple[int, int]]], list[tuple[int, RecordColumns] | None]
]


def _scanner() -> tuple[ScanLines, ReadRecords]:
    """The scanner SCANNER names (the Arrow one imported only when used)."""
    if SCANNER == "compiled" and _jsonl_scan is not None:
        return _scan_compiled, _records_compiled
    if SCANNER not in ("compiled", "arrow"):
        raise ValueError(f"jsonl_reader.SCANNER: {SCANNER!r} is not 'compiled' or 'arrow'")
    from eosim.analysis import jsonl_arrow

    return jsonl_arrow.scan, jsonl_arrow.log_records


def read_history(raw: bytes, source: str) -> History | None:
    """The history in `raw` (a whole JSON Lines file), or None when this reader declines it
    (see the module's fallback rule)."""
    with paused_gc():
        try:
            return _read(raw, source)
        except HistoryError:
            return None  # the line-by-line reader names it, or the first error before it


def _read(raw: bytes, source: str) -> History | None:
    if not raw:
        return None
    data = np.frombuffer(raw, dtype=np.uint8)
    scan, _ = _scanner()
    found = scan(raw, data)
    if found is None:
        return None
    sends, others = found
    if len(sends.line) < MIN_SEND_LINES:
        return None
    numbered = _other_lines(raw, data, others, source)
    if numbered is None:
        return None
    other_ids = [record["id"] for _, record in numbered if _is_op(record)]
    if other_ids and np.isin(np.array(other_ids), sends.ids).any():
        return None
    history = _build_history(numbered, source)
    if history.sends:
        return None
    table = sends.table()
    if table is None:
        return None
    history.sends = table
    history.ops = _MergedOps(history.ops, len(sends.line), sends.ops)
    return history


def _scan_compiled(raw: bytes, data: np.ndarray) -> tuple[SendLines, Others] | None:
    """The send lines and the other lines, cut out in one pass by `_jsonl_scan.scan`."""
    assert _jsonl_scan is not None
    ints, times, capacity, n, others, processes, topics = _jsonl_scan.scan(
        raw, NO_PARTITION, NO_OFFSET
    )
    times = np.frombuffer(times, dtype=np.float64, count=n)
    if not np.isfinite(times).all():
        return None
    (
        row,
        ids,
        types,
        partition,
        has_offset,
        offset,
        offset_null,
        process,
        topic,
        key_start,
        key_size,
        value_start,
        value_size,
        error_start,
        error_size,
    ) = np.frombuffer(ints, dtype=np.int64).reshape(_SEND_COLUMNS, capacity)[:, :n]
    sends = SendLines(
        ids=ids,
        types=types,
        process=Coded(process, object_array(processes)),
        times=times,
        topic=Coded(topic, object_array(topics)),
        partition=partition,
        key=_optional_texts(raw, key_start, key_size),
        value=CompiledSpans(raw, value_start, value_start + value_size),
        has_offset=has_offset.astype(bool),
        offset=offset,
        offset_null=offset_null.astype(bool),
        error=_optional_texts(raw, error_start, error_size),
        line=row + 1,
    )
    rows = np.frombuffer(others, dtype=np.int64).reshape(-1, 3).tolist()
    return sends, [(index, start, stop) for index, start, stop in rows]


def _optional_texts(raw: bytes, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Strings of the byte ranges, None where the size is -1 (none in the line)."""
    texts = np.full(len(starts), None, dtype=object)
    at = np.flatnonzero(sizes >= 0)
    if len(at):
        texts[at] = CompiledSpans(raw, starts[at], starts[at] + sizes[at]).texts()
    return texts


def _is_op(record: Any) -> bool:
    return type(record) is dict and record.get("kind") == "op"


def _other_lines(
    raw: bytes, data: np.ndarray, others: Others, source: str
) -> list[tuple[int, Any]] | None:
    """The other lines decoded, by line number (a `log` or `replica` line's records as
    columns where they are as the model writes them); None when one is a send in another
    shape or an op without an integer id (pairing by process: the line-by-line reader's)."""
    logs = _read_log_records(raw, data, others)
    numbered: list[tuple[int, Any]] = []
    for row, start, stop in others:
        record = logs.get(row)
        if record is None:
            record = _decode_line(raw[start:stop], row + 1, source)
        if record is BLANK:
            continue
        if _is_op(record) and (record.get("f") == "send" or type(record.get("id")) is not int):
            return None
        numbered.append((row + 1, record))
    return numbered


class Spans(Protocol):
    """A column of strings kept as byte ranges of the file until asked for."""

    def texts(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The strings (of `rows` only, in their order, when given) as a numpy array."""
        ...

    def equal(self, a: np.ndarray, b: np.ndarray) -> bool:
        """Whether the string of row a[i] equals that of row b[i], for every i."""
        ...


class Coded:
    """A column of strings as codes into its distinct values (one object per value)."""

    def __init__(self, codes: np.ndarray, values: np.ndarray) -> None:
        self.codes = codes
        self.values = values

    def texts(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The strings (of `rows` only, in their order, when given) as a numpy array."""
        codes = self.codes if rows is None else self.codes[rows]
        return self.values[codes] if len(codes) else np.empty(0, dtype=object)


class SendLines:
    """The send lines' fields, a row a line in file order."""

    def __init__(self, **columns: Any) -> None:
        self.__dict__.update(columns)

    ids: np.ndarray
    types: np.ndarray  # codes into _TYPES
    process: Coded
    times: np.ndarray
    topic: Coded
    partition: np.ndarray  # NO_PARTITION for null
    key: np.ndarray
    value: Spans
    has_offset: np.ndarray
    offset: np.ndarray  # NO_OFFSET for null (as -1)
    offset_null: np.ndarray
    error: np.ndarray
    line: np.ndarray

    def table(self) -> ReadSendTable | None:
        """The sends, invocations paired with completions by id, or None when a pairing rule
        of the line-by-line reader is broken."""
        invoked = self.types == INVOKE
        inv = np.flatnonzero(invoked)
        done = np.flatnonzero(~invoked)
        inv_ids = self.ids[inv]
        if (inv_ids[1:] > inv_ids[:-1]).all():  # as eosim numbers them
            order = np.arange(len(inv))
            sorted_ids = inv_ids
        else:
            order = np.argsort(inv_ids, kind="stable")
            sorted_ids = inv_ids[order]
            if not (sorted_ids[1:] != sorted_ids[:-1]).all():
                return None  # a duplicate id
        done_ids = self.ids[done]
        at = np.searchsorted(sorted_ids, done_ids)
        if len(done) and (at >= len(sorted_ids)).any():
            return None
        if len(done) and not (sorted_ids[at] == done_ids).all():
            return None  # completion without invocation
        if len(done) and np.bincount(at).max() > 1:
            return None  # completed twice
        row = order[at]  # the completion's send (row among invocations)
        mine = inv[row]  # the invocation's line row
        if not (self.line[mine] < self.line[done]).all():
            return None  # completed before it was invoked
        for column in (self.process, self.topic):
            if not (column.codes[mine] == column.codes[done]).all():
                return None
        if len(done) and not self.value.equal(mine, done):
            return None
        inv_partition = self.partition[mine]
        done_partition = self.partition[done]
        if (
            (inv_partition != NO_PARTITION)
            & (done_partition != NO_PARTITION)
            & (inv_partition != done_partition)
        ).any():
            return None
        n = len(inv)
        outcome_codes = np.full(n, _INFO, dtype=np.int64)
        outcome_codes[row] = self.types[done]
        outcome = _TYPES[outcome_codes]
        partition = self.partition[inv].copy()
        reported = done_partition != NO_PARTITION
        partition[row[reported]] = done_partition[reported]
        offset = np.full(n, NO_OFFSET, dtype=np.int64)
        acked = (self.types[done] == OK) & (self.offset[done] >= 0)
        offset[row[acked]] = self.offset[done][acked]
        error = np.full(n, None, dtype=object)
        error[row] = self.error[done]
        invoke_time = self.times[inv]
        complete_time = np.full(n, np.nan)
        complete_time[row] = self.times[done]
        columns = SendColumns(
            self.process.texts(inv),
            self.topic.texts(inv),
            partition,
            self.value.texts(inv),
            outcome,
            offset,
            error,
            lambda: (invoke_time, complete_time),
        )
        return ReadSendTable(columns, self.ids[inv], self.key[inv])

    def ops(self) -> list[Op]:
        """The send lines' `Op` objects, as the line-by-line reader makes them."""
        types = _TYPES[self.types].tolist()
        partition = [None if p == NO_PARTITION else p for p in self.partition.tolist()]
        offset = self.offset.tolist()  # as written (-1 for null too)
        offset_null = self.offset_null.tolist()
        ops = []
        for i, (op_id, process, time, topic, key, value, has_offset, error, line) in enumerate(
            zip(
                self.ids.tolist(),
                self.process.texts().tolist(),
                self.times.tolist(),
                self.topic.texts().tolist(),
                self.key.tolist(),
                self.value.texts().tolist(),
                self.has_offset.tolist(),
                self.error.tolist(),
                self.line.tolist(),
                strict=True,
            )
        ):
            fields = {"topic": topic, "partition": partition[i], "key": key, "value": value}
            if has_offset:
                fields["offset"] = None if offset_null[i] else offset[i]
            ops.append(Op(op_id, types[i], "send", process, time, fields, error, line))
        return ops


class CompiledSpans:
    """Strings of the file as byte ranges [start, stop) (each valid UTF-8), made into Python
    strings by `_jsonl_scan` only when asked for. (`jsonl_arrow.ArrowSpans` is the other
    kind; a scanner's spans have these two methods.)"""

    def __init__(self, raw: bytes, starts: np.ndarray, stops: np.ndarray) -> None:
        self._raw = raw
        self._starts = starts
        self._sizes = stops - starts

    def texts(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The strings (of `rows` only, in their order, when given) as a numpy array."""
        assert _jsonl_scan is not None
        starts = self._starts if rows is None else self._starts[rows]
        sizes = self._sizes if rows is None else self._sizes[rows]
        return object_array(_jsonl_scan.texts(self._raw, starts, sizes))

    def equal(self, a: np.ndarray, b: np.ndarray) -> bool:
        """Whether the string of row a[i] equals that of row b[i], for every i."""
        assert _jsonl_scan is not None
        starts, sizes = self._starts, self._sizes
        return _jsonl_scan.equal(self._raw, starts[a], sizes[a], starts[b], sizes[b])


class ReadSendTable(SendTable):
    """`history.sends` of a history read by :func:`read_history`: the columns as read, and the
    `Send` objects built from them on first access."""

    __slots__ = ("_ids", "_keys")

    def __init__(self, columns: SendColumns, ids: np.ndarray, keys: np.ndarray) -> None:
        _BuiltOnDemand.__init__(self)
        self._columns = columns
        self._log = None  # no recorder behind it
        self._ids = ids
        self._keys = keys

    def __len__(self) -> int:
        assert self._columns is not None
        return len(self._columns)

    def columns(self) -> SendColumns:
        assert self._columns is not None
        return self._columns

    def _build(self) -> list[Send]:
        c = self.columns()
        partition = c.partition.tolist()
        offset = c.offset.tolist()
        completed = c.complete_time.tolist()
        sends = []
        for index, (op_id, process, invoked, done, outcome, topic, key, value, error) in enumerate(
            zip(
                self._ids.tolist(),
                c.process.tolist(),
                c.invoke_time.tolist(),
                completed,
                c.outcome.tolist(),
                c.topic.tolist(),
                self._keys.tolist(),
                c.value.tolist(),
                c.error.tolist(),
                strict=True,
            )
        ):
            known = partition[index]
            acked = offset[index]
            sends.append(
                Send(
                    op_id,
                    process,
                    index,
                    invoked,
                    None if done != done else done,
                    outcome,
                    topic,
                    None if known == NO_PARTITION else known,
                    key,
                    value,
                    None if acked == NO_OFFSET else acked,
                    error,
                )
            )
        return sends


class _MergedOps(_BuiltOnDemand[Op]):
    """`history.ops`: the other lines' ops merged by line number with the send lines' ops,
    built on first access."""

    __slots__ = ("_count", "_make", "_others")

    def __init__(self, others: list[Op], count: int, make: Callable[[], list[Op]]) -> None:
        super().__init__()
        self._others = others
        self._count = count
        self._make = make

    def _build(self) -> list[Op]:
        ops = [*self._others, *self._make()]
        ops.sort(key=lambda op: op.line)
        return ops

    def __len__(self) -> int:
        return len(self._others) + self._count


def _read_log_records(raw: bytes, data: np.ndarray, others: Others) -> dict[int, dict[str, Any]]:
    """The `log` and `replica` lines among `rows` whose records are as the model writes them
    (:data:`LOG_RECORDS`), by row: each line's JSON object with its ``records`` as columns
    (``LogRecords``, which the history reads as a ``LogTable``, as it reads a model's logs).
    The rest of such a line is decoded as JSON with ``[]`` in place of the records; any other
    line is left to the line-by-line reader.

    The records array is found without decoding the line: it must be the value of the line's
    only ``"records"`` (no backslash in the line, so no string holds a quote), at the top
    level (before it, one ``{`` and no ``[``), and end at the first ``}]`` after it; the
    scanner reads it from its ``[`` to that ``]``, in the shape of LOG_RECORDS in full (a
    ``}]`` or a ``"records"`` inside a value makes it fail: the line is then left to the
    line-by-line reader). The rest of the line must decode to an object with
    ``"records": []``: were the key not where it seems (after a string left open, say), the
    line would not be JSON."""
    candidates: list[tuple[int, int, int, int]] = []  # (row, start, stop, the records' `[`)
    for row, start, stop in others:
        if not raw.startswith(_RECORDS_LINES, start, stop):
            continue
        at = raw.find(_RECORDS_KEY, start, stop)
        if (
            at < 0
            or raw.find(b"\\", start, stop) >= 0
            or raw.count(b"{", start, at) != 1
            or raw.find(b"[", start, at) >= 0
        ):
            continue
        opened = at + len(_RECORDS_KEY)
        if raw[opened : opened + 1] == b"[":
            candidates.append((row, start, stop, opened))
    if not candidates:
        return {}
    _, read = _scanner()
    arrays = read(raw, data, [(opened, stop) for _, _, stop, opened in candidates])
    lines: dict[int, dict[str, Any]] = {}
    for (row, start, stop, opened), array_read in zip(candidates, arrays, strict=True):
        if array_read is None:
            continue  # not in the model's shape
        closed, records = array_read
        if raw.count(_RECORDS_NAME, start, opened) + raw.count(_RECORDS_NAME, closed, stop) != 1:
            continue  # a second "records" (none is in the array)
        offset = records[0]
        if not (offset[1:] > offset[:-1]).all():
            continue  # offsets must increase: the line-by-line reader names the record
        try:
            record = json.loads(raw[start:opened] + b"[]" + raw[closed + 1 : stop])
        except ValueError:
            continue
        if (
            type(record) is not dict
            or record.get("records") != []
            or record.get("kind") not in ("log", "replica")  # not a `"kind"` repeated
        ):
            continue
        record["records"] = _log_records(*records)
        lines[row] = record
    return lines


def _records_compiled(
    raw: bytes, data: np.ndarray, arrays: list[tuple[int, int]]
) -> list[tuple[int, RecordColumns] | None]:
    """Each records array (its `[` and its line's end) read by `_jsonl_scan.log_records`."""
    assert _jsonl_scan is not None
    read: list[tuple[int, RecordColumns] | None] = []
    for opened, stop in arrays:
        records = _jsonl_scan.log_records(raw, opened, stop)
        if records is None:
            read.append(None)
            continue
        ints, values, capacity, closed = records
        columns = np.frombuffer(ints, dtype=np.int64).reshape(4, capacity)[:, : len(values)]
        read.append((closed, (columns[0], values, columns[1], columns[2], columns[3])))
    return read


def _log_records(
    offset: np.ndarray,
    values: list[str],
    producer_id: np.ndarray,
    epoch: np.ndarray,
    sequence: np.ndarray,
) -> LogRecords:
    """Records not transactional as the model's columns (``LogRecords``) hold them."""
    records = LogRecords()
    records.offset = array("q", offset.tobytes())
    records.value = values
    records.producer_id = array("q", producer_id.tobytes())
    records.epoch = array("q", epoch.tobytes())
    records.sequence = array("q", sequence.tobytes())
    records.transactional = bytearray(len(values))
    records.time = array("d", bytes(8 * len(values)))
    return records


__all__ = [
    "LOG_RECORDS",
    "MIN_SEND_LINES",
    "SCANNER",
    "SEND_LINE",
    "ReadSendTable",
    "SendLines",
    "Spans",
    "read_history",
]
