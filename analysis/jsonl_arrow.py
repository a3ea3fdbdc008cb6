"""The send lines of a JSON Lines history found and cut out by Arrow and numpy: the scanner
:mod:`eosim.analysis.jsonl_reader` uses where its C scanner (``_jsonl_scan``) was not built.

* one RE2 pass (Arrow's ``match_substring_regex``, no captures) picks the lines that match
  ``jsonl_reader.SEND_LINE`` in full, after Arrow has checked that the whole file is UTF-8;
* in such a line every string is a run without quotes, so the fields lie between known
  quotes: numpy finds every quote, their bytes are cut out and become Arrow strings, then
  numbers or Python strings (for process, topic and outcome one object per distinct value);
* a ``log`` or ``replica`` line's records array is checked against ``LOG_RECORDS`` by RE2
  and cut out the same way.

It gives the C scanner's columns exactly; ``tests/test_jsonl_reader.py`` runs every case
with each. Arrow's compute functions are called by name: importing ``pyarrow.compute`` builds
a Python wrapper for each of its hundreds of functions (0.04 - 0.1 s, a tenth or more of a
load), and ``pa.array`` of numpy or ``to_numpy`` import pandas (a second or more in a
process that has not).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyarrow._compute import CastOptions, MatchSubstringOptions, call_function

from eosim.analysis.columns import NO_OFFSET, NO_PARTITION, object_array
from eosim.analysis.jsonl_reader import (
    INVOKE,
    LOG_RECORDS,
    OK,
    SEND_LINE,
    Coded,
    Others,
    RecordColumns,
    SendLines,
)

_QUOTE, _NEWLINE, _COMMA, _N = ord('"'), ord("\n"), ord(","), ord("n")


def scan(raw: bytes, data: np.ndarray) -> tuple[SendLines, Others] | None:
    """The send lines (an RE2 pass picks them, numpy cuts out their fields between known
    quotes) and the other lines."""
    ends = np.flatnonzero(data == _NEWLINE) + 1
    if not len(ends) or ends[-1] != len(raw):
        ends = np.append(ends, len(raw))
    offsets = np.zeros(len(ends) + 1, dtype=np.int64)
    offsets[1:] = ends
    lines = pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(raw))
    try:
        lines.validate(full=True)  # UTF-8
    except pa.ArrowInvalid:
        return None
    send_rows = _matching(lines, SEND_LINE)
    if not len(send_rows):
        return None
    is_send = np.zeros(len(ends), dtype=bool)
    is_send[send_rows] = True
    other_rows = np.flatnonzero(~is_send)
    starts = offsets[:-1]
    stops = ends - (data[ends - 1] == _NEWLINE)  # before the newline (a last line may have none)
    sends = _send_lines(data, starts[send_rows], stops[send_rows], send_rows)
    if sends is None:
        return None
    others = zip(
        other_rows.tolist(), starts[other_rows].tolist(), stops[other_rows].tolist(), strict=True
    )
    return sends, list(others)


def _send_lines(
    data: np.ndarray, starts: np.ndarray, stops: np.ndarray, rows: np.ndarray
) -> SendLines | None:
    """The fields of the send lines `rows`, each from `starts` to `stops` (before its
    newline), which SEND_LINE has matched."""
    quotes = np.flatnonzero(data == _QUOTE)
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
    return SendLines(
        ids=_integers(data, q(5) + 2, q(6) - 1),
        types=types,
        process=_coded(data, q(16) + 1, q(17)),
        times=times,
        topic=_coded(data, q(24) + 1, q(25)),
        partition=partition,
        key=key,
        value=ArrowSpans(data, q(v) + 1, q(v + 1)),
        has_offset=has_offset,
        offset=offset,
        offset_null=offset_null,
        error=error,
        line=rows + 1,
    )


class ArrowSpans:
    """Strings of the file as byte ranges [start, stop) (in file order, each valid UTF-8),
    gathered into one Arrow array when first asked for."""

    def __init__(self, data: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> None:
        self._data = data
        self._starts = starts
        self._stops = stops
        self._gathered: pa.LargeStringArray | None = None

    def _arrow(self, rows: np.ndarray | None) -> pa.Array:
        if self._gathered is None:
            self._gathered = _gather(self._data, self._starts, self._stops)
        return self._gathered if rows is None else _take(self._gathered, rows)

    def texts(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The strings (of `rows` only, in their order, when given) as a numpy array."""
        return _objects(self._arrow(rows))

    def equal(self, a: np.ndarray, b: np.ndarray) -> bool:
        """Whether the string of row a[i] equals that of row b[i], for every i."""
        same = call_function("equal", [self._arrow(a), self._arrow(b)])
        return bool(call_function("all", [same]).as_py())


