"""Load eosim histories (docs/history-format.md) into typed objects.

A history is a sequence of JSON objects, each with a `kind`: `op` lines record a client invoking
or completing an operation, `log` lines give the final contents of a partition, `fault` lines
mark faults, and an optional `meta` line describes the run. Replicated partitions add a
`replica` line per replica (its final log, high watermark and leader epoch). Unknown kinds are
skipped so that
the format can grow; a known kind with a malformed field is a `HistoryError` that names the
source, line and field, so that a hand-written history is easy to fix.

Besides validating, loading pairs every completion with its invocation: by `id` when the
completion has one, otherwise with the single open invocation of the same process, as in Jepsen.
Each producer `send` then becomes one `Send` (outcome `info` if it never completed) and each
successful `poll` one `Poll`. These, together with the final logs, are what the checker reads.
Transactional histories add `txn` and `process` ops (each becomes one `Txn` or `Step`) and
`offsets`, `fence`, `lso` and `end` lines, which `eosim.analysis.txn_checker` reads.

`history_from_records` builds a history from decoded lines; `history_from_recorder` from the
simulator's in-memory history. The two text readers first try `eosim.analysis.jsonl_reader`,
which reads the send lines of a whole file into columns at once and gives the same history;
when it declines, they decode the file line by line and delegate to the same building, which
names the first bad line.
"""

from __future__ import annotations

import gc
import io
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from itertools import islice, repeat
from operator import lt
from typing import Any, NamedTuple

from eosim.simulation.history import LogRecords

FORMAT = "eosim-history"
VERSION = 1
OP_TYPES = ("invoke", "ok", "fail", "info")
# What a record's value is unique within (`History.value_scope`): its topic (eosim's histories)
# or its partition (Jepsen's).
TOPIC_SCOPE, PARTITION_SCOPE = "topic", "partition"
# A record's identity: (topic, partition or None in a topic-scoped history, value).
RecordId = tuple[str, "int | None", str]


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
    """A successful consumer read; `time` is the completion time, `invoke_time` the time of its
    invocation (None only for a Poll built by hand)."""

    process: str
    time: float
    records: list[PolledRecord]
    isolation: str = "read_uncommitted"
    group: str | None = None
    invoke_time: float | None = None


@dataclass(slots=True)
class TxnWrite:
    """One send inside a transaction; `offset` comes from an `ok` completion, if reported."""

    topic: str
    partition: int | None
    key: str | None
    value: str
    offset: int | None = None


@dataclass(slots=True)
class Txn:
    """A producer transaction: a `txn` invocation joined with its completion (`ok` committed,
    `fail` aborted, `info` unknown, including never completed)."""

    id: int | None
    process: str
    transactional_id: str
    producer_id: int | None
    epoch: int | None
    invoke_time: float
    complete_time: float | None
    outcome: str
    sends: list[TxnWrite]
    error: str | None = None


@dataclass(slots=True)
class Step:
    """A consume-transform-produce step (`process` op): one input record, its output values
    and the topic it writes them to (`output_topic`; None when the op does not say, and then
    an output is looked for in every topic). `transaction` numbers a transactional step's
    transaction within its process: the steps of one process with the same number read and
    wrote as one transaction (None: the step is its own)."""

    id: int | None
    process: str
    invoke_time: float
    complete_time: float | None
    outcome: str
    input: PolledRecord
    outputs: list[str]
    transactional_id: str | None
    error: str | None = None
    output_topic: str | None = None
    transaction: int | None = None


class Marker(NamedTuple):
    """A control record in a partition's log: a transaction's COMMIT or ABORT."""

    offset: int
    producer_id: int
    type: str
    time: float | None


class Fence(NamedTuple):
    """From `time` on, epochs of `producer_id` below `epoch` are fenced."""

    time: float
    transactional_id: str
    producer_id: int
    epoch: int


class OpenTxn(NamedTuple):
    producer_id: int
    first_offset: int


class End(NamedTuple):
    """The `end` line: when the final lines were taken, and whether the run was cut short."""

    time: float
    cut_by_duration: bool
    duration: float | None


class StableOffset(NamedTuple):
    """An `lso` line: a partition's last stable offset after the final recovery window."""

    topic: str
    partition: int
    lso: int
    log_end_offset: int
    open_transactions: list[OpenTxn]


@dataclass(slots=True)
class LogRecord:
    offset: int
    value: str
    producer_id: int | None = None
    epoch: int | None = None
    sequence: int | None = None
    time: float | None = None
    transactional: bool | None = None
    # Known to lie under an ABORT marker without the marker itself being known: a real run's
    # drain marks a record below the LSO that its read_committed pass did not return.
    aborted: bool = False


@dataclass(slots=True)
class Replica:
    """A `replica` line: one replica of a replicated partition when the run ended. `records`
    and `markers` are in offset order, as in a `log` line; `line` is the line number."""

    topic: str
    partition: int
    broker: str
    leader: bool
    leader_epoch: int
    high_watermark: int
    log_end_offset: int
    records: list[LogRecord]
    markers: list[Marker]
    line: int
    # Whether the replica could still change by replication alone when the run ended (a
    # follower not yet caught up with the current leader): false only when the line says so.
    settled: bool = True
    # The replica's log start offset: its log holds nothing below it (retention, DeleteRecords).
    log_start_offset: int = 0


class MicroOp(NamedTuple):
    """One read or write inside a client op, as Jepsen's Kafka workload records it: `kind`
    "send" or "poll", the partition it names, the offset (None when unknown) and the value.
    A poll of several records is one `MicroOp` per record; `mop` is the position of the micro-op
    in the op's value, so that records of one `[:poll ...]` share it."""

    kind: str
    topic: str
    partition: int
    offset: int | None
    value: str
    mop: int


