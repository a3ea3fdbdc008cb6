"""A fast reader for eosim's JSON Lines histories: the send lines straight into columns.

A history from eosim's model is nearly all send lines (``HistoryRecorder._send_line``), each
in one fixed shape::

    {"kind":"op","id":3,"type":"ok","f":"send","process":"p","time":0.5,
     "value":{"topic":"t","partition":2,"key":null,"value":"v","offset":7},"error":"E"}

(one line; ``"offset"`` and ``"error"`` optional, ``"key"`` a string or null). Decoding each
with ``json.loads`` and checking it field by field costs about 8 µs a line. This reader instead
works on the whole file at once, without a Python step per line:

* a line is taken as a send line only when it matches :data:`SEND_LINE` (Arrow's RE2, one
  DFA pass, no captures) in full: exactly that shape, no whitespace, no escape, no control
  character in a string, numbers as JSON writes them (integers of at most 18 digits);
* in such a line every string is a run without quotes, so the fields lie between known
  quotes: their bytes are cut out with numpy and become Arrow strings, then numbers or
  Python strings (for process, topic and outcome one object per distinct value);
* invocations and completions are paired by id with sorting, and every rule the line-by-line
  reader applies to a send (ids unique, a completion after its invocation, of the same
  process, topic and value, a partition as invoked) is checked on the columns.

A ``log`` or ``replica`` line whose records are as the model writes them (:data:`LOG_RECORDS`:
``offset``, ``value``, ``producer_id``, ``epoch``, ``sequence``, in that order, not
transactional) has its records read the same way, into the model's own columns
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
pattern and field positions, read it into the same columns, and add its lines to the cases of
``tests/test_jsonl_reader.py``, which compares this reader with the line-by-line one.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

# Arrow's compute functions called by name: importing pyarrow.compute builds a Python wrapper
# for each of its hundreds of functions (0.04 - 0.1 s, a tenth or more of a load).
from pyarrow._compute import CastOptions, MatchSubstringOptions, call_function

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
_QUOTE, _NEWLINE, _COMMA, _N = ord('"'), ord("\n"), ord(","), ord("n")
_TYPES = np.array(["invoke", "ok", "fail", "info"], dtype=object)
_INVOKE, _OK = 0, 1


def read_history(raw: bytes, source: str) -> History | None:
    """The history in `raw` (a whole JSON Lines file), or None when this reader declines it
    (see the module's fallback rule)."""
    with paused_gc():
        try:
            return _read(raw, source)
        except HistoryError:
            return None  # the line-by-line reader names it, or the first error before it


def _read(raw: bytes, source: str) -> History | None:
    data = np.frombuffer(raw, dtype=np.uint8)
    ends = np.flatnonzero(data == _NEWLINE) + 1
    if not len(ends) or ends[-1] != len(raw):
        ends = np.append(ends, len(raw))
    if len(ends) < MIN_SEND_LINES or not len(raw):
        return None
    offsets = np.zeros(len(ends) + 1, dtype=np.int64)
    offsets[1:] = ends
    lines = pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(raw))
    try:
        lines.validate(full=True)  # UTF-8
    except pa.ArrowInvalid:
        return None
    send_rows = _matching(lines, SEND_LINE)
    is_send = np.zeros(len(ends), dtype=bool)
    is_send[send_rows] = True
    if len(send_rows) < MIN_SEND_LINES:
        return None
    quotes = np.flatnonzero(data == _QUOTE)
    other_rows = np.flatnonzero(~is_send).tolist()
    logs = _read_log_records(raw, data, offsets, quotes, other_rows)
    # Every other line, through the line-by-line reader.
    other_ids: list[int] = []
    numbered: list[tuple[int, Any]] = []
    for row in other_rows:
        record = logs.get(row)
        if record is None:
            record = _decode_line(raw[offsets[row] : offsets[row + 1]], row + 1, source)
        if record is BLANK:
            continue
        if type(record) is dict and record.get("kind") == "op":
            op_id = record.get("id")
            if record.get("f") == "send" or type(op_id) is not int:
                return None  # a send in another shape, or pairing by process
            other_ids.append(op_id)
        numbered.append((row + 1, record))
    sends = _SendLines.read(data, offsets, quotes, send_rows)
    if sends is None or (other_ids and np.isin(np.array(other_ids), sends.ids).any()):
        return None
    history = _build_history(numbered, source)
    if history.sends:
        return None
    table = sends.table()
    if table is None:
        return None
    history.sends = table
    history.ops = _MergedOps(history.ops, len(send_rows), sends.ops)
    return history


