"""CoordinatorResult: what a group coordinator handler or timer returns to the runtime.

Kafka's ``CoordinatorResult`` (coordinator-common): the records to write to
``__consumer_offsets``, the answer, and what to do once the write is replicated or failed.
Shared by the classic groups (:mod:`group_metadata_manager`) and the consumer groups
(:mod:`consumer_group_heartbeat`). Also how a coordinator answers a failed append: a group
write's error (:func:`append_group_metadata_error`) and a transaction log write's or offset
commit's (:func:`coordinator_error`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from eosim.simulation.protocol import Errors

OnWritten = Callable[[Errors], None]


@dataclass(slots=True)
class CoordinatorResult:
    """Kafka's ``CoordinatorResult``: ``records`` to write (each has a ``group``), the
    immediate ``response`` (None: none, or it goes through a ``respond`` callable), and
    ``on_written`` (the append future), called with NONE once the records are replicated or
    with the error the write failed with (already mapped by
    :func:`append_group_metadata_error`)."""

    records: list[object] = field(default_factory=list)
    response: object = None
    on_written: OnWritten | None = None


def empty_result() -> CoordinatorResult:
    return CoordinatorResult()


def append_group_metadata_error(append_error: Errors) -> Errors:
    """``GroupMetadataManager.appendGroupMetadataErrorToResponseError`` (``:5417-5436``)."""
    if append_error in (
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.REQUEST_TIMED_OUT,
    ):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if append_error is Errors.NOT_LEADER_OR_FOLLOWER:
        return Errors.NOT_COORDINATOR
    if append_error is Errors.RECORD_LIST_TOO_LARGE:
        return Errors.UNKNOWN_SERVER_ERROR
    return append_error


# TransactionStateManager.appendTransactionToLog (and the group coordinator's
# handleOperationException): a log append error as the coordinator answers it.
APPEND_ERRORS = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
}


def coordinator_error(append_error: Errors) -> Errors:
    return APPEND_ERRORS.get(append_error, append_error)