@dataclass(slots=True)
class ClientOp:
    """A completed client op of a history read from Jepsen (`eosim.analysis.jepsen`), kept whole so
    that checks can reason per op: `position` is its rank among client ops in completion
    order, `id` the invocation's `:index`, `process` Jepsen's process number as text, `type`
    ok/fail/info (info also for an op never completed), `f` send/poll/txn/assign/subscribe,
    `mops` its sends and polled records in op order, `keys` the partitions an assign or
    subscribe names, `polled_keys` every partition a poll's result names, in op order, even
    with no record (Jepsen's poll-skip check treats such an empty read as a new position)."""

    position: int
    id: int | None
    process: str
    type: str
    f: str
    time: float
    mops: list[MicroOp] = field(default_factory=list)
    keys: list[tuple[str, int]] = field(default_factory=list)
    polled_keys: list[tuple[str, int]] = field(default_factory=list)


@dataclass(slots=True)
class GroupEvent:
    """A `group` line: one step of a consumer group's story as a member saw it, at `time`.
    `event` is `assigned` (the member applied the `partitions` of `generation`), `revoked`,
    `lost`, or `commit` (an OffsetCommit of `offsets` naming `member` and `generation`,
    asked for at `invoked`; `error` is None when the coordinator accepted it; `asynchronous`
    for commitAsync, auto-commit's way). Other events are kept but judged by no check.
    `generation` is None when the line has none; -1 is a commit outside group management.
    A consumer group's (KIP-848) lines carry the member's `epoch` instead: the member's own,
    not ordered across members, so no generation check reads it."""

    time: float
    process: str
    group: str
    event: str
    member: str | None
    generation: int | None
    partitions: list[tuple[str, int]]
    offsets: dict[tuple[str, int], int]
    invoked: float
    asynchronous: bool
    error: str | None
    line: int
    epoch: int | None = None


@dataclass
class History:
    """A loaded history. `ops` are in file order, `sends` in invocation order and `polls` (the
    `ok` ones) in completion order; `logs` maps (topic, partition) to records in offset order;
    `meta` and `faults` are the lines as written, without `kind`.

    Transactional additions: `txns` and `steps` in invocation order, `markers` per partition in
    offset order, `committed` maps a group to its final committed offset per (topic, partition),
    `fences` and `stable_offsets` are in file order. `end` is the `end` line, if any.

    Replication additions: `replicas` are the `replica` lines in file order; `leaders` and
    `high_watermarks` hold a `log` line's `leader` (None: the partition was offline) and
    `high_watermark`, for the partitions whose `log` line has them.

    `log_starts` holds a `log` line's `log_start_offset` where it is above 0: the partition's
    records below it were deleted (retention, DeleteRecords), so its log says nothing there.

    `client_ops` are the ops of a history read from Jepsen, whole (`ClientOp`).

    `group_events` are the `group` lines (`GroupEvent`) in file order.

    `value_scope` says what identifies a record (docs/history-format.md, "Record identity"):
    its value within its topic (`"topic"`, eosim's histories) or within its partition
    (`"partition"`, Jepsen's, whose values are unique per key, a key being one partition).
    `record_id` gives that identity."""

    meta: dict[str, Any] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    sends: list[Send] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    logs: dict[tuple[str, int], list[LogRecord]] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    txns: list[Txn] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    markers: dict[tuple[str, int], list[Marker]] = field(default_factory=dict)
    committed: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    fences: list[Fence] = field(default_factory=list)
    stable_offsets: list[StableOffset] = field(default_factory=list)
    end: End | None = None
    replicas: list[Replica] = field(default_factory=list)
    leaders: dict[tuple[str, int], str | None] = field(default_factory=dict)
    high_watermarks: dict[tuple[str, int], int] = field(default_factory=dict)
    log_starts: dict[tuple[str, int], int] = field(default_factory=dict)
    # Histories read from Jepsen: every client op whole (eosim's own histories have none).
    client_ops: list[ClientOp] = field(default_factory=list)
    value_scope: str = TOPIC_SCOPE
    group_events: list[GroupEvent] = field(default_factory=list)

    def record_id(self, topic: str, partition: int | None, value: str) -> RecordId:
        """What identifies a record: (topic, None, value) in a topic-scoped history,
        (topic, partition, value) in a partition-scoped one."""
        return (topic, partition if self.value_scope == PARTITION_SCOPE else None, value)


# How an operation's outcome is counted, and the errors with which eosim completes an operation
# its process left open by dying (a crash) or that was still open when the run ended: those are
# not errors the client raised (``eosim.simulation.history``'s ``ProcessCrashed:`` and
# ``RunEnded:`` completions).
OUTCOME_COUNTS = {"ok": "acked", "fail": "failed", "info": "indeterminate"}
ABANDONED_ERRORS = ("ProcessCrashed:", "RunEnded:")
COUNT_KEYS = ("sent", "acked", "failed", "indeterminate", "errored")


def op_counts(history: History) -> dict[str, int]:
    """The applications' operations as ``eosim run`` and ``eosim check`` count them, one
    function for both: every operation invoked (each ``send``, each producer transaction
    ``txn`` and each processed input ``process``) is ``sent``; by outcome, ``acked`` (ok),
    ``failed`` (fail) and ``indeterminate`` (info, including never completed); and ``errored``,
    those completed with an error, whatever the outcome, except the operations a dying process
    or the end of the run left open (``ABANDONED_ERRORS``)."""
    counts = dict.fromkeys(COUNT_KEYS, 0)
    from numpy import not_equal as np_not_equal

    from eosim.analysis.columns import SendTable

    sends: Any = history.sends
    if isinstance(sends, SendTable):  # count its columns, without building Send objects
        columns = sends.columns()
        outcomes = columns.outcome
        counts["sent"] = len(columns)
        for outcome, key in OUTCOME_COUNTS.items():
            counts[key] = int((outcomes == outcome).sum())
        errors = columns.error[np_not_equal(columns.error, None)]
        counts["errored"] = sum(1 for e in errors if not e.startswith(ABANDONED_ERRORS))
        sends = ()
    for ops in (sends, history.txns, history.steps):
        for op in ops:
            counts["sent"] += 1
            counts[OUTCOME_COUNTS[op.outcome]] += 1
            if op.error is not None and not op.error.startswith(ABANDONED_ERRORS):
                counts["errored"] += 1
    return counts


