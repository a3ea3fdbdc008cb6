"""Conformance with Kafka's TransactionMarkerRequestCompletionHandlerTest (core,
kafka.coordinator.transaction): what the coordinator does with each answer to WriteTxnMarkers.

eosim's ``TransactionMarkerChannelManager`` plays the channel manager and the completion
handler; "complete the delayed operation" is ``on_done`` (the coordinator then writes
Complete*), "remove" is a cancelled completion.
"""

from __future__ import annotations

import pytest
import simpy
from conformance.not_modelled import not_modelled

from eosim.simulation.coordinator.marker_channel import (
    TransactionMarkerChannelManager,
    UnexpectedMarkerError,
)
from eosim.simulation.protocol import Errors

TP1, TP2 = ("topic1", 0), ("topic1", 1)


class Channel:
    def __init__(self) -> None:
        self.env = simpy.Environment()
        self.sent: list = []
        channel_self = self

        class Net:
            def send(self, src, dst, payload, conn=None, **_kw):
                channel_self.sent.append(payload)

        self.channel = TransactionMarkerChannelManager(
            self.env, "coordinator", Net(), lambda tp: "leader", 30_000.0, 100.0
        )
        self.done: list[bool] = []
        self.channel.send_markers("tx", 1, 0, True, 0, (TP1, TP2), lambda: self.done.append(True))

    def answer(self, *results) -> None:
        self.channel.on_response(self.sent[-1].correlation_id, list(results))

    def run(self, ms: float) -> None:
        self.env.run(until=self.env.now + ms)


def test_should_re_enqueue_partitions_when_broker_disconnected():
    """TransactionMarkerRequestCompletionHandlerTest.shouldReEnqueuePartitionsWhenBrokerDisconnected
    (no answer: sent again after the request timeout)."""
    ch = Channel()
    first = ch.sent[-1]
    ch.run(30_001)
    assert len(ch.sent) == 2 and ch.sent[-1].partitions == first.partitions


def test_should_complete_delayed_operation_when_no_errors():
    """TransactionMarkerRequestCompletionHandlerTest.shouldCompleteDelayedOperationWhenNoErrors."""
    ch = Channel()
    ch.answer((TP1, Errors.NONE), (TP2, Errors.NONE))
    assert ch.done == [True]


def test_should_complete_delayed_operation_when_not_coordinator():
    """TransactionMarkerRequestCompletionHandlerTest.shouldCompleteDelayedOperationWhenNotCoordinator
    (and ...WhenCoordinatorLoading / ...WhenCoordinatorEpochChanged): a coordinator that lost the
    partition drops its pending markers; a late answer completes nothing."""
    ch = Channel()
    ch.channel.shutdown()
    ch.answer((TP1, Errors.NONE), (TP2, Errors.NONE))
    ch.run(60_000)
    assert ch.done == [] and len(ch.sent) == 1


@pytest.mark.parametrize(
    "error", [Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED]
)
def test_should_remove_delayed_operation_when_fenced(error: Errors):
    """TransactionMarkerRequestCompletionHandlerTest.shouldCompleteDelayedOperationWhenInvalid
    ProducerEpoch / ...WhenCoordinatorEpochFenced (verifyRemoveDelayedOperationOnError): the
    completion is cancelled and nothing is re-sent."""
    ch = Channel()
    ch.answer((TP1, error), (TP2, Errors.NONE))
    ch.run(60_000)
    assert ch.done == [] and len(ch.sent) == 1


@pytest.mark.parametrize(
    "error",
    [
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Errors.REQUEST_TIMED_OUT,
    ],
)
def test_should_retry_partition(error: Errors):
    """TransactionMarkerRequestCompletionHandlerTest.shouldRetryPartitionWhenUnknownTopicOrPartition
    Error / ...NotLeaderOrFollowerError / ...NotEnoughReplicasError / ...NotEnoughReplicasAfter
    AppendError, and REQUEST_TIMED_OUT, which the handler lists with them (no Kafka test names it):
    a replicated leader answers each of them to markers, which are acks=all writes."""
    ch = Channel()
    ch.answer((TP1, error), (TP2, Errors.NONE))
    ch.run(150)
    assert ch.sent[-1].partitions == (TP1,) and ch.done == []
    ch.answer((TP1, Errors.NONE))
    assert ch.done == [True]


def test_should_throw_illegal_state_exception_when_unknown_error():
    """TransactionMarkerRequestCompletionHandlerTest.shouldThrowIllegalStateExceptionWhenUnknownError."""
    ch = Channel()
    with pytest.raises(UnexpectedMarkerError):
        ch.answer((TP1, Errors.UNKNOWN_SERVER_ERROR), (TP2, Errors.NONE))


NOT_MODELLED = {
    "shouldThrowIllegalStateExceptionWhenCorruptMessageError": "no such error in eosim",
    "shouldThrowIllegalStateExceptionWhenMessageTooLargeError": "no such error in eosim",
    "shouldThrowIllegalStateExceptionWhenRecordListTooLargeError": "no such error in eosim",
    "shouldThrowIllegalStateExceptionWhenInvalidRequiredAcksError": "no such error in eosim",
    "shouldRetryPartitionWhenKafkaStorageError": "no disk failures",
    "shouldRemoveTopicPartitionFromWaitingSetOnUnsupportedForMessageFormat": "one message format",
    "shouldThrowIllegalStateExceptionIfErrorCodeNotAvailableForPid": "answers are per request",
}


test_not_modelled = not_modelled("TransactionMarkerRequestCompletionHandlerTest", NOT_MODELLED)
