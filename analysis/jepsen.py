"""Read a Jepsen Kafka test's history (EDN) into eosim's `History` (docs/history-format.md,
"Jepsen histories").

Jepsen's Kafka workload (jepsen.tests.kafka) records ops as EDN maps with `:type` (invoke, ok,
fail, info), `:f`, `:process`, `:time` (nanoseconds) and `:index`. `:send`, `:poll` and `:txn`
ops carry a vector of micro-ops: `[:send k v]`, completed as `[:send k [offset v]]` (offset nil
when unknown), and `[:poll]`, completed as `[:poll {k [[offset v] ...] ...}]`. A key `k` stands
for one topic-partition. `:assign` and `:subscribe` carry a vector of keys; `:crash` and
`:debug-topic-partitions` carry nothing this reader uses. Other ops (the nemesis's) are skipped.
A data op without `:process` (hand-written histories, such as kafka_test.clj's version-orders
test, leave it out) belongs to the one process `nil`.

The conversion, so that eosim's checks run unchanged:

* every `[:send k v]` micro-op, in a `:send` or a `:txn` op, becomes one `Send` with the op's
  outcome (an invocation never completed is `info`), topic `jepsen` and partition `k` for an
  integer key (any other key, such as the `:x` of Jepsen's own tests, is its own topic, written
  as EDN, with partition 0), value the EDN value as text (an integer as its digits), and the
  offset of an `ok` completion;
* every `[:poll ...]` micro-op of an `ok` op becomes a `Poll` of its records that have an
  offset, completed at the op's completion time;
* Jepsen resets a process's "last read" and "last sent" positions of the keys that an `ok` or
  `info` `:assign`/`:subscribe` leaves out. Here such a key starts a new consumer session of
  the process: its later sends and polls are attributed to `"<process>/<n>"` (n counts the
  resets of that key), so that eosim's per-process checks compare within a session only.

A `:txn` op's sends and polls are therefore judged as plain sends and polls (eosim's `Txn`
needs a transactional id and epoch that a Jepsen history does not record).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import edn_format
from edn_format import EDNDecodeError, ImmutableDict, ImmutableList, Keyword

from eosim.analysis import edn_reader
from eosim.analysis.history import (
    OP_TYPES,
    PARTITION_SCOPE,
    ClientOp,
    History,
    HistoryError,
    MicroOp,
    Op,
    Poll,
    PolledRecord,
    Send,
    load_history,
    paused_gc,
)

TOPIC = "jepsen"
# Jepsen's Kafka workload ops this reader converts; any other :f is skipped.
DATA_FS = ("send", "poll", "txn")
ASSIGN_FS = ("assign", "subscribe")
KNOWN_FS = (*DATA_FS, *ASSIGN_FS, "crash", "debug-topic-partitions")
NANOS_PER_MS = 1_000_000
# The process of ops without `:process` (or with `:process nil`): one process, as Jepsen's
# per-process indexes would key them all under nil.
NO_PROCESS = "nil"


def is_edn(path: str | os.PathLike[str]) -> bool:
    """An `.edn` file, or one whose first form opens an EDN map with a keyword (`{:`): never a
    JSON Lines history, whose lines open with `{"`. (A vector of ops needs the `.edn` name.)"""
    if Path(path).suffix.lower() == ".edn":
        return True
    with open(path, "rb") as handle:
        head = handle.read(4096).lstrip()
    return head[:1] == b"{" and head[1:].lstrip()[:1] == b":"


def load_any_history(path: str | os.PathLike[str]) -> History:
    """A Jepsen EDN history when `is_edn(path)`, else an eosim JSON Lines history."""
    return load_jepsen_history(path) if is_edn(path) else load_history(path)


def load_jepsen_history(path: str | os.PathLike[str]) -> History:
    source = os.fspath(path)
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise HistoryError(source, line, "line", f"invalid UTF-8: {exc.reason}") from None
    return parse_jepsen_history(text, source)


def parse_jepsen_history(text: str, source: str = "<jepsen history>") -> History:
    """Parse EDN text: op maps one after another (Jepsen's history.edn, one a line) or one
    vector of op maps."""
    ops = list(_read_ops(text, source))
    with paused_gc():
        return _Converter(source).convert(ops)


# Read with eosim.analysis.edn_reader first (edn_format when it gives up). Tests and
# benchmarks set it False to compare with edn_format alone.
FAST_READER = True


def _read_ops(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """(line, op) pairs. One form a line keeps exact line numbers; otherwise the whole text is
    read and an op's line is that of its form's start when it is found, else 0.

    The whole text is read in one pass first: edn_format builds a new lexer and parser for
    every call, which made reading line by line 3x slower than the parse itself (17 s for
    40,000 ops). When every line holding a form is one op map (``{`` to ``}``) and the forms
    are as many as those lines, form i is line i's. Anything else, and any error (to name its
    line), is read line by line as before.

    The fast reader (`edn_reader`, about 10x faster than edn_format) gives the same forms and the
    lines of their starts and ends, from which the same pairs follow: as above when each line
    is one op map; else, as `_read_ops_by_line`, each form with its line when no form spans
    lines (then every line reads alone, and only then: a form's first line alone is an
    unclosed form or string), all with line 0 otherwise. When it gives up (anything outside
    its subset, or bad input), edn_format reads the text as before.

    Its top-level maps are plain dicts of their keyword keys by name (`keyword_names`), what
    `_Converter._op` makes of edn_format's ImmutableDict before reading it: a dict is never
    the top-level map of edn_format's, so `_op` takes one as converted already. Nested maps,
    which may be hashed, stay ImmutableDicts."""
    if FAST_READER:
        pairs: list[tuple[int, Any]] | None = None
        with paused_gc():  # many small acyclic objects (the reader pauses it as well)
            try:
                fast = edn_reader.read_forms(text, plain_top_maps=True, keyword_names=True)
            except edn_reader.GiveUp:
                fast = None
            if fast is not None:
                if all(first == last for first, last, _ in fast):
                    # (Then, when every line holding a form is one op map, form i is on the
                    # i-th such line: the pairs below are those.)
                    pairs = [(first, form) for first, _, form in fast]
                else:
                    lines = _form_lines(text)
                    if _one_map_a_line(lines) and len(fast) == len(lines):
                        pairs = [
                            (number, form)
                            for (number, _), (_, _, form) in zip(lines, fast, strict=True)
                        ]
                    else:
                        pairs = [(0, form) for _, _, form in fast]
                if len(pairs) == 1 and _is_seq(pairs[0][1]):
                    line, vector = pairs[0]
                    pairs = [(line, form) for form in vector]
        if pairs is not None:
            yield from pairs
            return
    lines = _form_lines(text)
    one_map_a_line = _one_map_a_line(lines)
    if one_map_a_line:
        try:
            forms = _loads_all(text)
        except _Unreadable:
            forms = None  # read line by line below, to name the bad line
        if forms is not None and len(forms) == len(lines):
            yield from ((number, form) for (number, _), form in zip(lines, forms, strict=True))
            return
    yield from _read_ops_by_line(text, source)


def _form_lines(text: str) -> list[tuple[int, str]]:
    """(number, stripped text) of every line holding something but a comment."""
    return [
        (number, line.strip())
        for number, line in enumerate(text.split("\n"), 1)
        if line.strip() and not line.lstrip().startswith(";")
    ]


def _one_map_a_line(lines: list[tuple[int, str]]) -> bool:
    return all(s.startswith("{") and s.endswith("}") for _, s in lines)


def _read_ops_by_line(text: str, source: str) -> Iterator[tuple[int, Any]]:
    per_line: list[tuple[int, Any]] = []
    first_bad: tuple[int, str] | None = None
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip() or line.lstrip().startswith(";"):
            continue
        try:
            forms = _loads_all(line)
        except _Unreadable as exc:
            first_bad = (number, str(exc))
            break
        per_line.extend((number, form) for form in forms)
    if first_bad is None:
        forms_with_lines = per_line
    else:
        try:
            forms = _loads_all(text)
        except _Unreadable:
            number, message = first_bad
            raise HistoryError(source, number, "line", f"invalid EDN: {message}") from None
        forms_with_lines = [(0, form) for form in forms]
    if len(forms_with_lines) == 1 and _is_seq(forms_with_lines[0][1]):
        line, vector = forms_with_lines[0]
        forms_with_lines = [(line, form) for form in vector]
    yield from forms_with_lines


class _Unreadable(ValueError):
    pass


def _loads_all(text: str) -> list[Any]:
    try:
        return list(edn_format.loads_all(text))
    except EDNDecodeError as exc:
        raise _Unreadable(_decode_message(str(exc))) from None
    except NotImplementedError as exc:  # an unknown #tag
        raise _Unreadable(str(exc)) from None
    except (ValueError, RecursionError) as exc:
        raise _Unreadable(f"{type(exc).__name__}: {exc}") from None


def _decode_message(message: str) -> str:
    if message == "EOF Reached":
        return "unexpected end of input (an unclosed map, vector or string)"
    if message.startswith("LexToken("):
        parts = message[len("LexToken(") : -1].rsplit(",", 3)
        if len(parts) == 4:
            return f"unexpected {parts[1]}"
    return message


def _is_seq(value: Any) -> bool:
    """An EDN vector or list (edn_format reads them as ImmutableList and tuple)."""
    kind = value.__class__
    if kind is ImmutableList or kind is tuple:
        return True
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _items(value: Any) -> Any:
    """An EDN vector's or list's items as a Python list or tuple (an ImmutableList's own list:
    indexing and iterating an ImmutableList is a Python call per item), else None."""
    kind = value.__class__
    if kind is ImmutableList:
        return value._list  # edn_format keeps the items there (ImmutableList(items, copy=False))
    if kind is tuple:
        return value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return value
    return None


def _map_items(value: Mapping[Any, Any]) -> Any:
    """A map's items (an ImmutableDict's own dict's: its Mapping methods are Python calls)."""
    return value.dict.items() if value.__class__ is ImmutableDict else value.items()