def load_history(path: str | os.PathLike[str]) -> History:
    """Read a JSON Lines history file: its send lines as columns
    (`eosim.analysis.jsonl_reader`), else line by line."""
    source = os.fspath(path)
    with open(path, "rb") as handle:
        raw = handle.read()
    return _read_bytes(raw, source)


def parse_history(lines: Iterable[str], source: str = "<history>") -> History:
    """Parse JSON Lines text; a single string is split into lines at newlines."""
    if isinstance(lines, str):
        try:
            raw = lines.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: the line-by-line reader names it
            raw = None
        if raw is not None:
            return _read_bytes(raw, source)
        # Not splitlines(): JSON strings may hold U+2028 and other characters it splits at.
        lines = lines.split("\n")
    return _build(_decode(lines, source), source)


# Read with eosim.analysis.jsonl_reader first (line by line when it declines). Tests and
# benchmarks set it False to compare with the line-by-line reader alone.
FAST_READER = True


def _read_bytes(raw: bytes, source: str) -> History:
    if FAST_READER:
        from eosim.analysis.jsonl_reader import read_history

        history = read_history(raw, source)
        if history is not None:
            return history
    return _build(_decode(io.BytesIO(raw), source), source)


def history_from_records(records: Iterable[Any], source: str = "<history>") -> History:
    """Build a history from already-decoded line objects; line numbers count from 1."""
    return _build(enumerate(records, 1), source)


def _decode(lines: Iterable[str | bytes], source: str) -> Iterator[tuple[int, Any]]:
    for number, raw in enumerate(lines, 1):
        record = _decode_line(raw, number, source)
        if record is not BLANK:
            yield number, record


BLANK = object()  # what _decode_line gives for a blank line


def _decode_line(raw: str | bytes, number: int, source: str) -> Any:
    """One line's JSON value (BLANK for a blank line), or a HistoryError naming the line."""
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise HistoryError(source, number, "line", f"invalid UTF-8: {exc.reason}") from None
    else:
        text = raw
    if not text.strip():
        return BLANK
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        message = f"invalid JSON: {exc.msg} (column {exc.colno})"
        raise HistoryError(source, number, "line", message) from None
    except RecursionError:
        raise HistoryError(source, number, "line", "invalid JSON: nested too deeply") from None


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small acyclic objects, which
    would otherwise make it rescan the caller's (often large) heap over and over.

    On leaving, when nothing is frozen (`gc.freeze`, as a model run does), the objects made
    meanwhile go straight to the oldest generation (a freeze and an unfreeze, which move them
    without scanning them): else the next young collections would each scan them all, one
    generation after the other (10-20% of reading a Jepsen history)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if collecting:
            gc.enable()


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_Fail = Callable[[int, str, str], HistoryError]


# An open invocation: the invoking op and, for a send, txn or process op, what it started.
_Open = tuple[Op, Send | Txn | Step | None]


def history_from_recorder(recorder: Any, source: str = "<history>") -> History:
    """The history an :class:`eosim.simulation.history.HistoryRecorder` holds: equal to
    ``history_from_records(recorder.records())``, built without a JSON-ready object per send.

    The recorder's send ops (``HistoryRecorder.sends``: columns, well formed by
    construction) stay as recorded: ``history.sends`` is a :class:`SendTable`, which gives
    the sends' columns (:func:`send_columns`) without building a ``Send`` per send, and
    builds the ``Send`` objects (and ``history.ops`` its ``Op`` objects) only when something
    reads them one by one. The final logs the model wrote are read without checking each
    record again. Every other line goes through the same parsing as a file's."""
    with paused_gc():
        sends = recorder.sends
        history = _build_history(recorder.other_items(), source, model_logs=True)
        from eosim.analysis.columns import OpList, SendTable

        if len(sends):  # a real cluster's recorder holds its drivers' ops as lines instead
            if history.sends:
                raise ValueError("a recorder holds sends both as columns and as lines")
            history.sends = SendTable(sends)
            history.ops = OpList(history.ops, sends, recorder.send_lines)
        return history


def _build(numbered: Iterable[tuple[int, Any]], source: str) -> History:
    with paused_gc():
        return _build_history(numbered, source)


