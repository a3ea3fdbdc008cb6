"""Every anomaly eosim judges, declared once: :data:`ANOMALY_KINDS`, one `AnomalyKind` per name.

An entry says what the anomaly is (`name`, `description`), which guarantee it breaks (the
report's `guarantee` title), which check module judges it (`check`; `version_order` too, for a
history read from Jepsen, when `from_version_order`), its `family`, and how to show one example
(`describe`: a sentence; `values`: the record values its timeline follows; `story`: the
story its timeline tells). The order of :data:`ANOMALY_KINDS` is the order of every output
(`eosim.analysis.checks.ALL_ANOMALIES`: the CLI, JSON, sweep tables and parquet columns,
reports): families stay together, in `FAMILIES` order. Everything else derives from it: each
check module's names (`names(check=...)`, e.g. `eosim.analysis.txn_checker.TXN_ANOMALIES`),
the per-family tuples of `eosim.analysis.checks`, the `expect:` keys of the scenario schema
(`eosim.schema`), `eosim shrink --anomaly`, the report's guarantees
(`eosim.analysis.report.data.GUARANTEES`), `eosim.analysis.explain.describe`,
`eosim.analysis.timeline.values_of` and the CLI's anomaly block.

To add an anomaly:

1. add one `AnomalyKind` here, at the end of its family (its place is its place in every
   output; a new family goes into `FAMILIES` and after the others), with a sentence
   function (and, if its example has no single ``value``, a values function) in
   `eosim.analysis.explain`;
2. judge it in the check module its entry names: a new module returns
   ``{name: Anomaly(name) for name in names(check="<module>")}`` filled in, is called from
   `eosim.analysis.checks.check_history` and goes into `CHECK_MODULES` (and, if the CLI must
   say when a history cannot have it, into `eosim.cli._print_anomalies`);
3. test it: one history that has it, with a phrase of its example's sentence, as its row of
   `HAS_IT` in tests/test_anomalies.py (an empty history, which has none, is checked there
   for every entry), and its edge cases in tests/test_<module>.py. tests/test_anomalies.py
   fails until every piece is there: it checks that each check returns exactly its
   registered names, that check_history runs every check module, that the entry's history
   has it and that the schema, CLI, report, explain and timeline cover it;
4. regenerate the scenario schema (`eosim.schema`: ``SCHEMA_PATH.write_text(schema_text())``)
   and name it in docs/history-format.md (and docs/reports.md if a report shows it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eosim.analysis import explain

Example = dict[str, Any]

# The families, in output order: delivery (eosim.analysis.checker), transactional and consumer
# (txn_checker), consumer group (group_checker), replication (replica_checker,
# rewrite_checker), and Jepsen's within-op checks and dependency cycles (version_order,
# cycle_checker).
FAMILIES = ("delivery", "transactional", "group", "replication", "jepsen")
# The modules (under eosim.analysis) whose checks judge anomalies, with their check function,
# in the order eosim.analysis.checks.check_history runs them. Each returns (in a `CheckResult`,
# for `checker`) name -> `eosim.analysis.checker.Anomaly` for exactly its names: `names(check=
# module)`, and for `version_order` `version_order_names()`.
CHECK_MODULES = {
    "checker": "check",
    "txn_checker": "check_transactions",
    "group_checker": "check_groups",
    "replica_checker": "check_replicas",
    "rewrite_checker": "check_rewrites",
    "version_order": "check_version_orders",
    "cycle_checker": "check_cycles",
}
# What a timeline tells besides an example's own messages: its partition's story (elections,
# truncations: eosim.analysis.partition_story) or its consumer group's (steps, assignments).
STORIES = ("partition", "group")


@dataclass(frozen=True)
class AnomalyKind:
    """One anomaly, as every part of eosim knows it (see the module's docstring)."""

    name: str
    family: str  # one of FAMILIES
    check: str  # the module of CHECK_MODULES that judges it
    guarantee: str  # the guarantee it breaks, as a report's column title
    description: str  # one line
    # One example as a sentence (eosim.analysis.explain; the example's keys when it fails).
    describe: Callable[[Example], str]
    # The record values its timeline follows; None: the example's "value", if any.
    values: Callable[[Example], list[str]] | None = None
    # Judged by eosim.analysis.version_order instead of `check` for a history with client
    # ops (read from Jepsen).
    from_version_order: bool = False
    story: str | None = None  # one of STORIES, or None
    # Reports list a family's anomalies by this rank, then in registry order.
    report_rank: int = 0

    def example_values(self, example: Example) -> list[str]:
        """The record values a timeline of ``example`` follows."""
        return (self.values or explain.example_value)(example)


ANOMALY_KINDS: tuple[AnomalyKind, ...] = (
    AnomalyKind(
        "duplicate",
        "delivery",
        "checker",
        "no duplicates",
        "a record at two or more positions, observed or acknowledged",
        explain.duplicate,
        from_version_order=True,
    ),
    AnomalyKind(
        "lost_write",
        "delivery",
        "checker",
        "no lost writes",
        "a write that must have committed is missing from its final log or from every read",
        explain.lost_write,
        from_version_order=True,
        story="partition",
    ),
    AnomalyKind(
        "nonmonotonic_send",
        "delivery",
        "checker",
        "no reordering",
        "one process's later send to a partition lands below an earlier one",
        explain.nonmonotonic_send,
        explain.nonmonotonic_send_values,
        from_version_order=True,
    ),
    AnomalyKind(
        "inconsistent_offsets",
        "delivery",
        "checker",
        "consistent offsets",
        "one position associated with different values",
        explain.inconsistent_offsets,
        explain.inconsistent_offsets_values,
        from_version_order=True,
    ),
    AnomalyKind(
        "unseen",
        "delivery",
        "checker",
        "every acknowledged write read",
        "an ok write never observed that cannot be called lost",
        explain.unseen,
    ),
    AnomalyKind(
        "aborted_read",
        "transactional",
        "txn_checker",
        "no aborted reads",
        "a poll returns a record of an aborted write or transaction",
        explain.aborted_read,
        from_version_order=True,
    ),
    AnomalyKind(
        "torn_transaction",
        "transactional",
        "txn_checker",
        "no partial commits",
        "a committed transaction with some values visible and others proven missing",
        explain.torn_transaction,
        explain.torn_transaction_values,
        report_rank=-1,
    ),
    AnomalyKind(
        "precommitted_read",
        "transactional",
        "txn_checker",
        "read after commit",
        "a read_committed poll returns a record before its transaction's COMMIT marker",
        explain.precommitted_read,
        from_version_order=True,
    ),
    AnomalyKind(
        "poll_skip",
        "transactional",
        "txn_checker",
        "no skipped records",
        "one process's successive polls of a partition jump over a record",
        explain.poll_skip,
        explain.poll_skip_values,
        from_version_order=True,
        report_rank=1,
    ),
    AnomalyKind(
        "nonmonotonic_poll",
        "transactional",
        "txn_checker",
        "monotonic polls",
        "a process's poll starts at or before where its last one ended",
        explain.nonmonotonic_poll,
        from_version_order=True,
        report_rank=1,
    ),
    AnomalyKind(
        "duplicate_processing",
        "transactional",
        "txn_checker",
        "no duplicate processing",
        "one input processed by two ok steps, or with outputs visible twice",
        explain.duplicate_processing,
        explain.duplicate_processing_values,
        story="group",
    ),
    AnomalyKind(
        "lost_processing",
        "transactional",
        "txn_checker",
        "no lost processing",
        "an input below its group's committed offset with no committed output",
        explain.lost_processing,
        story="group",
    ),
    AnomalyKind(
        "zombie_write",
        "transactional",
        "txn_checker",
        "no zombie writes",
        "a visible record appended by a producer epoch that was already fenced",
        explain.zombie_write,
    ),
    AnomalyKind(
        "hanging_transaction",
        "transactional",
        "txn_checker",
        "no hanging transactions",
        "a partition's stable offset stuck behind an open transaction past its timeout",
        explain.hanging_transaction,
    ),
    AnomalyKind(
        "offset_rewind",
        "group",
        "group_checker",
        "committed offsets never move back",
        "a consumer group's committed offset moves backwards",
        explain.offset_rewind,
    ),
    AnomalyKind(
        "replica_divergence",
        "replication",
        "replica_checker",
        "replica logs match",
        "two replicas hold different entries below both their high watermarks",
        explain.replica_divergence,
        explain.replica_divergence_values,
    ),
    AnomalyKind(
        "offset_rewrite",
        "replication",
        "rewrite_checker",
        "reads never rewritten",
        "a position read by a consumer later holds another value",
        explain.offset_rewrite,
        explain.offset_rewrite_values,
    ),
    AnomalyKind(
        "int_poll_skip",
        "jepsen",
        "version_order",
        "no skips within a poll",
        "within one op, successive values read from a key skip over one",
        explain.order_pair,
    ),
    AnomalyKind(
        "int_nonmonotonic_poll",
        "jepsen",
        "version_order",
        "monotonic reads within an op",
        "within one op, a value read from a key at or before the previous one",
        explain.order_pair,
    ),
    AnomalyKind(
        "int_nonmonotonic_send",
        "jepsen",
        "version_order",
        "monotonic sends within an op",
        "within one op, a value sent to a key lands at or before the previous one",
        explain.order_pair,
    ),
    AnomalyKind(
        "G0",
        "jepsen",
        "cycle_checker",
        "no write cycles (G0)",
        "a cycle of committed ops linked by write-write dependencies only",
        explain.cycle,
    ),
    AnomalyKind(
        "G1c",
        "jepsen",
        "cycle_checker",
        "no dependency cycles (G1c)",
        "a cycle of committed ops with at least one write-read dependency",
        explain.cycle,
    ),
)
# name -> its entry.
KINDS: dict[str, AnomalyKind] = {kind.name: kind for kind in ANOMALY_KINDS}


def names(
    *,
    check: str | None = None,
    family: str | None = None,
    from_version_order: bool | None = None,
) -> tuple[str, ...]:
    """The names of the entries that match every criterion given (judged by module
    ``check``, of ``family``, with that `AnomalyKind.from_version_order`), in registry order;
    every name without any."""
    return tuple(
        kind.name
        for kind in ANOMALY_KINDS
        if (check is None or kind.check == check)
        and (family is None or kind.family == family)
        and (from_version_order is None or kind.from_version_order == from_version_order)
    )


def version_order_names() -> tuple[str, ...]:
    """The names `eosim.analysis.version_order.check_version_orders` returns: those it judges
    in place of the log-based checks for a history with client ops, then its own."""
    return (*names(from_version_order=True), *names(check="version_order"))


def report_order() -> tuple[str, ...]:
    """The names in the order reports list them: by family, then `report_rank`, then registry
    order."""
    ranked = sorted(
        enumerate(ANOMALY_KINDS),
        key=lambda item: (FAMILIES.index(item[1].family), item[1].report_rank, item[0]),
    )
    return tuple(kind.name for _, kind in ranked)


__all__ = [
    "ANOMALY_KINDS",
    "CHECK_MODULES",
    "FAMILIES",
    "KINDS",
    "STORIES",
    "AnomalyKind",
    "names",
    "report_order",
    "version_order_names",
]
