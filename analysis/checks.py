"""Every check eosim has, in one place: the delivery checker and the transactional one.

`check_history` runs `analysis.checker.check` and `analysis.txn_checker.check_transactions` on
one history and returns a single `CheckResult` whose `anomalies` hold every name in
`ALL_ANOMALIES`, base names first. Everything that reports on a run (the CLI, the API, sweeps,
reports, shrinking) goes through here; `analysis.checker.check` stays for code that only wants
the delivery checks.
"""

from __future__ import annotations

from analysis.checker import ANOMALIES, CheckResult, check
from analysis.history import History
from analysis.txn_checker import TXN_ANOMALIES, check_transactions

ALL_ANOMALIES = (*ANOMALIES, *TXN_ANOMALIES)


def check_history(history: History) -> CheckResult:
    """All checks; `anomalies` has every name in `ALL_ANOMALIES`, in that order, and `counts`
    summarises the sends as in `analysis.checker.check`."""
    base = check(history)
    return CheckResult({**base.anomalies, **check_transactions(history)}, base.counts)


def transactional_ops(history: History) -> int:
    """How many `txn` and `process` ops the history holds (0: the transactional checks had
    nothing of their own to look at)."""
    return len(history.txns) + len(history.steps)


__all__ = [
    "ALL_ANOMALIES",
    "ANOMALIES",
    "TXN_ANOMALIES",
    "CheckResult",
    "check_history",
    "transactional_ops",
]