def _build_history(
    numbered: Iterable[tuple[int, Any]], source: str, *, model_logs: bool = False
) -> History:
    """The history of ``numbered`` (line number, decoded line) from ``source``; with
    ``model_logs``, a ``(kind, line)`` tuple is a model's log line, whose records need no
    checking.

    One pass; each line must be an object with a string ``kind``, and goes to the reader of
    its kind, a method of :class:`_HistoryReader`: an ``op`` line is parsed, then
    :meth:`~_HistoryReader.invoke` opens an operation and :meth:`~_HistoryReader.complete`
    pairs a completion with its invocation and completes the send, transaction, step or
    poll; the other kinds go to :meth:`~_HistoryReader.log`, :meth:`~_HistoryReader.replica`,
    :meth:`~_HistoryReader.offsets`, :meth:`~_HistoryReader.group`,
    :meth:`~_HistoryReader.fence`, :meth:`~_HistoryReader.lso`, :meth:`~_HistoryReader.end`,
    :meth:`~_HistoryReader.fault` and :meth:`~_HistoryReader.meta`. A line of another kind
    is skipped."""
    reader = _HistoryReader(source)
    readers = reader.readers()
    trusted_readers = readers | {"log": reader.trusted_log}
    fail = reader.fail
    ops = reader.history.ops
    invoke, complete = reader.invoke, reader.complete
    for line, record in numbered:
        if model_logs and type(record) is tuple:
            record = record[1]  # a model's log line: its records need no checking
            read = trusted_readers
        else:
            read = readers
        if type(record) is not dict:
            raise fail(line, "line", f"expected a JSON object, got {type(record).__name__}")
        kind = record.get("kind")
        if kind == "op":  # most lines: read here, not through `readers` (a call less)
            op = _parse_op(record, line, fail)
            ops.append(op)
            if op.type == "invoke":
                invoke(op, line)
            else:
                complete(op, line)
            continue
        if type(kind) is not str:
            what = "missing" if kind is None else f"expected a string, got {_describe(kind)}"
            raise fail(line, "kind", what)
        read_line = read.get(kind)
        if read_line is not None:
            read_line(line, record)
    return reader.history


class _HistoryReader:
    """What :func:`_build_history` has read so far: the history, the operations still open
    and the lines each partition, replica, ``meta`` and ``end`` line was first seen at (a
    second one is an error naming both). Each reader method takes one line of its kind:
    its number and its decoded object."""

    __slots__ = (
        "end_line",
        "fail",
        "history",
        "invoked_ids",
        "log_lines",
        "meta_line",
        "open_by_id",
        "open_without_id",
        "replica_lines",
    )

    def __init__(self, source: str) -> None:
        self.history = History()
        self.fail: _Fail = partial(HistoryError, source)
        self.meta_line = 0
        self.end_line = 0
        self.invoked_ids: dict[int, int] = {}
        self.open_by_id: dict[int, _Open] = {}
        self.open_without_id: dict[str, _Open] = {}
        self.log_lines: dict[tuple[str, int], int] = {}
        self.replica_lines: dict[tuple[str, int, str], int] = {}

    def readers(self) -> dict[str, Callable[[int, dict[str, Any]], None]]:
        """The reader of each kind of line but ``op`` (read by :func:`_build_history`)."""
        return {
            "log": self.log,
            "replica": self.replica,
            "offsets": self.offsets,
            "group": self.group,
            "fence": self.fence,
            "lso": self.lso,
            "end": self.end,
            "fault": self.fault,
            "meta": self.meta,
        }

    def invoke(self, op: Op, line: int) -> None:
        """Open ``op``: a send, transaction or processing step it starts is added to the
        history now, completed when its completion is read."""
        history = self.history
        fail = self.fail
        op_id = op.id
        send: Send | Txn | Step | None = None
        if op.f == "send":
            sends = history.sends
            send = _invoked_send(op, len(sends), fail)
            sends.append(send)
        elif op.f == "txn":
            send = _invoked_txn(op, fail)
            history.txns.append(send)
        elif op.f == "process":
            send = _invoked_step(op, fail)
            history.steps.append(send)
        if op_id is not None:
            first = self.invoked_ids.get(op_id)
            if first is not None:
                message = f"duplicate id {op_id} (first invoked at line {first})"
                raise fail(line, "op.id", message)
            self.invoked_ids[op_id] = line
            self.open_by_id[op_id] = (op, send)
        else:
            other = self.open_without_id.get(op.process)
            if other is not None:
                raise fail(
                    line,
                    "op.id",
                    f"{op.process!r} invokes without an id while its invocation at line "
                    f"{other[0].line} is still open; ids are needed when a process has "
                    "several operations outstanding",
                )
            self.open_without_id[op.process] = (op, send)

    def complete(self, op: Op, line: int) -> None:
        """Pair the completion ``op`` with its invocation (by id, else Jepsen style) and
        complete what the invocation started; a successful poll becomes a ``Poll``."""
        fail = self.fail
        op_id = op.id
        if op_id is not None:
            entry = self.open_by_id.pop(op_id, None)
            if entry is None:
                first = self.invoked_ids.get(op_id)
                if first is None:
                    message = f"completion without invocation: no invoke has id {op_id}"
                else:
                    message = f"id {op_id} already completed (invoked at line {first})"
                raise fail(line, "op.id", message)
        else:
            entry = _pop_open_without_id(op, self.open_by_id, self.open_without_id, fail)
        invoked, send = entry
        if invoked.process != op.process:
            message = f"expected {invoked.process!r} as invoked at line {invoked.line}"
            raise fail(line, "op.process", f"{message}, got {op.process!r}")
        if invoked.f != op.f:
            message = f"expected {invoked.f!r} as invoked at line {invoked.line}"
            raise fail(line, "op.f", f"{message}, got {op.f!r}")
        if type(send) is Send:
            _complete_send(send, op, fail)
        elif type(send) is Txn:
            _complete_txn(send, op, fail)
        elif type(send) is Step:
            _complete_step(send, op, fail)
        elif op.f == "poll" and op.type == "ok":
            self.history.polls.append(_poll(op, invoked.time, fail))

    def log(self, line: int, record: dict[str, Any], trusted: bool = False) -> None:
        """A ``log`` line: a partition's final log, at most one per partition."""
        history = self.history
        fail = self.fail
        key, records = _parse_log(record, line, fail, trusted)
        first = self.log_lines.get(key)
        if first is not None:
            raise fail(line, "log.partition", f"{key!r} already has a log at line {first}")
        self.log_lines[key] = line
        history.logs[key] = records
        if "markers" in record:
            history.markers[key] = _parse_markers(record.get("markers"), line, fail)
        if "leader" in record:
            history.leaders[key] = _text(record["leader"], line, "log.leader", fail, null=True)
        if "high_watermark" in record:
            history.high_watermarks[key] = _count(
                record["high_watermark"], line, "log.high_watermark", fail
            )
        start = _log_start(record, records, line, "log", fail)
        if start:
            history.log_starts[key] = start

    def trusted_log(self, line: int, record: dict[str, Any]) -> None:
        """A model's ``log`` line: its records are not checked again."""
        self.log(line, record, trusted=True)

    def replica(self, line: int, record: dict[str, Any]) -> None:
        """A ``replica`` line, at most one per partition and broker."""
        replica = _parse_replica(record, line, self.fail)
        where = (replica.topic, replica.partition, replica.broker)
        first = self.replica_lines.get(where)
        if first is not None:
            message = (
                f"{replica.broker!r} already has a replica of "
                f"{(replica.topic, replica.partition)!r} at line {first}"
            )
            raise self.fail(line, "replica.broker", message)
        self.replica_lines[where] = line
        self.history.replicas.append(replica)

    def offsets(self, line: int, record: dict[str, Any]) -> None:
        """An ``offsets`` line: a group's committed offsets, the last one for a partition
        winning."""
        group, offsets = _parse_offsets(record, line, self.fail)
        self.history.committed.setdefault(group, {}).update(offsets)

    def group(self, line: int, record: dict[str, Any]) -> None:
        """A ``group`` line: one step of a consumer group's story."""
        self.history.group_events.append(_parse_group(record, line, self.fail))

    def fence(self, line: int, record: dict[str, Any]) -> None:
        """A ``fence`` line."""
        self.history.fences.append(_parse_fence(record, line, self.fail))

    def lso(self, line: int, record: dict[str, Any]) -> None:
        """An ``lso`` line: a partition's last stable offset at the end."""
        self.history.stable_offsets.append(_parse_lso(record, line, self.fail))

    def end(self, line: int, record: dict[str, Any]) -> None:
        """The ``end`` line, at most one."""
        if self.end_line:
            raise self.fail(line, "end", f"a second end line (first at line {self.end_line})")
        self.end_line = line
        self.history.end = _parse_end(record, line, self.fail)

    def fault(self, line: int, record: dict[str, Any]) -> None:
        """A ``fault`` line, kept as written."""
        self.history.faults.append({k: v for k, v in record.items() if k != "kind"})

    def meta(self, line: int, record: dict[str, Any]) -> None:
        """The ``meta`` line, at most one."""
        if self.meta_line:
            raise self.fail(line, "meta", f"a second meta line (first at line {self.meta_line})")
        self.meta_line = line
        _check_meta(record, line, self.fail)
        self.history.meta = {k: v for k, v in record.items() if k != "kind"}


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
    return [
        _record(record, line, f"op.value.records[{index}]", fail)
        for index, record in enumerate(records)
    ]