class _SendLines:
    """The send lines' fields, a row a line in file order."""

    def __init__(self, **columns: Any) -> None:
        self.__dict__.update(columns)

    ids: np.ndarray
    types: np.ndarray  # codes into _TYPES
    process: np.ndarray
    times: np.ndarray
    topic: np.ndarray
    partition: np.ndarray  # NO_PARTITION for null
    key: np.ndarray
    value: pa.LargeStringArray
    has_offset: np.ndarray
    offset: np.ndarray  # NO_OFFSET for null (as -1)
    offset_null: np.ndarray
    error: np.ndarray
    line: np.ndarray

    @classmethod
    def read(
        cls, data: np.ndarray, offsets: np.ndarray, quotes: np.ndarray, rows: np.ndarray
    ) -> _SendLines | None:
        """The fields of the send lines `rows`; `quotes` are the positions of every `"` in
        `data`."""
        starts = offsets[rows]
        stops = offsets[rows + 1]
        stops = stops - (data[stops - 1] == _NEWLINE)  # without the newline
        first = np.searchsorted(quotes, starts)

        def q(index: np.ndarray | int) -> np.ndarray:
            return quotes[first + index]

        # (SEND_LINE has matched: the shape is known but for these three.)
        keyed = (q(30) - q(29) == 2).astype(np.int64)  # `"key":"`, not `"key":null,`
        v = 32 + 2 * keyed  # the value's token: between quotes v and v + 1
        has_offset = data[q(v + 1) + 1] == _COMMA
        has_error = data[stops - 2] == _QUOTE  # the line ends `"}`, not `}}`
        # The offset runs to the `}` closing the value object.
        offset_stop = np.where(has_error, q(np.where(has_error, v + 4, 0)) - 2, stops - 2)
        types = _type_codes(data, q(8), q(9))
        n = len(rows)
        key = np.full(n, None, dtype=object)
        if keyed.any():
            at = np.flatnonzero(keyed)
            key[at] = _texts(data, q(30)[at] + 1, q(31)[at])
        error = np.full(n, None, dtype=object)
        if has_error.any():
            at = np.flatnonzero(has_error)
            e = (v + 1 + 2 * has_offset + 3)[at]
            error[at] = _texts(data, quotes[first[at] + e] + 1, quotes[first[at] + e + 1])
        offset = np.full(n, NO_OFFSET, dtype=np.int64)
        offset_null = np.zeros(n, dtype=bool)
        if has_offset.any():
            at = np.flatnonzero(has_offset)
            o_start = quotes[first[at] + v[at] + 3] + 2
            offset_null[at] = data[o_start] == _N
            at_int = at[~offset_null[at]]
            o_start = o_start[~offset_null[at]]
            offset[at_int] = _integers(data, o_start, offset_stop[at_int])
        partition = np.full(n, NO_PARTITION, dtype=np.int64)
        p_start = q(27) + 2
        known = data[p_start] != _N
        partition[known] = _integers(data, p_start[known], q(28)[known] - 1)
        times = _floats(data, q(19) + 2, q(20) - 1)
        if not np.isfinite(times).all():
            return None
        return cls(
            ids=_integers(data, q(5) + 2, q(6) - 1),
            types=types,
            process=_texts(data, q(16) + 1, q(17), shared=True),
            times=times,
            topic=_texts(data, q(24) + 1, q(25), shared=True),
            partition=partition,
            key=key,
            value=_gather(data, q(v) + 1, q(v + 1)),
            has_offset=has_offset,
            offset=offset,
            offset_null=offset_null,
            error=error,
            line=rows + 1,
        )

    def table(self) -> ReadSendTable | None:
        """The sends, invocations paired with completions by id, or None when a pairing rule
        of the line-by-line reader is broken."""
        invoked = self.types == _INVOKE
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
        for name in ("process", "topic"):  # one object per distinct value
            column = getattr(self, name)
            if not (column[mine] == column[done]).all():
                return None
        value = self.value
        if (
            len(done)
            and not call_function(
                "all", [call_function("equal", [_take(value, mine), _take(value, done)])]
            ).as_py()
        ):
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
        outcome = np.full(n, "info", dtype=object)
        outcome[row] = _TYPES[self.types[done]]
        partition = self.partition[inv].copy()
        reported = done_partition != NO_PARTITION
        partition[row[reported]] = done_partition[reported]
        offset = np.full(n, NO_OFFSET, dtype=np.int64)
        acked = (self.types[done] == _OK) & (self.offset[done] >= 0)
        offset[row[acked]] = self.offset[done][acked]
        error = np.full(n, None, dtype=object)
        error[row] = self.error[done]
        invoke_time = self.times[inv]
        complete_time = np.full(n, np.nan)
        complete_time[row] = self.times[done]
        columns = SendColumns(
            self.process[inv],
            self.topic[inv],
            partition,
            _objects(_take(value, inv)),
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
                self.process.tolist(),
                self.times.tolist(),
                self.topic.tolist(),
                self.key.tolist(),
                self.value.to_pylist(),
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


def _read_log_records(
    raw: bytes, data: np.ndarray, offsets: np.ndarray, quotes: np.ndarray, rows: list[int]
) -> dict[int, dict[str, Any]]:
    """The `log` and `replica` lines among `rows` whose records are as the model writes them
    (:data:`LOG_RECORDS`), by row: each line's JSON object with its ``records`` as columns
    (``LogRecords``, which the history reads as a ``LogTable``, as it reads a model's logs).
    The rest of such a line is decoded as JSON with ``[]`` in place of the records; any other
    line is left to the line-by-line reader.

    The records array is found without decoding the line: it must be the value of the line's
    only ``"records"`` (no backslash in the line, so no string holds a quote), at the top
    level (before it, one ``{`` and no ``[``), and end at the first ``}]`` after it, which the
    pattern then checks in full (a ``}]`` inside a string makes it fail: the line is then
    left to the line-by-line reader). The rest of the line must decode to an object with
    ``"records": []``: were the key not where it seems (after a string left open, say), the
    line would not be JSON."""
    found: list[tuple[int, int, int]] = []  # (row, the `[`, the `]`)
    for row in rows:
        start, stop = int(offsets[row]), int(offsets[row + 1])
        if not raw.startswith(_RECORDS_LINES, start, stop):
            continue
        at = raw.find(_RECORDS_KEY, start, stop)
        if (
            at < 0
            or raw.count(_RECORDS_NAME, start, stop) != 1
            or raw.find(b"\\", start, stop) >= 0
            or raw.count(b"{", start, at) != 1
            or raw.find(b"[", start, at) >= 0
        ):
            continue
        opened = at + len(_RECORDS_KEY)
        closed = raw.find(b"}]", opened, stop) + 1
        if closed > 0 and raw[opened] == ord("["):
            found.append((row, opened, closed))
    if not found:
        return {}
    bounds = np.array([(o, c + 1) for _, o, c in found], dtype=np.int64).ravel()
    spans = pa.LargeStringArray.from_buffers(
        2 * len(found) - 1, pa.py_buffer(bounds), pa.py_buffer(raw)
    )
    spans = _take(spans, np.arange(0, 2 * len(found), 2))
    matched = _matching(spans, LOG_RECORDS)
    found = [found[i] for i in matched.tolist()]
    if not found:
        return {}
    # Each record has 12 quotes: its fields lie between known ones.
    first = np.searchsorted(quotes, [o for _, o, _ in found])
    last = np.searchsorted(quotes, [c for _, _, c in found])
    counts = (last - first) // 12
    q = quotes[np.concatenate([np.arange(a, b) for a, b in zip(first, last, strict=True)])]
    q = q.reshape(-1, 12)
    ends = np.empty(len(q), dtype=np.int64)  # each record's `}`
    ends[:-1] = q[1:, 0] - 3  # `},{"`
    span_ends = np.cumsum(counts)
    ends[span_ends - 1] = [c - 1 for _, _, c in found]  # `}]`
    offset = _integers(data, q[:, 1] + 2, q[:, 2] - 1)
    producer_id = _integers(data, q[:, 7] + 2, q[:, 8] - 1)
    epoch = _integers(data, q[:, 9] + 2, q[:, 10] - 1)
    sequence = _integers(data, q[:, 11] + 2, ends)
    values = _gather(data, q[:, 4] + 1, q[:, 5]).to_pylist()
    lines: dict[int, dict[str, Any]] = {}
    for (row, opened, closed), a, b in zip(found, span_ends - counts, span_ends, strict=True):
        if not (offset[a + 1 : b] > offset[a : b - 1]).all():
            continue  # offsets must increase: the line-by-line reader names the record
        start, stop = int(offsets[row]), int(offsets[row + 1])
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
        record["records"] = _log_records(
            offset[a:b], values[a:b], producer_id[a:b], epoch[a:b], sequence[a:b]
        )
        lines[row] = record
    return lines


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


def _type_codes(data: np.ndarray, opened: np.ndarray, closed: np.ndarray) -> np.ndarray:
    """The op types' codes into _TYPES, told apart by length and first letter."""
    length = closed - opened - 1
    first = data[opened + 1]
    codes = np.full(len(length), _INVOKE, dtype=np.int64)
    codes[length == 2] = _OK
    codes[(length == 4) & (first == ord("f"))] = 2
    codes[(length == 4) & (first == ord("i"))] = 3
    return codes


def _gather(data: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> pa.LargeStringArray:
    """The byte ranges [start, stop) of `data` (in increasing order, not overlapping, each
    valid UTF-8) as an Arrow string array: the ranges and the gaps between them are one array
    over `data`, without a copy, of which `take` copies the ranges."""
    bounds = np.empty(2 * len(starts), dtype=np.int64)
    bounds[0::2] = starts
    bounds[1::2] = stops
    both = pa.LargeStringArray.from_buffers(
        max(len(bounds) - 1, 0), pa.py_buffer(bounds), pa.py_buffer(data)
    )
    return _take(both, np.arange(0, 2 * len(starts), 2))


def _arrow(indices: np.ndarray) -> pa.Array:
    """An int64 numpy array as an Arrow array over its buffer: not with `pa.array`, which
    imports pandas for it (a second or more in a process that has not)."""
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(indices), [None, pa.py_buffer(indices)])


def _take(values: pa.Array, indices: np.ndarray) -> pa.Array:
    """`values.take(indices)` without Array.take, which imports pyarrow.compute."""
    return call_function("take", [values, _arrow(indices)])


def _cast(values: pa.Array, to: pa.DataType) -> pa.Array:
    """`pyarrow.compute.cast(values, to)` (safe: an error for any text not a number)."""
    return call_function("cast", [values], CastOptions.safe(to))


def _matching(strings: pa.Array, pattern: str) -> np.ndarray:
    """The positions of the strings that `pattern` (RE2) matches."""
    matched = call_function("match_substring_regex", [strings], MatchSubstringOptions(pattern))
    return _numpy(call_function("indices_nonzero", [matched]), np.uint64).astype(np.int64)


def _texts(
    data: np.ndarray, starts: np.ndarray, stops: np.ndarray, *, shared: bool = False
) -> np.ndarray:
    """Python strings of the byte ranges, one object per distinct value when `shared`."""
    strings = _gather(data, starts, stops)
    if shared:
        encoded = call_function("dictionary_encode", [strings])
        values = _objects(encoded.dictionary)
        return values[_numpy(encoded.indices, np.int32)]
    return _objects(strings)


def _numpy(values: pa.Array, dtype: type) -> np.ndarray:
    """A numeric Arrow array without nulls as a numpy array, without a copy (its to_numpy
    imports pandas, a second or more in a process that has not)."""
    assert values.null_count == 0 and values.type.bit_width == 8 * np.dtype(dtype).itemsize
    return np.frombuffer(
        values.buffers()[1],
        dtype=dtype,
        count=len(values),
        offset=values.offset * np.dtype(dtype).itemsize,
    )


def _objects(strings: pa.Array) -> np.ndarray:
    """An Arrow string array as a numpy array of Python strings (not with to_numpy, which
    imports pandas for it: a second or more, in a process that has not)."""
    return object_array(strings.to_pylist())


def _integers(data: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    if not len(starts):
        return np.zeros(0, dtype=np.int64)
    return _numpy(_cast(_gather(data, starts, stops), pa.int64()), np.int64)


def _floats(data: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """JSON numbers as Python's float() reads them (Arrow's parser rounds correctly too)."""
    return _numpy(_cast(_gather(data, starts, stops), pa.float64()), np.float64)


__all__ = ["LOG_RECORDS", "MIN_SEND_LINES", "SEND_LINE", "ReadSendTable", "read_history"]
