"""The delivery checks on columns: whether a history is clean, decided with array operations.

Most histories a sweep checks have no delivery anomaly. For them the record-by-record
checks of :mod:`eosim.analysis.checker` spend their time building indexes that find
nothing. :func:`clean_deliveries` decides the same question with sorting, grouping and set
membership over the history's columns (:mod:`eosim.analysis.columns`): it returns True only
when every check of `eosim.analysis.checker.ANOMALIES` would count 0, and False as soon as
any might not, or when the history is outside what it judges (a transactional history, one
whose values are unique per partition only, one with deleted log heads). On False the
record-by-record checks run as before and give the counts and the examples; so the screen
decides no verdict of its own, and a history with an anomaly costs what it cost before plus
this pass. Each step below says which check it stands for and why it agrees with it; the
agreement is tested on every shipped scenario and on histories with each anomaly
(``tests/test_delivery_screen.py``).

Extending it: a new delivery check needs a step here that returns False whenever the new
check could count anything (or a guard that sends such histories to the full checks), and
cases in the test for both answers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from eosim.analysis.columns import (
    NO_OFFSET,
    NO_PARTITION,
    LogTable,
    object_array,
    send_columns,
)
from eosim.analysis.history import TOPIC_SCOPE, History

# Keys packed into one int64 must stay below this.
_PACK_LIMIT = 2**62


def clean_deliveries(history: History) -> bool:
    """True when `eosim.analysis.checker.check` would find no delivery anomaly of any kind;
    False when it might (or when the history is outside what this pass judges)."""
    if history.value_scope != TOPIC_SCOPE or history.txns or history.log_starts:
        return False
    sends = send_columns(history.sends)
    n_sends = len(sends)
    obs = _Observed.of(history)
    topic_codes, topic_names = pd.factorize(np.concatenate([sends.topic, obs.topic]))
    value_codes, _ = pd.factorize(np.concatenate([sends.value, obs.value]))
    topics = topic_codes.astype(np.int64)
    values = value_codes.astype(np.int64)
    st, ot = topics[:n_sends], topics[n_sends:]
    sv, ov = values[:n_sends], values[n_sends:]
    n_topics = max(len(topic_names), 1)
    n_values = int(values.max(initial=0)) + 1
    partitions, offsets = sends.partition, sends.offset
    highest = max((partition for _, partition in history.logs), default=0)
    span = max(int(partitions.max(initial=0)), int(obs.partition.max(initial=0)), highest) + 2
    if n_topics * span * n_values >= _PACK_LIMIT:
        return False

    # inconsistent_offsets: a position claimed for two values by logs, polls or acks.
    # Send.offset is set for ok sends only; an ack without a partition names no position.
    acked = (offsets != NO_OFFSET) & (partitions != NO_PARTITION)
    claims = pd.DataFrame(
        {
            "t": np.concatenate([ot, st[acked]]),
            "p": np.concatenate([obs.partition, partitions[acked]]),
            "o": np.concatenate([obs.offset, offsets[acked]]),
            "v": np.concatenate([ov, sv[acked]]),
        }
    ).drop_duplicates()
    if claims.duplicated(["t", "p", "o"]).any():
        return False
    # duplicate: a record at two positions, observed or acknowledged.
    if claims.duplicated(["t", "v"]).any():
        return False
    # A record several processes sent: which copy is whose needs the full checks.
    processes = pd.factorize(sends.process)[0]
    writers = pd.DataFrame({"t": st, "v": sv, "w": processes})
    if writers.drop_duplicates().duplicated(["t", "v"]).any():
        return False

    # From here every record has at most one position. Where each send's record was observed
    # (in a log or by a poll), if anywhere.
    observed, seen_partition, seen_offset = _find(
        st * n_values + sv, ot * n_values + ov, obs.partition, obs.offset
    )

    # lost_write (`eosim.analysis.checker._why_lost`) of the sends that must have landed.
    ok = sends.outcome == "ok"
    judged = (sends.outcome != "fail") & (ok | observed)
    code = {name: i for i, name in enumerate(topic_names)}
    logged = np.array(
        [code[t] * span + p + 1 for t, p in history.logs if t in code], dtype=np.int64
    )
    n_logged = obs.logged

    def slot(t: np.ndarray, p: np.ndarray) -> np.ndarray:
        return t * span + p + 1

    in_log = _member(slot(ot[:n_logged], obs.partition[:n_logged]) * n_values + ov[:n_logged])
    known = judged & (partitions != NO_PARTITION)
    send_slot = slot(st, partitions)
    has_log = np.isin(send_slot, logged)
    # A known partition with a final log: the record must be in it.
    if (known & has_log & ~in_log(send_slot * n_values + sv)).any():
        return False
    # A known partition without a log: lost when a poll of that partition read past the
    # acknowledged offset and none returned the record.
    unlogged = known & ~has_log & acked
    if unlogged.any():
        poll_slot = slot(ot[n_logged:], obs.partition[n_logged:])
        polled = _member(poll_slot * n_values + ov[n_logged:])
        reached = np.full(n_topics * span + 1, -1, dtype=np.int64)
        np.maximum.at(reached, poll_slot, obs.offset[n_logged:])
        rows = unlogged & ~polled(send_slot * n_values + sv)
        if (reached[send_slot[rows]] > offsets[rows]).any():
            return False
    # An unknown partition, in a topic with final logs: the record must have been observed,
    # in a log or read from a partition without one.
    unknown = judged & (partitions == NO_PARTITION)
    if unknown.any():
        topic_logged = np.zeros(n_topics, dtype=bool)
        topic_logged[logged // span] = True
        seen_slot = slot(st, seen_partition)
        fine = observed & (~np.isin(seen_slot, logged) | in_log(seen_slot * n_values + sv))
        if (unknown & topic_logged[st] & ~fine).any():
            return False

    # unseen: an ok send never observed (none is lost, so none is excused).
    if (ok & ~observed).any():
        return False
    return not _nonmonotonic(
        st, partitions, offsets, processes, observed, seen_partition,
        seen_offset,
    )  # fmt: skip


class _Observed:
    """Every logged record (in log order), then every polled one: topic, partition, offset,
    value; `logged` is how many of the rows are log records."""

    def __init__(self, rows: tuple[list[str], list[int], list[int], list[str]], logged: int):
        topics, partitions, offsets, values = rows
        self.topic = object_array(topics)
        self.partition = np.array(partitions, dtype=np.int64)
        self.offset = np.array(offsets, dtype=np.int64)
        self.value = object_array(values)
        self.logged = logged

    @classmethod
    def of(cls, history: History) -> _Observed:
        topics: list[str] = []
        partitions: list[int] = []
        offsets: list[int] = []
        values: list[str] = []
        for (topic, partition), records in history.logs.items():
            topics += [topic] * len(records)
            partitions += [partition] * len(records)
            if isinstance(records, LogTable):  # the model's log: its columns
                offsets += records.offsets()
                values += records.values()
                continue
            offsets += [r.offset for r in records]
            values += [r.value for r in records]
        logged = len(values)
        for poll in history.polls:
            for topic, partition, offset, value in poll.records:
                topics.append(topic)
                partitions.append(partition)
                offsets.append(offset)
                values.append(value)
        return cls((topics, partitions, offsets, values), logged)


def _find(
    wanted: np.ndarray, keys: np.ndarray, partitions: np.ndarray, offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each wanted key: whether some row has it, and that row's partition and offset
    (:data:`NO_PARTITION`, :data:`NO_OFFSET` when none)."""
    if not len(keys):
        n = len(wanted)
        return (
            np.zeros(n, dtype=bool),
            np.full(n, NO_PARTITION, dtype=np.int64),
            np.full(n, NO_OFFSET, dtype=np.int64),
        )
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    at = np.minimum(np.searchsorted(ordered, wanted), len(ordered) - 1)
    found = ordered[at] == wanted
    row = order[at]
    return (
        found,
        np.where(found, partitions[row], NO_PARTITION),
        np.where(found, offsets[row], NO_OFFSET),
    )