def _record(record: Any, line: int, where: str, fail: _Fail) -> PolledRecord:
    """A record as a consumer sees it: topic, partition, offset and value."""
    if type(record) is not dict:
        raise fail(line, where, f"expected an object, got {_describe(record)}")
    topic = record.get("topic")
    if type(topic) is not str:
        raise fail(line, f"{where}.topic", f"expected a string, got {_describe(topic)}")
    partition = _count(record.get("partition"), line, f"{where}.partition", fail)
    offset = _count(record.get("offset"), line, f"{where}.offset", fail)
    payload = record.get("value")
    if type(payload) is not str:
        raise fail(line, f"{where}.value", f"expected a string, got {_describe(payload)}")
    return PolledRecord(topic, partition, offset, payload)


def _parse_log(
    record: dict[str, Any], line: int, fail: _Fail, trusted: bool = False
) -> tuple[tuple[str, int], list[LogRecord]]:
    topic = record.get("topic")
    if type(topic) is not str:
        raise fail(line, "log.topic", f"expected a string, got {_describe(topic)}")
    partition = record.get("partition")
    if type(partition) is not int or partition < 0:
        raise fail(line, "log.partition", f"expected an integer >= 0, got {_describe(partition)}")
    if trusted:
        return (topic, partition), _trusted_records(record["records"])
    return (topic, partition), _parse_records(record.get("records"), line, "log.records", fail)


def _trusted_records(entries: list[dict[str, Any]] | LogRecords) -> list[LogRecord]:
    """What `_parse_records` makes of a log the model wrote (every field of its type, offsets
    increasing), without checking each field again: the recorder's columns stay columns
    (`eosim.analysis.columns.LogTable`, its objects built on first access)."""
    if type(entries) is LogRecords:
        from eosim.analysis.columns import LogTable

        return LogTable(entries)  # type: ignore[return-value]
    return [
        LogRecord(
            r["offset"],
            r["value"],
            r.get("producer_id"),
            r.get("epoch"),
            r.get("sequence"),
            r.get("time"),
            r.get("transactional"),
            r.get("aborted", False),
        )
        for r in entries
    ]


def _log_start(
    record: dict[str, Any], records: list[LogRecord], line: int, kind: str, fail: _Fail
) -> int:
    """A `log` or `replica` line's optional `log_start_offset` (0 when absent); no record may
    lie below it."""
    if "log_start_offset" not in record:
        return 0
    start = _count(record["log_start_offset"], line, f"{kind}.log_start_offset", fail)
    if records and records[0].offset < start:
        message = f"{start} is above the first record's offset ({records[0].offset})"
        raise fail(line, f"{kind}.log_start_offset", message)
    return start


