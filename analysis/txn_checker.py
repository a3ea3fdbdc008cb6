"""Check a history for transactional and consumer anomalies (the shared anomaly reference).

As in `eosim.analysis.checker`, a record's topic and value identify what the application wrote
(`History.record_id`; the same value in two topics is two records). A record's *writers* are
the `txn` ops and plain `send`s that carried it. A record is *aborted* when it has writers and
every one of them is `fail`. A final `log` record is *aborted* when the partition's control
markers say so: the first marker of the record's producer id after its offset is an ABORT (or,
where the markers are not known, as in a real run's drain, the record is marked `aborted`). A
record is *visible* at a position when a non-aborted final log record holds it there, or an
`ok` read_committed poll returned it there. A `process` op's outputs are records of its
`output_topic`; an op that does not name one has its outputs looked for in every topic.

From these:

* aborted_read: a poll returns an aborted value or an aborted log record (a read_committed
  one never may; read_uncommitted ones are counted too, with the isolation in the example).
* torn_transaction: an `ok` or `info` txn with some of its values visible and some proven
  missing (by a final log, or by a read past the offset its commit reported).
* precommitted_read: a read_committed poll returns a transactional record before the COMMIT
  marker that ends its transaction on that partition was appended, or one no marker ever
  ended. Without a log record to judge by: a value of `ok` txns read before any of them began.
* poll_skip / nonmonotonic_poll: one process's successive polls of a partition jump over a
  record it should have returned / start at or before where the last one ended.
* duplicate_processing: one input record processed by two `ok` `process` ops, or whose outputs
  are visible from two ops or at two positions.
* lost_processing: an input below its group's final committed offset with no committed output.
* zombie_write: a visible record appended by a producer epoch that was already fenced.
* hanging_transaction: an `lso` line still stuck behind an open transaction; when an `end`
  line says when the run ended, only behind one whose timeout had passed by then.

Counts are of distinct offending items (values, transactions, poll pairs, inputs, records,
partitions). The result is deterministic and each anomaly keeps at most `MAX_EXAMPLES` examples.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from functools import cached_property
from operator import attrgetter
from typing import Any

from eosim.analysis.anomalies import names
from eosim.analysis.checker import (
    MAX_LISTED,
    Anomaly,
    Position,
    aborted_offsets,
    below_log_start,
    first_markers_after,
    position_dict,
)
from eosim.analysis.history import (
    PARTITION_SCOPE,
    History,
    Marker,
    OpenTxn,
    Poll,
    RecordId,
    StableOffset,
    Step,
    Txn,
    TxnWrite,
    paused_gc,
)

# The transactional and consumer anomalies, declared in eosim.analysis.anomalies.
TXN_ANOMALIES = names(check="txn_checker")
READ_COMMITTED = "read_committed"
# The broker's default transaction.max.timeout.ms (TransactionStateManagerConfig): no producer's
# transaction.timeout.ms may exceed it, so it bounds a timeout the history does not give.
MAX_TRANSACTION_TIMEOUT_MS = 900_000.0


def check_transactions(history: History) -> dict[str, Anomaly]:
    """Every name in `TXN_ANOMALIES`, in that order, with count 0 when absent."""
    with paused_gc():
        facts = _Facts(history)
        anomalies = {name: Anomaly(name) for name in TXN_ANOMALIES}
        _aborted_reads(facts, anomalies["aborted_read"])
        _torn_transactions(facts, anomalies["torn_transaction"])
        _precommitted_reads(facts, anomalies["precommitted_read"])
        _poll_gaps(facts, anomalies["poll_skip"], anomalies["nonmonotonic_poll"])
        _duplicate_processing(facts, anomalies["duplicate_processing"])
        _lost_processing(facts, anomalies["lost_processing"])
        _zombie_writes(facts, anomalies["zombie_write"])
        _hanging_transactions(history, anomalies["hanging_transaction"])
        return anomalies


class _Facts:
    """Indexes over a history: writers of each record, aborted records, visible positions.
    Records are identified by `History.record_id`."""

    def __init__(self, history: History) -> None:
        self.history = history
        rid = history.record_id
        self.txns_by_id: dict[RecordId, list[Txn]] = defaultdict(list)
        for txn in history.txns:
            for write in txn.sends:
                self.txns_by_id[rid(write.topic, write.partition, write.value)].append(txn)
        # Each log record's first marker of its producer after it, and the positions of the
        # records such a marker shows aborted.
        self.marker_after: dict[Position, Marker] = {}
        self.aborted_positions: set[Position] = set()
        for (topic, partition), records in history.logs.items():
            markers = history.markers.get((topic, partition), [])
            after = first_markers_after(records, markers)
            for offset, marker in after.items():
                self.marker_after[topic, partition, offset] = marker
            for offset in aborted_offsets(records, after):
                self.aborted_positions.add((topic, partition, offset))
        self.committed_polls = [p for p in history.polls if p.isolation == READ_COMMITTED]
        self._outputs: dict[tuple[str | None, str], set[Position]] | None = None

    @cached_property
    def aborted_ids(self) -> set[RecordId]:
        """Records that have writers, every one of them `fail` (built on first use: only
        reads and processing need it)."""
        history = self.history
        per_partition = history.value_scope == PARTITION_SCOPE
        failed: set[RecordId] = set()
        kept: set[RecordId] = set()
        for txn in history.txns:
            into = failed if txn.outcome == "fail" else kept
            for w in txn.sends:
                into.add((w.topic, w.partition if per_partition else None, w.value))
        for send in history.sends:
            into = failed if send.outcome == "fail" else kept
            into.add((send.topic, send.partition if per_partition else None, send.value))
        return failed - kept

    @cached_property
    def visible(self) -> dict[RecordId, set[Position]]:
        """record -> the positions where it is visible (built on first use: only transactions
        and processing steps need it)."""
        history = self.history
        rid = history.record_id
        visible: dict[RecordId, set[Position]] = defaultdict(set)
        aborted = self.aborted_positions
        for (topic, partition), records in history.logs.items():
            for record in records:
                where = (topic, partition, record.offset)
                if where not in aborted:
                    visible[rid(topic, partition, record.value)].add(where)
        for poll in self.committed_polls:
            for topic, partition, offset, value in poll.records:
                visible[rid(topic, partition, value)].add((topic, partition, offset))
        return visible

    def write_id(self, write: TxnWrite) -> RecordId:
        return self.history.record_id(write.topic, write.partition, write.value)

    def is_visible(self, record: RecordId) -> bool:
        return bool(self.visible.get(record))

    def output_may_be_visible(self, step: Step, value: str) -> bool:
        """An output of ``step`` visible, or possibly deleted with a log's head (some final log
        starts above 0, and nothing says where the value went): absence is then no evidence."""
        return self.output_visible(step, value) or bool(self.history.log_starts)

    def aborted(self, where: Position, value: str) -> bool:
        record = self.history.record_id(where[0], where[1], value)
        return record in self.aborted_ids or where in self.aborted_positions

    def output_positions(self, step: Step, value: str) -> set[Position]:
        """Where an output of a `process` op is visible: in the op's `output_topic`, or, when
        the op names none, in any topic."""
        if self._outputs is None:
            outputs: dict[tuple[str | None, str], set[Position]] = defaultdict(set)
            for (topic, _, held), places in self.visible.items():
                outputs[topic, held] |= places
                outputs[None, held] |= places
            self._outputs = outputs
        return self._outputs.get((step.output_topic, value), set())

    def output_visible(self, step: Step, value: str) -> bool:
        return bool(self.output_positions(step, value))


def _txn_summary(txn: Txn) -> dict[str, Any]:
    return {
        "id": txn.id,
        "process": txn.process,
        "transactional_id": txn.transactional_id,
        "outcome": txn.outcome,
        "invoke_time": txn.invoke_time,
        "complete_time": txn.complete_time,
    }


def _read(poll: Poll, where: Position, value: str) -> dict[str, Any]:
    return {"value": value, **position_dict(where), "process": poll.process, "time": poll.time}


def _committed_reads(facts: _Facts) -> list[tuple[Poll, Position, str]]:
    """Every record returned by a read_committed poll, in completion order."""
    return [
        (poll, (topic, partition, offset), value)
        for poll in facts.committed_polls
        for topic, partition, offset, value in poll.records
    ]


def _aborted_reads(facts: _Facts, anomaly: Anomaly) -> None:
    """Reads of aborted data at either isolation level: read_committed must never see it,
    read_uncommitted may, and is reported too so that the two can be compared."""
    reported: set[RecordId] = set()
    rid = facts.history.record_id
    reads = [
        (poll, (r.topic, r.partition, r.offset), r.value)
        for poll in facts.history.polls
        for r in poll.records
    ]
    for poll, where, value in reads:
        record = rid(where[0], where[1], value)
        if record in reported or not facts.aborted(where, value):
            continue
        reported.add(record)
        txns = facts.txns_by_id.get(record, [])
        anomaly.add(
            {
                **_read(poll, where, value),
                "isolation": poll.isolation,
                "marker": "ABORT" if where in facts.aborted_positions else None,
                "txns": [_txn_summary(txn) for txn in txns[:MAX_LISTED]],
            }
        )


def _torn_transactions(facts: _Facts, anomaly: Anomaly) -> None:
    """Some writes visible and some proven missing. A write is proven missing by its
    partition's final log (which is complete), or, for a partition without one, by a read that
    got past the offset its commit reported without returning it. A write that is neither
    visible nor proven missing may simply not have been read yet: it counts for neither."""
    evidence = _MissingWrites(facts)
    for txn in facts.history.txns:
        if txn.outcome == "fail" or not txn.sends:
            continue
        shown = [w for w in txn.sends if facts.is_visible(facts.write_id(w))]
        if not shown:
            continue
        absent = [w for w in txn.sends if evidence.proven_missing(w)]
        if not absent:
            continue
        visible = [w.value for w in shown]
        missing = [w.value for w in absent]
        judged = {facts.write_id(w) for w in (*shown, *absent)}
        unproven = [w.value for w in txn.sends if facts.write_id(w) not in judged]
        anomaly.add(
            {
                **_txn_summary(txn),
                "visible": visible[:MAX_LISTED],
                "missing": missing[:MAX_LISTED],
                "unproven": unproven[:MAX_LISTED],
                "sends": len(txn.sends),
            }
        )


class _MissingWrites:
    """Evidence that a transaction's write is absent (built lazily: only histories whose
    writes lack a final log need the reads)."""

    def __init__(self, facts: _Facts) -> None:
        self.facts = facts
        self.logged_topics = {topic for topic, _ in facts.history.logs}
        self._reads: dict[tuple[str, int], tuple[int, set[str]]] | None = None

    def reads(self) -> dict[tuple[str, int], tuple[int, set[str]]]:
        """For partitions without a final log: (topic, partition) -> the highest offset any
        poll returned and the values returned."""
        if self._reads is None:
            logs = self.facts.history.logs
            reads: dict[tuple[str, int], tuple[int, set[str]]] = {}
            for poll in self.facts.history.polls:
                for topic, partition, offset, value in poll.records:
                    if (topic, partition) in logs:
                        continue
                    highest, values = reads.setdefault((topic, partition), (-1, set()))
                    values.add(value)
                    if offset > highest:
                        reads[topic, partition] = (offset, values)
            self._reads = reads
        return self._reads

    def proven_missing(self, write: TxnWrite) -> bool:
        value = write.value
        if self.facts.is_visible(self.facts.write_id(write)):
            return False
        history = self.facts.history
        logs = history.logs
        if write.partition is None:
            if write.topic not in self.logged_topics or any(
                topic == write.topic for topic, _ in history.log_starts
            ):
                return False
            # Not in any of the topic's logs; a read of it from a partition without a log
            # means it is there, only unjudged.
            return not any(
                value in values
                for (topic, _), (_, values) in self.reads().items()
                if topic == write.topic
            )
        if (write.topic, write.partition) in logs:
            return not below_log_start(
                history.log_starts, write.topic, write.partition, write.offset
            )
        if write.offset is None:
            return False
        highest, values = self.reads().get((write.topic, write.partition), (-1, set()))
        return highest > write.offset and value not in values


def _precommitted_reads(facts: _Facts, anomaly: Anomaly) -> None:
    """A transaction commits on a partition when its COMMIT marker is appended there. That is
    the moment a read_committed read may return its records; the writer learns of the commit
    later (its EndTxn answer races the markers), so its completion time is no bound."""
    if not facts.committed_polls:
        return  # no read_committed read: nothing to judge (and no index of the logs to build)
    records = {
        (topic, partition, r.offset): r
        for (topic, partition), log in facts.history.logs.items()
        for r in log
    }
    reported: set[RecordId] = set()
    for poll, where, value in _committed_reads(facts):
        read = facts.history.record_id(where[0], where[1], value)
        if read in reported:
            continue
        record = records.get(where)
        if record is not None and record.value == value and record.transactional:
            marker = facts.marker_after.get(where)
            if marker is None:
                reason = "read while its transaction was open"
            elif marker.type == "COMMIT" and marker.time is not None and poll.time < marker.time:
                reason = "read before its COMMIT marker"
            else:
                continue  # committed in time, or aborted (an aborted_read)
        else:
            # No log record to judge by: only a read before the writing transaction even
            # began is certain to be early.
            txns = facts.txns_by_id.get(read)
            if not txns or any(txn.outcome != "ok" for txn in txns):
                continue
            if any(txn.invoke_time <= poll.time for txn in txns):
                continue
            reason = "read before its transaction began"
        reported.add(read)
        anomaly.add(
            {
                **_read(poll, where, value),
                "reason": reason,
                "txns": [_txn_summary(txn) for txn in facts.txns_by_id.get(read, [])[:MAX_LISTED]],
            }
        )


def _poll_gaps(facts: _Facts, skip: Anomaly, nonmonotonic: Anomaly) -> None:
    """Successive polls by one process of one partition (polls that returned none of its
    records are passed over), in completion order."""
    last: dict[tuple[str, str, int], tuple[Poll, int, int]] = {}
    for poll in facts.history.polls:
        ranges: dict[tuple[str, int], tuple[int, int]] = {}
        for topic, partition, offset, _ in poll.records:
            low, high = ranges.get((topic, partition), (offset, offset))
            ranges[topic, partition] = (min(low, offset), max(high, offset))
        for (topic, partition), (low, high) in sorted(ranges.items()):
            key = (poll.process, topic, partition)
            previous = last.get(key)
            last[key] = (poll, low, high)
            if previous is None:
                continue
            before, _, end = previous
            pair = {
                "process": poll.process,
                "topic": topic,
                "partition": partition,
                "isolation": poll.isolation,
                "previous_time": before.time,
                "previous_last_offset": end,
                "time": poll.time,
                "first_offset": low,
            }
            if low <= end:
                nonmonotonic.add(pair)
            elif low > end + 1:
                skipped = _skipped(facts, poll, topic, partition, end, low)
                if skipped:
                    pair.update(skipped=skipped[:MAX_LISTED], skipped_count=len(skipped))
                    skip.add(pair)


def _skipped(
    facts: _Facts, poll: Poll, topic: str, partition: int, end: int, low: int
) -> list[dict[str, Any]]:
    """Final-log records strictly between two polls that the poll's isolation should return
    (a log's records are in offset order: the range is found by binary search, not a scan of
    the log per gap)."""
    found = []
    records = facts.history.logs.get((topic, partition), [])
    first = bisect_right(records, end, key=_offset)
    for record in records[first : bisect_left(records, low, lo=first, key=_offset)]:
        where = (topic, partition, record.offset)
        if poll.isolation == READ_COMMITTED and facts.aborted(where, record.value):
            continue
        found.append({"offset": record.offset, "value": record.value})
    return found


_offset = attrgetter("offset")


def _steps_by_input(facts: _Facts) -> dict[Position, list[Step]]:
    steps: dict[Position, list[Step]] = defaultdict(list)
    for step in facts.history.steps:
        source = step.input
        steps[source.topic, source.partition, source.offset].append(step)
    return steps


def _step_summary(step: Step, facts: _Facts) -> dict[str, Any]:
    return {
        "id": step.id,
        "process": step.process,
        "outcome": step.outcome,
        "outputs": step.outputs[:MAX_LISTED],
        "visible_outputs": [v for v in step.outputs if facts.output_visible(step, v)][:MAX_LISTED],
        "invoke_time": step.invoke_time,
        "complete_time": step.complete_time,
    }


def _duplicate_processing(facts: _Facts, anomaly: Anomaly) -> None:
    for where, steps in sorted(_steps_by_input(facts).items()):
        ok = [step for step in steps if step.outcome == "ok"]
        shown = [
            step
            for step in steps
            if step.outcome != "fail" and any(facts.output_visible(step, v) for v in step.outputs)
        ]
        at_several: dict[str, set[Position]] = {}
        for step in steps:
            for v in step.outputs:
                places = facts.output_positions(step, v)
                if len(places) > 1:
                    at_several.setdefault(v, set()).update(places)
        repeated = sorted(at_several)
        if len(ok) < 2 and len(shown) < 2 and not repeated:
            continue
        anomaly.add(
            {
                "input": {**position_dict(where), "value": steps[0].input.value},
                "ok_steps": len(ok),
                "steps_with_visible_output": len(shown),
                "outputs_at_several_positions": [
                    {"value": v, "positions": [position_dict(p) for p in sorted(at_several[v])]}
                    for v in repeated[:MAX_LISTED]
                ],
                "steps": [_step_summary(step, facts) for step in steps[:MAX_LISTED]],
            }
        )


def _processed(step: Step, facts: _Facts) -> bool:
    """The step's outputs committed: `ok`, or `info` with an output visible, and every output
    visible."""
    visible = [facts.output_visible(step, v) for v in step.outputs]
    if step.outcome == "ok" or (step.outcome == "info" and any(visible)):
        return all(facts.output_may_be_visible(step, v) for v in step.outputs)
    return False


def _lost_processing(facts: _Facts, anomaly: Anomaly) -> None:
    """Only partitions that some `process` op consumed are checked, whatever the group: other
    groups (a verifying consumer, say) commit offsets of topics nobody transforms."""
    history = facts.history
    steps = _steps_by_input(facts)
    consumed = {(topic, partition) for topic, partition, _ in steps}
    for group, offsets in sorted(history.committed.items()):
        for (topic, partition), committed in sorted(offsets.items()):
            if (topic, partition) not in consumed:
                continue
            inputs: dict[int, str] = {
                offset: s[0].input.value
                for (t, p, offset), s in steps.items()
                if (t, p) == (topic, partition)
            }
            for record in history.logs.get((topic, partition), []):
                if not facts.aborted((topic, partition, record.offset), record.value):
                    inputs.setdefault(record.offset, record.value)
            for offset, value in sorted(inputs.items()):
                if offset >= committed:
                    continue
                tried = steps.get((topic, partition, offset), [])
                if any(_processed(step, facts) for step in tried):
                    continue
                anomaly.add(
                    {
                        "group": group,
                        "input": {"topic": topic, "partition": partition, "offset": offset},
                        "value": value,
                        "committed_offset": committed,
                        "steps": [_step_summary(step, facts) for step in tried[:MAX_LISTED]],
                    }
                )


def _zombie_writes(facts: _Facts, anomaly: Anomaly) -> None:
    fences = sorted(facts.history.fences)
    if not fences:
        return  # no producer was fenced: no write can be a zombie's
    for (topic, partition), records in sorted(facts.history.logs.items()):
        for record in records:
            where = (topic, partition, record.offset)
            if (
                record.producer_id is None
                or record.epoch is None
                or record.time is None
                or where in facts.aborted_positions
            ):
                continue
            fence = next(
                (
                    f
                    for f in fences
                    if f.producer_id == record.producer_id
                    and f.epoch > record.epoch
                    and f.time <= record.time
                ),
                None,
            )
            if fence is None:
                continue
            anomaly.add(
                {
                    "value": record.value,
                    **position_dict(where),
                    "producer_id": record.producer_id,
                    "epoch": record.epoch,
                    "time": record.time,
                    "fence": fence._asdict(),
                }
            )


def _hanging_transactions(history: History, anomaly: Anomaly) -> None:
    for line, hanging, _ in judge_open_transactions(history):
        if not hanging:
            continue
        anomaly.add(
            {
                "topic": line.topic,
                "partition": line.partition,
                "lso": line.lso,
                "log_end_offset": line.log_end_offset,
                "open_transactions": hanging[:MAX_LISTED],
            }
        )


def judge_open_transactions(
    history: History,
) -> list[tuple[StableOffset, list[dict[str, Any]], list[dict[str, Any]]]]:
    """For each `lso` line still behind its log end with open transactions, in (topic,
    partition) order: the open transactions judged hanging and those still in flight.

    Without an `end` line the `lso` lines come after a recovery window longer than every
    transaction timeout (eosim's), so each open transaction is hanging. With one, a transaction
    is hanging only once its timeout has passed at the end: as in Kafka's `kafka-transactions
    find-hanging`, its age is the time since its producer's last append to the partition (from
    the log records' `time`), and it must exceed the writer's transaction.timeout.ms. Before
    that the coordinator may still end it, whether its writer is alive (mid-transaction when
    the run was cut) or dead (the timeout aborts it). An open transaction with no append time
    cannot be judged and is in flight."""
    lines = sorted(history.stable_offsets, key=lambda s: (s.topic, s.partition, s.lso))
    judged = []
    end = history.end
    timeouts = _TransactionTimeouts(history) if end is not None else None
    for line in lines:
        if line.lso >= line.log_end_offset or not line.open_transactions:
            continue
        hanging: list[dict[str, Any]] = []
        in_flight: list[dict[str, Any]] = []
        opened = sorted(line.open_transactions)
        if end is None or timeouts is None:
            judged.append((line, [t._asdict() for t in opened], in_flight))
            continue
        appended = _last_appends(history, line, opened)
        for txn in opened:
            last = appended.get(txn.producer_id)
            timeout = timeouts.of(txn.producer_id)
            entry = {
                **txn._asdict(),
                "last_append_time": last,
                "age_ms": None if last is None else round(end.time - last, 6),
                "timeout_ms": timeout,
            }
            if last is not None and end.time - last > timeout:
                hanging.append(entry)
            else:
                in_flight.append(entry)
        judged.append((line, hanging, in_flight))
    return judged


def _last_appends(history: History, line: StableOffset, opened: list[OpenTxn]) -> dict[int, float]:
    """producer id -> the time of its last record from its open transaction's first offset."""
    records = history.logs.get((line.topic, line.partition), [])
    first = {txn.producer_id: txn.first_offset for txn in opened}
    start = bisect_left(records, min(first.values()), key=lambda r: r.offset)
    last: dict[int, float] = {}
    for record in records[start:]:
        pid = record.producer_id
        if pid in first and record.offset >= first[pid] and record.time is not None:
            last[pid] = max(record.time, last.get(pid, record.time))
    return last


class _TransactionTimeouts:
    """transaction.timeout.ms per producer id, from the client configurations eosim writes in
    `meta.configs` (node -> Kafka producer settings): the timeout of the configuration whose
    transactional.id the producer id's `txn` ops name; else the largest configured one; else
    the broker's default transaction.max.timeout.ms, which bounds them all."""

    def __init__(self, history: History) -> None:
        by_id: dict[str, float] = {}
        configs = history.meta.get("configs")
        if isinstance(configs, dict):
            for _, config in sorted(configs.items()):
                if not isinstance(config, dict):
                    continue
                timeout = config.get("transaction.timeout.ms")
                transactional_id = config.get("transactional.id")
                if type(transactional_id) is str and type(timeout) in (int, float):
                    by_id[transactional_id] = max(float(timeout), by_id.get(transactional_id, 0))
        self.by_id = by_id
        self.largest = max(by_id.values(), default=MAX_TRANSACTION_TIMEOUT_MS)
        self.ids: dict[int, set[str]] = defaultdict(set)
        for txn in history.txns:
            if txn.producer_id is not None:
                self.ids[txn.producer_id].add(txn.transactional_id)

    def of(self, producer_id: int) -> float:
        known = [self.by_id[t] for t in sorted(self.ids.get(producer_id, ())) if t in self.by_id]
        return max(known, default=self.largest)