def _member(keys: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A vectorised membership test against ``keys`` (sorted once; repeats do no harm)."""
    ordered = np.sort(keys)

    def contains(wanted: np.ndarray) -> np.ndarray:
        if not len(ordered):
            return np.zeros(len(wanted), dtype=bool)
        at = np.minimum(np.searchsorted(ordered, wanted), len(ordered) - 1)
        return ordered[at] == wanted

    return contains


def _nonmonotonic(
    st: np.ndarray,
    partitions: np.ndarray,
    offsets: np.ndarray,
    process: np.ndarray,
    observed: np.ndarray,
    seen_partition: np.ndarray,
    seen_offset: np.ndarray,
) -> bool:
    """nonmonotonic_send (`eosim.analysis.checker._nonmonotonic_sends`) when every record has
    one position: a send landed where its record was observed, if its partition agrees, else
    at its acknowledged position; within one process, topic and partition, in invocation
    order, a send that landed below the highest earlier one is nonmonotonic."""
    use_seen = observed & ((partitions == NO_PARTITION) | (partitions == seen_partition))
    use_ack = ~use_seen & (partitions != NO_PARTITION) & (offsets != NO_OFFSET)
    rows = np.flatnonzero(use_seen | use_ack)
    if not len(rows):
        return False
    partition = np.where(use_seen, seen_partition, partitions)[rows]
    offset = np.where(use_seen, seen_offset, offsets)[rows]
    process, topic = process[rows].astype(np.int64), st[rows]
    order = np.lexsort((rows, partition, topic, process))
    process, topic, partition, offset = (
        process[order], topic[order], partition[order], offset[order]
    )  # fmt: skip
    new_group = np.ones(len(order), dtype=bool)
    new_group[1:] = (
        (process[1:] != process[:-1])
        | (topic[1:] != topic[:-1])
        | (partition[1:] != partition[:-1])
    )
    group = np.cumsum(new_group) - 1
    base = int(offset.max()) + 2
    if (int(group[-1]) + 1) * base >= _PACK_LIMIT:
        return True  # cannot pack the running maximum: let the full checks decide
    running = np.maximum.accumulate(group * base + offset)
    previous = np.full(len(order), -1, dtype=np.int64)
    same = np.flatnonzero(~new_group)
    previous[same] = running[same - 1] - group[same] * base
    return bool((offset < previous).any())


__all__ = ["clean_deliveries"]