def _parse_records(entries: Any, line: int, where_list: str, fail: _Fail) -> list[LogRecord]:
    """The `records` of a `log` or `replica` line: data records in increasing offset order
    (the model's, kept as `LogRecords`, are taken as they are, and stay columns)."""
    if type(entries) is LogRecords:
        return _trusted_records(entries)
    records = _well_formed_records(entries)
    if records is not None:
        return records
    records = []
    previous = -1
    for where, entry in _objects(entries, line, where_list, fail):
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
        extras: list[Any] = []
        for name in ("producer_id", "epoch", "sequence"):
            extra = entry.get(name)
            if extra is not None and type(extra) is not int:
                raise fail(
                    line, f"{where}.{name}", f"expected an integer or null, got {_describe(extra)}"
                )
            extras.append(extra)
        appended = entry.get("time")
        if appended is not None:
            appended = _number(appended, line, f"{where}.time", fail)
        transactional = entry.get("transactional")
        if transactional is not None and type(transactional) is not bool:
            message = f"expected a boolean or null, got {_describe(transactional)}"
            raise fail(line, f"{where}.transactional", message)
        aborted = entry.get("aborted", False)
        if type(aborted) is not bool:
            raise fail(line, f"{where}.aborted", f"expected a boolean, got {_describe(aborted)}")
        records.append(LogRecord(offset, payload, *extras, appended, transactional, aborted))
    return records


_INTS = {int}
_STRS = {str}
_BOOLS = {bool}
_OPTIONAL_INTS = ({int, type(None)}, {int}, {type(None)})
_OPTIONAL_BOOLS = ({bool, type(None)}, {bool}, {type(None)})


def _well_formed_records(entries: Any) -> list[LogRecord] | None:
    """What `_parse_records` makes of `entries` when every record is well formed, checked a
    field at a time over all records (no Python step per record but building it); None when
    any record is not, so that the record-by-record loop names it."""
    if type(entries) is not list or not entries or set(map(type, entries)) != {dict}:
        return None
    get = dict.get

    def column(name: str, default: Any = None) -> list[Any]:
        return list(map(get, entries, repeat(name), repeat(default)))

    offsets = column("offset")
    values = column("value")
    if set(map(type, offsets)) != _INTS or set(map(type, values)) != _STRS:
        return None
    if offsets[0] < 0 or not all(map(lt, offsets, islice(offsets, 1, None))):
        return None
    extras = [column(name) for name in ("producer_id", "epoch", "sequence")]
    if any(set(map(type, extra)) not in _OPTIONAL_INTS for extra in extras):
        return None
    times = column("time")
    kinds = set(map(type, times))
    if kinds != {type(None)}:
        numbers = [t for t in times if t is not None]
        if not kinds <= {int, float, type(None)} or not all(map(math.isfinite, numbers)):
            return None
        if int in kinds:
            times = [None if t is None else float(t) for t in times]
    transactional = column("transactional")
    if set(map(type, transactional)) not in _OPTIONAL_BOOLS:
        return None
    aborted = column("aborted", False)
    if set(map(type, aborted)) != _BOOLS:
        return None
    return list(map(LogRecord, offsets, values, *extras, times, transactional, aborted))


def _check_meta(record: dict[str, Any], line: int, fail: _Fail) -> None:
    fmt = record.get("format", FORMAT)
    if fmt != FORMAT:
        raise fail(line, "meta.format", f"expected {FORMAT!r}, got {_describe(fmt)}")
    version = record.get("version", VERSION)
    if version != VERSION or type(version) is not int:
        raise fail(
            line, "meta.version", f"unsupported version {_describe(version)}; expected {VERSION}"
        )


# -- transactions and consumers -------------------------------------------------------------

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
MARKER_TYPES = ("COMMIT", "ABORT")


def _count(value: Any, line: int, where: str, fail: _Fail) -> int:
    if type(value) is not int or value < 0:
        raise fail(line, where, f"expected an integer >= 0, got {_describe(value)}")
    return value


def _number(value: Any, line: int, where: str, fail: _Fail) -> float:
    kind = type(value)
    if (kind is not float and kind is not int) or value - value != 0:
        raise fail(line, where, f"expected a finite number, got {_describe(value)}")
    return float(value)


def _text(value: Any, line: int, where: str, fail: _Fail, *, null: bool = False) -> Any:
    if type(value) is str or (null and value is None):
        return value
    expected = "a string or null" if null else "a string"
    raise fail(line, where, f"expected {expected}, got {_describe(value)}")


def _optional_int(value: Any, line: int, where: str, fail: _Fail) -> int | None:
    if value is not None and type(value) is not int:
        raise fail(line, where, f"expected an integer or null, got {_describe(value)}")
    return value


def _list(value: Any, line: int, where: str, fail: _Fail) -> list[Any]:
    if type(value) is not list:
        raise fail(line, where, f"expected a list, got {_describe(value)}")
    return value


