"""Every check eosim has, in one place: the delivery checker, the transactional one,
the consumer-group one, the replication ones, Jepsen's dependency cycles and, for histories
read from Jepsen, Jepsen's version-order checks.

`check_history` runs `eosim.analysis.checker.check`,
`eosim.analysis.txn_checker.check_transactions`, `eosim.analysis.group_checker.check_groups`,
`eosim.analysis.replica_checker.check_replicas`, `eosim.analysis.rewrite_checker.check_rewrites`,
`eosim.analysis.version_order.check_version_orders` and
`eosim.analysis.cycle_checker.check_cycles` on one history and returns a single `CheckResult`
whose `anomalies` hold every name in `ALL_ANOMALIES` (the order of the registry,
`eosim.analysis.anomalies`, which says how to add one): base names first, then transactional,
consumer-group, replication, within-op and cycle ones (the cycles of an eosim history's
transactions too: `eosim.analysis.cycle_checker.transaction_ops`). A history with client ops
(read from Jepsen: no final log) has the names of
`eosim.analysis.version_order.REPLACED_ANOMALIES` judged from its version orders instead of by
the log-based checks. Everything that reports on a run (the CLI, the API, sweeps, reports,
shrinking) goes through here; `eosim.analysis.checker.check` stays for code that only wants
the delivery checks."""

from __future__ import annotations

from eosim.analysis.anomalies import names
from eosim.analysis.checker import ANOMALIES, CheckResult, check
from eosim.analysis.columns import send_columns
from eosim.analysis.cycle_checker import check_cycles
from eosim.analysis.group_checker import GROUP_ANOMALIES, check_groups
from eosim.analysis.history import History, paused_gc
from eosim.analysis.replica_checker import check_replicas
from eosim.analysis.rewrite_checker import check_rewrites
from eosim.analysis.txn_checker import TXN_ANOMALIES, check_transactions, judge_open_transactions
from eosim.analysis.version_order import (
    INTERNAL_ANOMALIES,
    REPLACED_ANOMALIES,
    check_version_orders,
)

# Views of the registry (eosim.analysis.anomalies), which declares every anomaly and its order.
# Invariants of Kafka's replication (kafka-tlaplus "log matching" and "consistent reads"), each
# judged by its own module.
REPLICATION_ANOMALIES = names(family="replication")
# Jepsen's within-op checks (histories read from Jepsen only; 0 otherwise) and dependency cycles
# (any history with transactions).
JEPSEN_ANOMALIES = names(family="jepsen")
ALL_ANOMALIES = names()


def check_history(history: History) -> CheckResult:
    """All checks (the cyclic garbage collector paused: they build many small acyclic objects
    over a large heap); `anomalies` has every name in `ALL_ANOMALIES`, in that order, `counts`
    summarises the sends as in `eosim.analysis.checker.check`, `notes` says when the run was cut
    by its duration, and `unknown` why the history had nothing to check (`nothing_to_check`),
    when no anomaly was found and it had not."""
    with paused_gc():
        return _check_history(history)


def _check_history(history: History) -> CheckResult:
    if history.client_ops:
        # A Jepsen history: its lost writes are the version orders'; `unseen` leaves out
        # exactly those (so that unseen and the ok writes found lost make up Jepsen's unseen).
        lost: set[tuple[str, int, str]] = set()
        ordered = check_version_orders(history, lost)
        base = check(history, {history.record_id(*record) for record in lost})
    else:
        ordered = check_version_orders(history)
        ordered = {name: ordered[name] for name in INTERNAL_ANOMALIES}
        base = check(history)
    found = {
        **base.anomalies,
        **check_transactions(history),
        **check_groups(history),
        **check_replicas(history),
        **check_rewrites(history),
    }
    found.update(ordered)
    found.update(check_cycles(history))
    anomalies = {name: found[name] for name in ALL_ANOMALIES}
    unknown = None
    if not any(a.count for a in anomalies.values()):
        unknown = nothing_to_check(history)
    return CheckResult(anomalies, base.counts, end_notes(history), unknown)


def nothing_to_check(history: History) -> str | None:
    """Why the checks had nothing to judge in ``history``, or None when they had something.

    They judge writes that may have happened against what was read or logged. A history
    without a single write that was acknowledged (an `ok` send, txn or process op) and
    without a single record read, logged or held by a replica (nor an `lso` line) gives them
    nothing: every count is 0, but that is no evidence of anything. As Jepsen's checkers do
    when there is nothing to check (Elle's `:empty-transaction-graph`, the set checker's "Set
    was never read"), such a history is judged unknown, not valid."""
    if not (history.ops or history.logs or history.replicas):
        return "no op, log or replica line"
    ok_write = (
        bool((send_columns(history.sends).outcome == "ok").any())
        or any(txn.outcome == "ok" and txn.sends for txn in history.txns)
        or any(step.outcome == "ok" for step in history.steps)
    )
    observed = (
        any(poll.records for poll in history.polls)
        or any(records for records in history.logs.values())
        or any(markers for markers in history.markers.values())
        or any(r.records or r.markers for r in history.replicas)
        or any(m.kind == "poll" for op in history.client_ops for m in op.mops)
        or bool(history.stable_offsets)
    )
    if ok_write or observed:
        return None
    return "no write was acknowledged and no record was read or logged"


def end_notes(history: History) -> list[str]:
    """A sentence when the history's `end` line says the run was cut by its duration, with the
    transactions still open then that were within their timeouts (not judged hanging)."""
    end = history.end
    if end is None or not end.cut_by_duration:
        return []
    limit = "" if end.duration is None else f" ({end.duration:g} ms)"
    note = f"the run was cut by its duration{limit} before its workload finished"
    in_flight = sum(len(open_) for _, _, open_ in judge_open_transactions(history))
    if in_flight:
        what = (
            "1 open transaction was still within its timeout"
            if in_flight == 1
            else f"{in_flight} open transactions were still within their timeouts"
        )
        note += f"; {what} at its end ({end.time:g} ms): not hanging"
    return [note]


def transactional_ops(history: History) -> int:
    """How many `txn` and `process` ops the history holds (0: the transactional checks had
    nothing of their own to look at)."""
    return len(history.txns) + len(history.steps)


__all__ = [
    "ALL_ANOMALIES",
    "ANOMALIES",
    "GROUP_ANOMALIES",
    "JEPSEN_ANOMALIES",
    "REPLACED_ANOMALIES",
    "REPLICATION_ANOMALIES",
    "TXN_ANOMALIES",
    "CheckResult",
    "check_history",
    "end_notes",
    "nothing_to_check",
    "transactional_ops",
]
