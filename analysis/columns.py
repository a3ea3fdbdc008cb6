"""A history's sends as columns: what vectorised checks and timings read.

`history.sends` is a list of `Send` objects for a history read from a file, and a
:class:`SendTable` for a history built from the model's recorder
(`eosim.analysis.history.history_from_recorder`). Both are sequences of `Send`; a
`SendTable` keeps the recorder's columns and builds its `Send` objects only when something
reads them one by one. :func:`send_columns` gives the same :class:`SendColumns`
for either, built once per table.

Extending it: a new per-send field is one more array in :class:`SendColumns`, filled in both
:meth:`SendColumns.of_sends` (from objects) and :meth:`SendColumns.of_log` (from the
recorder's columns, ``eosim.simulation.history.SendLog``); ``tests/test_columns.py`` checks
that the two agree on every shipped scenario's history.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import attrgetter
from typing import Any, TypeVar, overload

import numpy as np

from eosim.analysis.history import LogRecord, Op, Send
from eosim.simulation.history import NONE, OUTCOMES, LogRecords, SendLog, send_record

T = TypeVar("T")
NO_PARTITION = -1  # `partition` column: the send never learnt its partition
NO_OFFSET = -1  # `offset` column: no offset (not `ok`, or none reported)


class SendColumns:
    """One row per send, in invocation order (row i is `history.sends[i]`). Object arrays
    hold text; `partition` and `offset` use :data:`NO_PARTITION` and :data:`NO_OFFSET` for
    None, `complete_time` NaN for a send never completed. The two time columns are built on
    first use (only timings read them)."""

    __slots__ = (
        "_time_source",
        "_times",
        "error",
        "offset",
        "outcome",
        "partition",
        "process",
        "topic",
        "value",
    )

    def __init__(
        self,
        process: np.ndarray,
        topic: np.ndarray,
        partition: np.ndarray,
        value: np.ndarray,
        outcome: np.ndarray,
        offset: np.ndarray,
        error: np.ndarray,
        times: Callable[[], tuple[np.ndarray, np.ndarray]],
    ) -> None:
        self.process = process
        self.topic = topic
        self.partition = partition  # int64
        self.value = value
        self.outcome = outcome  # "ok", "fail" or "info"
        self.offset = offset  # int64, set for `ok` sends with an offset >= 0, as Send.offset
        self.error = error
        self._time_source = times
        self._times: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.value)

    @property
    def invoke_time(self) -> np.ndarray:
        return self._both_times()[0]

    @property
    def complete_time(self) -> np.ndarray:
        return self._both_times()[1]

    def _both_times(self) -> tuple[np.ndarray, np.ndarray]:
        if self._times is None:
            self._times = self._time_source()
        return self._times

    @classmethod
    def of_sends(cls, sends: Sequence[Send]) -> SendColumns:
        def times() -> tuple[np.ndarray, np.ndarray]:
            invoked = np.array([s.invoke_time for s in sends], dtype=np.float64)
            completed = [np.nan if s.complete_time is None else s.complete_time for s in sends]
            return invoked, np.array(completed, dtype=np.float64)

        return cls(
            object_array([s.process for s in sends]),
            object_array([s.topic for s in sends]),
            np.array(
                [NO_PARTITION if s.partition is None else s.partition for s in sends],
                dtype=np.int64,
            ),
            object_array([s.value for s in sends]),
            object_array([s.outcome for s in sends]),
            np.array([NO_OFFSET if s.offset is None else s.offset for s in sends], dtype=np.int64),
            object_array([s.error for s in sends]),
            times,
        )

    @classmethod
    def of_log(cls, log: SendLog) -> SendColumns:
        """From the model's recorder (``HistoryRecorder.sends``), as the `Send` objects
        :class:`SendTable` builds would give them. The recorder numbers operations in
        invocation order, so a completion finds its row by binary search."""
        n = len(log.invoked_id)
        if not n:
            return cls.of_sends([])
        rows = np.searchsorted(_int64(log.invoked_id), _int64(log.completed_id))
        partitions = _int64(log.invoked_partition).copy()
        partitions[partitions == NONE] = NO_PARTITION
        completed_partition = _int64(log.completed_partition)
        known = completed_partition != NONE
        partitions[rows[known]] = completed_partition[known]
        codes = np.frombuffer(log.outcome, dtype=np.uint8)
        outcome = np.full(n, "info", dtype=object)
        outcome[rows] = np.array(OUTCOMES, dtype=object)[codes]
        offsets = _int64(log.offset)
        acked = (codes == OUTCOMES.index("ok")) & (offsets >= 0)
        offset = np.full(n, NO_OFFSET, dtype=np.int64)
        offset[rows[acked]] = offsets[acked]
        error = np.full(n, None, dtype=object)
        for row, text in log.errors.items():
            error[rows[row]] = text

        def both_times() -> tuple[np.ndarray, np.ndarray]:
            # Rounded as the history writes them (Python's round, as Send objects have them:
            # numpy's rounding of a float can differ from it in the last bit).
            invoked = np.array([round(t, 6) for t in log.invoked_time], dtype=np.float64)
            completed = np.full(n, np.nan)
            completed[rows] = [round(t, 6) for t in log.completed_time]
            return invoked, completed

        return cls(
            object_array(log.process),
            object_array(log.topic),
            partitions,
            object_array(log.value),
            outcome,
            offset,
            error,
            both_times,
        )


def _int64(column: array) -> np.ndarray:
    """An ``array('q')`` column as a numpy array, without copying it."""
    return np.frombuffer(column, dtype=np.int64)


def object_array(items: Sequence[Any]) -> np.ndarray:
    """A numpy array of Python objects (text), item for item."""
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


class _BuiltOnDemand(Sequence[T]):
    """A sequence whose items are built, all at once, the first time one is read (`_build`);
    it compares equal to a list of the same items."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[T] | None = None

    def _build(self) -> list[T]:
        raise NotImplementedError

    def _built(self) -> list[T]:
        items = self._items
        if items is None:
            items = self._items = self._build()
        return items

    @property
    def built(self) -> bool:
        """Whether the items have been built."""
        return self._items is not None

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self._built()[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self._built())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _BuiltOnDemand | list):
            return self._built() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} items)"