def _objects(
    value: Any, line: int, where: str, fail: _Fail
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The entries of a list of objects, each with its path (``where[i]``)."""
    for index, entry in enumerate(_list(value, line, where, fail)):
        path = f"{where}[{index}]"
        if type(entry) is not dict:
            raise fail(line, path, f"expected an object, got {_describe(entry)}")
        yield path, entry


def _poll(op: Op, invoke_time: float, fail: _Fail) -> Poll:
    value = op.value or {}
    isolation = value.get("isolation")
    if isolation is None:
        isolation = "read_uncommitted"
    elif isolation not in ISOLATION_LEVELS:
        message = f"expected one of {', '.join(ISOLATION_LEVELS)}, got {_describe(isolation)}"
        raise fail(op.line, "op.value.isolation", message)
    group = _text(value.get("group"), op.line, "op.value.group", fail, null=True)
    records = _polled_records(op, fail)
    return Poll(op.process, op.time, records, isolation, group, invoke_time)


def _invoked_txn(op: Op, fail: _Fail) -> Txn:
    line = op.line
    value = op.value
    if value is None:
        raise fail(line, "op.value", "a txn invocation needs transactional_id and sends")
    transactional_id = _text(value.get("transactional_id"), line, "op.value.transactional_id", fail)
    producer_id = _optional_int(value.get("producer_id"), line, "op.value.producer_id", fail)
    epoch = _optional_int(value.get("epoch"), line, "op.value.epoch", fail)
    writes = []
    for where, entry in _objects(value.get("sends"), line, "op.value.sends", fail):
        topic = _text(entry.get("topic"), line, f"{where}.topic", fail)
        partition = entry.get("partition")
        if partition is not None:
            partition = _count(partition, line, f"{where}.partition", fail)
        key = _text(entry.get("key"), line, f"{where}.key", fail, null=True)
        payload = _text(entry.get("value"), line, f"{where}.value", fail)
        writes.append(TxnWrite(topic, partition, key, payload))
    return Txn(
        op.id, op.process, transactional_id, producer_id, epoch, op.time, None, "info", writes
    )


def _complete_txn(txn: Txn, op: Op, fail: _Fail) -> None:
    """Outcome and time; an `ok` completion's sends may report partitions and offsets, matched
    to the invoked sends by value."""
    txn.complete_time = op.time
    txn.outcome = op.type
    txn.error = op.error
    value = op.value
    if op.type != "ok" or value is None or value.get("sends") is None:
        return
    by_value = {write.value: write for write in txn.sends}
    for where, entry in _objects(value.get("sends"), op.line, "op.value.sends", fail):
        write = by_value.get(entry.get("value"))  # type: ignore[arg-type]
        if write is None:
            message = f"{_describe(entry.get('value'))} was not sent in this transaction"
            raise fail(op.line, f"{where}.value", message)
        partition = entry.get("partition")
        if partition is not None:
            write.partition = _count(partition, op.line, f"{where}.partition", fail)
        offset = _optional_int(entry.get("offset"), op.line, f"{where}.offset", fail)
        if offset is not None and offset >= 0:
            write.offset = offset


def _invoked_step(op: Op, fail: _Fail) -> Step:
    line = op.line
    value = op.value
    if value is None:
        raise fail(line, "op.value", "a process invocation needs input and outputs")
    source = _record(value.get("input"), line, "op.value.input", fail)
    outputs = _outputs(value.get("outputs"), line, fail)
    transactional_id = _text(
        value.get("transactional_id"), line, "op.value.transactional_id", fail, null=True
    )
    output_topic = _text(value.get("output_topic"), line, "op.value.output_topic", fail, null=True)
    transaction = _optional_int(value.get("transaction"), line, "op.value.transaction", fail)
    return Step(
        op.id,
        op.process,
        op.time,
        None,
        "info",
        source,
        outputs,
        transactional_id,
        output_topic=output_topic,
        transaction=transaction,
    )


def _outputs(value: Any, line: int, fail: _Fail) -> list[str]:
    return [
        _text(output, line, f"op.value.outputs[{index}]", fail)
        for index, output in enumerate(_list(value, line, "op.value.outputs", fail))
    ]


def _complete_step(step: Step, op: Op, fail: _Fail) -> None:
    """Outcome and time; a completion that carries `outputs` replaces the invoked ones."""
    step.complete_time = op.time
    step.outcome = op.type
    step.error = op.error
    if op.value is not None and op.value.get("outputs") is not None:
        step.outputs = _outputs(op.value.get("outputs"), op.line, fail)


def _parse_markers(
    entries: Any, line: int, fail: _Fail, where_list: str = "log.markers"
) -> list[Marker]:
    markers = []
    for where, entry in _objects(entries, line, where_list, fail):
        offset = _count(entry.get("offset"), line, f"{where}.offset", fail)
        producer_id = entry.get("producer_id")
        if type(producer_id) is not int:
            message = f"expected an integer, got {_describe(producer_id)}"
            raise fail(line, f"{where}.producer_id", message)
        kind = entry.get("type")
        if kind not in MARKER_TYPES:
            message = f"expected one of {', '.join(MARKER_TYPES)}, got {_describe(kind)}"
            raise fail(line, f"{where}.type", message)
        time = entry.get("time")
        if time is not None:
            time = _number(time, line, f"{where}.time", fail)
        markers.append(Marker(offset, producer_id, kind, time))
    markers.sort()
    return markers


def _parse_offsets(
    record: dict[str, Any], line: int, fail: _Fail
) -> tuple[str, dict[tuple[str, int], int]]:
    group = _text(record.get("group"), line, "offsets.group", fail)
    return group, _offset_list(record.get("offsets"), line, "offsets.offsets", fail)


def _offset_list(value: Any, line: int, where: str, fail: _Fail) -> dict[tuple[str, int], int]:
    """``[{"topic", "partition", "offset"}]`` as (topic, partition) -> offset."""
    offsets = {}
    for path, entry in _objects(value, line, where, fail):
        topic = _text(entry.get("topic"), line, f"{path}.topic", fail)
        partition = _count(entry.get("partition"), line, f"{path}.partition", fail)
        offsets[topic, partition] = _count(entry.get("offset"), line, f"{path}.offset", fail)
    return offsets


def _parse_group(record: dict[str, Any], line: int, fail: _Fail) -> GroupEvent:
    time = _number(record.get("time"), line, "group.time", fail)
    process = _text(record.get("process"), line, "group.process", fail)
    group = _text(record.get("group"), line, "group.group", fail)
    event = _text(record.get("event"), line, "group.event", fail)
    member = _text(record.get("member"), line, "group.member", fail, null=True)
    generation = _optional_int(record.get("generation"), line, "group.generation", fail)
    if generation is not None and generation < -1:
        raise fail(line, "group.generation", f"expected -1 or more, got {generation}")
    epoch = _optional_int(record.get("epoch"), line, "group.epoch", fail)
    if epoch is not None and epoch < -1:
        raise fail(line, "group.epoch", f"expected -1 or more, got {epoch}")
    if epoch is not None and generation is not None:
        raise fail(line, "group.epoch", "a line names a generation or a member epoch, not both")
    partitions = []
    for where, entry in _objects(record.get("partitions", []), line, "group.partitions", fail):
        topic = _text(entry.get("topic"), line, f"{where}.topic", fail)
        partitions.append((topic, _count(entry.get("partition"), line, f"{where}.partition", fail)))
    offsets: dict[tuple[str, int], int] = {}
    invoked = time
    asynchronous = False
    error = None
    if event == "commit":
        if "offsets" not in record:
            raise fail(line, "group.offsets", "missing (a commit names its offsets)")
        offsets = _offset_list(record["offsets"], line, "group.offsets", fail)
        if record.get("invoked") is not None:
            invoked = _number(record["invoked"], line, "group.invoked", fail)
            if invoked > time:
                message = f"{invoked:g} is after the line's time {time:g}"
                raise fail(line, "group.invoked", message)
        asynchronous = record.get("async", False)
        if type(asynchronous) is not bool:
            raise fail(line, "group.async", f"expected a boolean, got {_describe(asynchronous)}")
        error = _text(record.get("error"), line, "group.error", fail, null=True)
    return GroupEvent(
        time,
        process,
        group,
        event,
        member,
        generation,
        partitions,
        offsets,
        invoked,
        asynchronous,
        error,
        line,
        epoch,
    )


def _parse_fence(record: dict[str, Any], line: int, fail: _Fail) -> Fence:
    time = _number(record.get("time"), line, "fence.time", fail)
    transactional_id = _text(record.get("transactional_id"), line, "fence.transactional_id", fail)
    producer_id = record.get("producer_id")
    if type(producer_id) is not int:
        raise fail(line, "fence.producer_id", f"expected an integer, got {_describe(producer_id)}")
    epoch = _count(record.get("epoch"), line, "fence.epoch", fail)
    return Fence(time, transactional_id, producer_id, epoch)


def _parse_end(record: dict[str, Any], line: int, fail: _Fail) -> End:
    time = _number(record.get("time"), line, "end.time", fail)
    cut = record.get("cut_by_duration", False)
    if type(cut) is not bool:
        raise fail(line, "end.cut_by_duration", f"expected a boolean, got {_describe(cut)}")
    duration = record.get("duration")
    if duration is not None:
        duration = _number(duration, line, "end.duration", fail)
    return End(time, cut, duration)


def _parse_lso(record: dict[str, Any], line: int, fail: _Fail) -> StableOffset:
    topic = _text(record.get("topic"), line, "lso.topic", fail)
    partition = _count(record.get("partition"), line, "lso.partition", fail)
    lso = _count(record.get("lso"), line, "lso.lso", fail)
    end = _count(record.get("log_end_offset"), line, "lso.log_end_offset", fail)
    open_txns = []
    entries = record.get("open_transactions", [])
    for where, entry in _objects(entries, line, "lso.open_transactions", fail):
        producer_id = entry.get("producer_id")
        if type(producer_id) is not int:
            message = f"expected an integer, got {_describe(producer_id)}"
            raise fail(line, f"{where}.producer_id", message)
        first = _count(entry.get("first_offset"), line, f"{where}.first_offset", fail)
        open_txns.append(OpenTxn(producer_id, first))
    return StableOffset(topic, partition, lso, end, open_txns)


def _parse_replica(record: dict[str, Any], line: int, fail: _Fail) -> Replica:
    topic = _text(record.get("topic"), line, "replica.topic", fail)
    partition = _count(record.get("partition"), line, "replica.partition", fail)
    broker = record.get("broker")
    if type(broker) is not str or not broker:
        message = f"expected a non-empty string, got {_describe(broker)}"
        raise fail(line, "replica.broker", message)
    leader = record.get("leader")
    if type(leader) is not bool:
        raise fail(line, "replica.leader", f"expected a boolean, got {_describe(leader)}")
    epoch = _count(record.get("leader_epoch"), line, "replica.leader_epoch", fail)
    high_watermark = _count(record.get("high_watermark"), line, "replica.high_watermark", fail)
    end = _count(record.get("log_end_offset"), line, "replica.log_end_offset", fail)
    records = _parse_records(record.get("records"), line, "replica.records", fail)
    markers = _parse_markers(record.get("markers", []), line, fail, "replica.markers")
    offsets = records.offsets() if hasattr(records, "offsets") else [r.offset for r in records]
    taken = set(offsets)
    last = offsets[-1] if offsets else -1
    for marker in markers:  # in offset order
        if marker.offset in taken:
            message = f"offset {marker.offset} holds a record or another marker already"
            raise fail(line, "replica.markers", message)
        taken.add(marker.offset)
        last = max(last, marker.offset)
    if end <= last:
        message = f"expected an offset above the last entry's ({last}), got {end}"
        raise fail(line, "replica.log_end_offset", message)
    start = _log_start(record, records, line, "replica", fail)
    if start > end:
        message = f"{start} is above the log end offset ({end})"
        raise fail(line, "replica.log_start_offset", message)
    settled = record.get("settled", True)
    if type(settled) is not bool:
        raise fail(line, "replica.settled", f"expected a boolean, got {_describe(settled)}")
    return Replica(
        topic,
        partition,
        broker,
        leader,
        epoch,
        high_watermark,
        end,
        records,
        markers,
        line,
        settled,
        start,
    )