def log_records(
    raw: bytes, data: np.ndarray, arrays: list[tuple[int, int]]
) -> list[tuple[int, RecordColumns] | None]:
    """Each records array (its `[` and its line's end), cut at the first `}]` after the `[`,
    checked against LOG_RECORDS by one RE2 pass, its fields cut out between known quotes."""
    read: list[tuple[int, RecordColumns] | None] = [None] * len(arrays)
    found = []  # (index, the `[`, the `]`)
    for index, (opened, stop) in enumerate(arrays):
        closed = raw.find(b"}]", opened, stop) + 1
        if closed > 0:
            found.append((index, opened, closed))
    if not found:
        return read
    bounds = np.array([(o, c + 1) for _, o, c in found], dtype=np.int64).ravel()
    spans = pa.LargeStringArray.from_buffers(
        2 * len(found) - 1, pa.py_buffer(bounds), pa.py_buffer(raw)
    )
    spans = _take(spans, np.arange(0, 2 * len(found), 2))
    matched = _matching(spans, LOG_RECORDS).tolist()
    if not matched:
        return read
    regions = [found[i] for i in matched]
    # Each record has 12 quotes: its fields lie between known ones.
    quotes = [np.flatnonzero(data[o:c] == _QUOTE) + o for _, o, c in regions]
    counts = np.array([len(q) for q in quotes], dtype=np.int64) // 12
    q = np.concatenate(quotes).reshape(-1, 12)
    ends = np.empty(len(q), dtype=np.int64)  # each record's `}`
    ends[:-1] = q[1:, 0] - 3  # `},{"`
    span_ends = np.cumsum(counts)
    ends[span_ends - 1] = [c - 1 for _, _, c in regions]  # `}]`
    offset = _integers(data, q[:, 1] + 2, q[:, 2] - 1)
    producer_id = _integers(data, q[:, 7] + 2, q[:, 8] - 1)
    epoch = _integers(data, q[:, 9] + 2, q[:, 10] - 1)
    sequence = _integers(data, q[:, 11] + 2, ends)
    values = _gather(data, q[:, 4] + 1, q[:, 5]).to_pylist()
    for (index, _, closed), a, b in zip(regions, span_ends - counts, span_ends, strict=True):
        if "records" in values[a:b]:
            continue  # a second "records" in the line
        columns = (offset[a:b], values[a:b], producer_id[a:b], epoch[a:b], sequence[a:b])
        read[index] = (closed, columns)
    return read


def _type_codes(data: np.ndarray, opened: np.ndarray, closed: np.ndarray) -> np.ndarray:
    """The op types' codes into _TYPES, told apart by length and first letter."""
    length = closed - opened - 1
    first = data[opened + 1]
    codes = np.full(len(length), INVOKE, dtype=np.int64)
    codes[length == 2] = OK
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


def _texts(data: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Python strings of the byte ranges."""
    return _objects(_gather(data, starts, stops))


def _coded(data: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> Coded:
    """The byte ranges' strings as codes into their distinct values."""
    encoded = call_function("dictionary_encode", [_gather(data, starts, stops)])
    codes = _numpy(encoded.indices, np.int32).astype(np.int64)
    return Coded(codes, _objects(encoded.dictionary))


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