def _kw(value: Any) -> str | None:
    if value.__class__ is Keyword:
        return value.name
    return value.name if isinstance(value, Keyword) else None


def render(value: Any) -> str:
    """A Jepsen value as eosim's record value: an integer's digits, anything else as EDN."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    try:
        return edn_format.dumps(value)
    except RecursionError:
        return "(a form nested too deeply)"


def key_topic_partition(key: Any) -> tuple[str, int]:
    if isinstance(key, int) and not isinstance(key, bool):
        return TOPIC, key
    return render(key), 0


class _Converter:
    def __init__(self, source: str) -> None:
        self.source = source
        # Jepsen's values are unique per key only, and a key is one topic-partition.
        self.history = History(meta={"format": "jepsen-kafka"}, value_scope=PARTITION_SCOPE)
        # process -> (invocation op map, its line)
        self.open: dict[Any, tuple[dict[str, Any], int]] = {}
        # (process, key) -> resets of that key's session; process -> keys it has touched
        self.sessions: dict[tuple[Any, Any], int] = {}
        self.touched: dict[Any, list[Any]] = {}

    def fail(self, line: int, where: str, message: str) -> HistoryError:
        return HistoryError(self.source, line, where, message)

    def convert(self, ops: list[tuple[int, Any]]) -> History:
        for position, (line, op) in enumerate(ops):
            self._op(position, line, op)
        for process in list(self.open):
            invoked, line = self.open.pop(process)
            self._complete(invoked, None, line)
        return self.history

    def _op(self, position: int, line: int, op: Any) -> None:
        where = line or position + 1
        if op.__class__ is not dict:  # (a dict: the fast reader's, by name already)
            if not isinstance(op, Mapping):
                raise self.fail(where, "op", f"expected an EDN map, got {render(op)[:60]}")
            # The op's keyword keys by name: every field is looked up by a keyword, and a
            # Keyword is slow to hash (edn_format builds a dict per hash); other keys are never
            # read.
            op = {k.name: v for k, v in op.items() if type(k) is Keyword}
        type_ = _kw(op.get("type"))
        if type_ not in OP_TYPES:
            got = render(op.get("type"))
            raise self.fail(where, ":type", f"expected :invoke, :ok, :fail or :info, got {got}")
        f = _kw(op.get("f"))
        process = op.get("process")
        if f not in KNOWN_FS or isinstance(process, Keyword):
            return  # the nemesis's ops and anything else this reader does not judge
        if process is None:
            process = NO_PROCESS  # hand-written ops (kafka_test.clj's) may have none
        elif not isinstance(process, int) or isinstance(process, bool):
            raise self.fail(where, ":process", f"expected an integer or nil, got {render(process)}")
        time = op.get("time")
        if time is None:
            time = op.get("index")
        if time is None:
            time = position
        if not isinstance(time, (int, float)) or isinstance(time, bool):
            raise self.fail(where, ":time", f"expected a number, got {render(time)}")
        op["time"] = time / NANOS_PER_MS
        op["process"] = process
        if type_ == "invoke":
            if process in self.open:
                previous = self.open[process][1]
                raise self.fail(
                    where,
                    ":process",
                    f"{process} invokes again before its op of line {previous} completed",
                )
            self.open[process] = (op, where)
            return
        invoked, invoke_line = self.open.pop(process, (None, where))
        if invoked is not None and _kw(invoked.get("f")) != f:
            raise self.fail(
                where,
                ":f",
                f"completes :{f} but process {process} invoked "
                f":{_kw(invoked.get('f'))} (line {invoke_line})",
            )
        self._complete(invoked, op, where)

    def _complete(
        self, invoked: dict[str, Any] | None, done: dict[str, Any] | None, line: int
    ) -> None:
        op = done if done is not None else invoked
        assert op is not None
        f = _kw(op.get("f"))
        process = op.get("process")
        outcome = "info" if done is None else _kw(done.get("type"))
        invoke_time = (invoked if invoked is not None else op).get("time")
        complete_time = None if done is None else done.get("time")
        index = (invoked if invoked is not None else op).get("index")
        error = None if done is None else done.get("error")
        self.history.ops.append(
            Op(
                id=index if isinstance(index, int) else None,
                type=outcome or "info",
                f=f or "",
                process=str(process),
                time=complete_time if complete_time is not None else invoke_time,
                value=None,
                error=None if error is None else render(error),
                line=line,
            )
        )
        client = ClientOp(
            position=len(self.history.client_ops),
            id=index if isinstance(index, int) else None,
            process=str(process),
            type=outcome or "info",
            f=f or "",
            time=complete_time if complete_time is not None else invoke_time,
        )
        if f in ASSIGN_FS:
            keys = op.get("value")
            if outcome in ("ok", "info"):
                self._reassign(process, keys, line)
            if _is_seq(keys):
                client.keys = [key_topic_partition(key) for key in keys]
            self.history.client_ops.append(client)
            return
        if f not in DATA_FS:
            return
        value = _items(done.get("value")) if done is not None else None
        if value is None and invoked is not None:
            value = _items(invoked.get("value"))
        if value is None:
            raise self.fail(line, ":value", "expected a vector of micro-ops")
        self.history.client_ops.append(client)
        for i, given in enumerate(value):
            where = f":value[{i}]"
            mop = _items(given)  # its items: the same micro-op, read quicker
            kind = _kw(mop[0]) if mop else None
            if kind == "send":
                self._send(
                    mop, process, outcome, invoke_time, complete_time, index, error, line, where
                )
                client.mops.append(self._sent(mop, i))
            elif kind == "poll":
                if outcome == "ok":
                    self._poll(mop, process, invoke_time, complete_time, line, where)
                records, keys = self._polled(mop, i)
                client.mops.extend(records)
                client.polled_keys.extend(k for k in keys if k not in client.polled_keys)
            else:
                raise self.fail(
                    line, where, f"expected [:send k v] or [:poll ...], got {render(given)[:60]}"
                )

    def _sent(self, mop: Any, i: int) -> MicroOp:
        """The send as a micro-op (its shape already checked by `_send`): any reported offset,
        whatever the op's outcome (Jepsen's version orders take an info op's offsets once one
        of its writes was read)."""
        _, key, written = mop
        offset = None
        pair = _items(written)
        if pair is not None:
            offset, written = pair
        topic, partition = key_topic_partition(key)
        return MicroOp("send", topic, partition, offset, render(written), i)

    def _polled(self, mop: Any, i: int) -> tuple[list[MicroOp], list[tuple[str, int]]]:
        """Every [offset value] pair of a poll, of any outcome (shapes checked by `_poll` for
        ok ops; other ops' malformed pairs are passed over), and the partitions its result
        names, records or not."""
        if len(mop) != 2 or not isinstance(mop[1], Mapping):
            return [], []
        found = []
        keys = []
        for key, given in _map_items(mop[1]):
            pairs = _items(given)
            if pairs is None:
                continue
            topic, partition = key_topic_partition(key)
            keys.append((topic, partition))
            for entry in pairs:
                pair = _items(entry)
                if pair is None or len(pair) != 2:
                    continue
                offset, read = pair
                if offset is not None and (not isinstance(offset, int) or isinstance(offset, bool)):
                    continue
                found.append(MicroOp("poll", topic, partition, offset, render(read), i))
        return found, keys

    def _label(self, process: Any, key: Any) -> str:
        touched = self.touched.setdefault(process, [])
        if key not in touched:
            touched.append(key)
        session = self.sessions.get((process, key), 0)
        return str(process) if session == 0 else f"{process}/{session}"

    def _reassign(self, process: Any, keys: Any, line: int) -> None:
        if not _is_seq(keys):
            raise self.fail(line, ":value", "expected a vector of keys")
        kept = set(keys)
        for key in self.touched.get(process, []):
            if key not in kept:
                self.sessions[process, key] = self.sessions.get((process, key), 0) + 1

    def _send(
        self,
        mop: Any,
        process: Any,
        outcome: str | None,
        invoke_time: float,
        complete_time: float | None,
        index: Any,
        error: Any,
        line: int,
        where: str,
    ) -> None:
        if len(mop) != 3:
            raise self.fail(line, where, f"expected [:send k v], got {render(mop)[:60]}")
        _, key, written = mop
        offset = None
        pair = _items(written)
        if pair is not None:
            if len(pair) != 2:
                raise self.fail(line, where, f"expected [offset value], got {render(written)}")
            offset, written = pair
            if offset is not None and (not isinstance(offset, int) or isinstance(offset, bool)):
                raise self.fail(
                    line, where, f"offset: expected an integer or nil, got {render(offset)}"
                )
        topic, partition = key_topic_partition(key)
        sends = self.history.sends
        sends.append(
            Send(
                id=index if isinstance(index, int) else None,
                process=self._label(process, key),
                invoke_index=len(sends),
                invoke_time=invoke_time,
                complete_time=complete_time,
                outcome=outcome or "info",
                topic=topic,
                partition=partition,
                key=None,
                value=render(written),
                offset=offset if outcome == "ok" and offset is not None and offset >= 0 else None,
                error=None if error is None else render(error),
            )
        )

    def _poll(
        self,
        mop: Any,
        process: Any,
        invoke_time: float,
        complete_time: float | None,
        line: int,
        where: str,
    ) -> None:
        if len(mop) == 1:
            return  # [:poll] as invoked: nothing returned
        if len(mop) != 2 or not isinstance(mop[1], Mapping):
            raise self.fail(
                line, where, f"expected [:poll {{k [[offset value] ...]}}], got {render(mop)[:60]}"
            )
        by_label: dict[str, list[PolledRecord]] = {}
        for key, given in _map_items(mop[1]):
            pairs = _items(given)
            if pairs is None:
                raise self.fail(line, where, f"key {render(key)}: expected a vector of pairs")
            topic, partition = key_topic_partition(key)
            records = by_label.setdefault(self._label(process, key), [])
            for entry in pairs:
                pair = _items(entry)
                if pair is None or len(pair) != 2:
                    raise self.fail(
                        line,
                        where,
                        f"key {render(key)}: expected [offset value], got {render(entry)[:60]}",
                    )
                offset, read = pair
                if offset is None:
                    continue
                if not isinstance(offset, int) or isinstance(offset, bool):
                    raise self.fail(
                        line,
                        where,
                        f"key {render(key)}: offset: expected an "
                        f"integer or nil, got {render(offset)}",
                    )
                records.append(PolledRecord(topic, partition, offset, render(read)))
        time = complete_time if complete_time is not None else invoke_time
        for label in sorted(by_label):
            if by_label[label]:
                self.history.polls.append(
                    Poll(label, time, by_label[label], invoke_time=invoke_time)
                )


__all__ = [
    "NO_PROCESS",
    "TOPIC",
    "is_edn",
    "key_topic_partition",
    "load_any_history",
    "load_jepsen_history",
    "parse_jepsen_history",
    "render",
]