class SendTable(_BuiltOnDemand[Send]):
    """`history.sends` of a history built from the model's recorder: the recorder's send
    columns (``HistoryRecorder.sends``), read as `Send` objects in invocation order. The
    objects are built on first access; :func:`send_columns` reads the columns directly."""

    __slots__ = ("_columns", "_log")

    def __init__(self, log: SendLog) -> None:
        super().__init__()
        self._log = log
        self._columns: SendColumns | None = None

    def _build(self) -> list[Send]:
        return _build_sends(self._log.entries())

    def __len__(self) -> int:
        return len(self._log.invoked_id)

    def columns(self) -> SendColumns:
        if self._columns is None:
            self._columns = SendColumns.of_log(self._log)
        return self._columns


class LogTable(_BuiltOnDemand[LogRecord]):
    """A partition's final log (``history.logs[key]``) in a history built from the model's
    recorder: the recorder's columns (``eosim.simulation.history.LogRecords``), read as
    `LogRecord` objects built on first access. :meth:`offsets` and :meth:`values` read the
    columns directly; no record of the model's logs is marked ``aborted`` (a real run's
    drain is what marks them)."""

    __slots__ = ("_records",)

    def __init__(self, records: LogRecords) -> None:
        super().__init__()
        self._records = records

    def _build(self) -> list[LogRecord]:
        return [LogRecord(*row) for row in self._records.rows()]

    def __len__(self) -> int:
        return len(self._records)

    def offsets(self) -> list[int]:
        return self._records.offset.tolist()

    def values(self) -> list[str]:
        return self._records.value

    def same_records(self, other: LogTable, start: int, bound: int) -> bool:
        """Whether the two logs hold exactly the same records (every field) at offsets in
        ``[start, bound)``."""
        mine, theirs = self._records, other._records
        i, j = bisect_left(mine.offset, start), bisect_left(mine.offset, bound)
        k, m = bisect_left(theirs.offset, start), bisect_left(theirs.offset, bound)
        if j - i != m - k:
            return False
        columns = ("offset", "value", "producer_id", "epoch", "sequence", "transactional", "time")
        return all(getattr(mine, c)[i:j] == getattr(theirs, c)[k:m] for c in columns)


def _build_sends(entries: Iterable[tuple]) -> list[Send]:
    """The `Send` objects of a recorder's send tuples, as the history parser makes them."""
    sends: list[Send] = []
    open_sends: dict[int, Send] = {}
    for entry in entries:
        _, op_id, type_, _, process, time, topic, partition, key, payload, offset, error = entry
        time = round(time, 6)
        if type_ == "invoke":
            send = Send(
                op_id, process, len(sends), time, None, "info", topic, partition, key, payload,
                None, None,
            )  # fmt: skip
            sends.append(send)
            open_sends[op_id] = send
            continue
        send = open_sends.pop(op_id)
        send.complete_time = time
        send.outcome = type_
        send.error = error
        if partition is not None:
            send.partition = partition
        if type_ == "ok" and offset is not None and offset >= 0:
            send.offset = offset
    return sends


class OpList(_BuiltOnDemand[Op]):
    """`history.ops` of a history built from the model's recorder: the ops parsed from its
    other lines, merged by line number with the `Op` of each send op of the recorder's
    :class:`SendLog` (``lines()`` gives their line numbers), built on first access."""

    __slots__ = ("_lines", "_log", "_others")

    def __init__(self, others: list[Op], log: SendLog, lines: Callable[[], list[int]]) -> None:
        super().__init__()
        self._others = others
        self._log = log
        self._lines = lines

    def _build(self) -> list[Op]:
        ops = [*self._others, *map(_send_op, self._log.entries(), self._lines())]
        ops.sort(key=attrgetter("line"))
        return ops

    def __len__(self) -> int:
        return len(self._others) + len(self._log)


def _send_op(entry: tuple, line: int) -> Op:
    record = send_record(entry)
    return Op(
        record["id"], record["type"], record["f"], record["process"], record["time"],
        record["value"], record.get("error"), line,
    )  # fmt: skip


def send_columns(sends: Sequence[Send]) -> SendColumns:
    """The columns of `history.sends`, whichever form it has (built once for a table)."""
    if isinstance(sends, SendTable):
        return sends.columns()
    return SendColumns.of_sends(sends)


__all__ = [
    "NO_OFFSET",
    "NO_PARTITION",
    "LogTable",
    "OpList",
    "SendColumns",
    "SendTable",
    "object_array",
    "send_columns",
]
