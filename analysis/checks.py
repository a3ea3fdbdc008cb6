"""Every check eosim has, in one place: the delivery checker, the transactional one and the
replication ones.

`check_history` runs `eosim.analysis.checker.check`,
`eosim.analysis.txn_checker.check_transactions`, `eosim.analysis.replica_checker.check_replicas`
and `eosim.analysis.rewrite_checker.check_rewrites` on one history and returns a single
`CheckResult` whose `anomalies` hold every name in `ALL_ANOMALIES`: base names first, then
transactional, then replication ones. Everything that reports on a run (the CLI, the API,
sweeps, reports, shrinking) goes through here;
`eosim.analysis.checker.check` stays for code that only wants the delivery checks.
"""

from __future__ import annotations

from eosim.analysis.checker import ANOMALIES, CheckResult, check
from eosim.analysis.history import History
from eosim.analysis.replica_checker import REPLICA_ANOMALIES, check_replicas
from eosim.analysis.rewrite_checker import REWRITE_ANOMALIES, check_rewrites
from eosim.analysis.txn_checker import TXN_ANOMALIES, check_transactions, judge_open_transactions

# Invariants of Kafka's replication (kafka-tlaplus "log matching" and "consistent reads"), each
# judged by its own module.
REPLICATION_ANOMALIES = (*REPLICA_ANOMALIES, *REWRITE_ANOMALIES)
ALL_ANOMALIES = (*ANOMALIES, *TXN_ANOMALIES, *REPLICATION_ANOMALIES)


def check_history(history: History) -> CheckResult:
    """All checks; `anomalies` has every name in `ALL_ANOMALIES`, in that order, `counts`
    summarises the sends as in `eosim.analysis.checker.check`, and `notes` says when the run was cut
    by its duration."""
    base = check(history)
    anomalies = {
        **base.anomalies,
        **check_transactions(history),
        **check_replicas(history),
        **check_rewrites(history),
    }
    return CheckResult(anomalies, base.counts, end_notes(history))


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
    "REPLICATION_ANOMALIES",
    "TXN_ANOMALIES",
    "CheckResult",
    "check_history",
    "end_notes",
    "transactional_ops",
]
