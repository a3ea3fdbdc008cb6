"""Replication rules checked against Kafka's source in the second fidelity review (each test
failed before its rule was changed): a follower's high watermark, a new leader's view of its
followers, the leader's answer to an epoch it does not know, AlterPartition errors, and
LIST_OFFSETS right after a leader change."""

from __future__ import annotations

from test_replication import SESSION_MS, TP, Harness

from eosim.simulation.broker.partition import Partition, TopicSettings
from eosim.simulation.broker.producer_state import ProducerStateManager
from eosim.simulation.protocol import (
    AlterPartitionResponse,
    Errors,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ReplicaFetchPartition,
)
from eosim.simulation.records import LogBatch


def batch(offset: int, n: int = 1, leader_epoch: int = 0) -> LogBatch:
    return LogBatch(
        offset,
        7,
        0,
        offset,
        tuple(f"v{offset + i}" for i in range(n)),
        0.0,
        leader_epoch=leader_epoch,
    )


def test_a_follower_takes_the_leaders_high_watermark_even_when_it_falls():
    """UnifiedLog.updateHighWatermark on every fetch answer: min(leader's HW, own log end),
    which can be lower than what the follower had (a new leader's HW starts below it)."""
    part = Partition(TP, "broker-1", ProducerStateManager())
    part.append_as_follower([batch(0, 5)], 5, 0.0)
    assert part.high_watermark == 5
    part.append_as_follower([], 3, 1.0)
    assert part.high_watermark == 3


def _leader(previous_leader: bool) -> Partition:
    part = Partition(TP, "broker-0", ProducerStateManager())
    part.append_as_follower([batch(0, 4)], 4, 0.0)
    settings = TopicSettings(3, 1)
    if previous_leader:
        part.make_leader(
            0,
            0,
            ("broker-0", "broker-1", "broker-2"),
            ("broker-0", "broker-1", "broker-2"),
            0.0,
            settings,
            30_000.0,
            False,
        )
        assert part.leader_state is not None
        part.leader_state.follower_fetched("broker-1", 4, 4, 10.0)  # type: ignore[arg-type]
    part.make_leader(
        1,
        1,
        ("broker-0", "broker-1", "broker-2"),
        ("broker-0", "broker-1"),
        50.0,
        settings,
        30_000.0,
        False,
    )
    return part


def test_a_new_leader_knows_nothing_of_its_followers_logs():
    """Replica.resetReplicaState for a broker that was not leader: log end and last fetch
    unknown (the leader's end offset is not taken as the follower's), ISR members caught up
    now, the others never."""
    state = _leader(previous_leader=False).leader_state
    assert state is not None
    one, two = state.followers["broker-1"], state.followers["broker-2"]  # type: ignore[index]
    assert one.log_end_offset == -1 and one.last_fetch_leader_log_end_offset == -1
    assert one.last_fetch_time_ms == float("-inf") and one.last_caught_up_time_ms == 50.0
    assert two.last_caught_up_time_ms == float("-inf")


def test_a_leader_into_a_new_epoch_keeps_what_it_knew_of_its_followers():
    """resetReplicaState for a re-elected leader: the follower's log end stays; an ISR
    member counts as having fetched now, at the leader's end."""
    state = _leader(previous_leader=True).leader_state
    assert state is not None
    one = state.followers["broker-1"]  # type: ignore[index]
    assert one.log_end_offset == 4 and one.last_fetch_leader_log_end_offset == 4
    assert one.last_fetch_time_ms == 50.0 == one.last_caught_up_time_ms


def test_an_epoch_the_leader_cannot_find_is_answered_offset_out_of_range():
    """Partition.fetchRecords: a last fetched epoch for which the leader's cache has no end
    (here one newer than any it knows) is OFFSET_OUT_OF_RANGE, not a divergence at -1 (which
    made the follower truncate its whole log)."""
    h = Harness()
    h.run(5)
    rm = h.cluster.brokers["broker-0"].replica_manager
    data = rm._read_for_follower("broker-1", TP, ReplicaFetchPartition(0, 9, 0), h.env.now, False)
    assert data.error is Errors.OFFSET_OUT_OF_RANGE and data.diverging_epoch is None


def _pending_alter(h: Harness) -> tuple[object, int]:
    rm = h.cluster.brokers["broker-0"].replica_manager
    part = rm.partitions[TP]
    alter = rm.alter_partition_manager
    alter.alter_isr(part, frozenset({"broker-0", "broker-1"}))
    cid, _sent = alter._alter_in_flight[TP]
    return rm, cid


def test_a_refused_alter_partition_stays_pending_until_new_metadata():
    """Partition.handleAlterPartitionError: FENCED_LEADER_EPOCH (and INVALID_UPDATE_VERSION,
    ...) leaves the change pending, not sent again, until metadata settles it."""
    h = Harness()
    h.run(5)
    h.net.start_spike((), loss=1.0, links=[("broker-0", "controller")])
    rm, cid = _pending_alter(h)
    rm.alter_partition_manager.on_alter_partition_response(
        AlterPartitionResponse(cid, TP, Errors.FENCED_LEADER_EPOCH)
    )
    state = rm.partitions[TP].leader_state
    assert state.pending_isr == frozenset({"broker-0", "broker-1"})
    rm.alter_partition_manager._resend_stale_alter(rm.partitions[TP])
    assert rm.alter_partition_manager._alter_in_flight[TP][0] == cid  # not sent again
    assert state.maximal_isr == frozenset({"broker-0", "broker-1", "broker-2"})


def test_an_alter_partition_the_controller_did_not_apply_returns_to_the_committed_isr():
    """OPERATION_NOT_ATTEMPTED / INELIGIBLE_REPLICA: the controller says it was not applied."""
    h = Harness()
    h.run(5)
    h.net.start_spike((), loss=1.0, links=[("broker-0", "controller")])
    rm, cid = _pending_alter(h)
    rm.alter_partition_manager.on_alter_partition_response(
        AlterPartitionResponse(cid, TP, Errors.INELIGIBLE_REPLICA)
    )
    assert rm.partitions[TP].leader_state.pending_isr is None


def test_latest_offset_right_after_a_leader_change_is_not_available_until_the_hw_catches_up():
    """PartitionTest.testMonotonicOffsetsAfterLeaderChange: while a new leader's HW is below
    the start of its epoch, ListOffsets LATEST is OFFSET_NOT_AVAILABLE (answering the lagging HW
    would start an auto.offset.reset: latest consumer below what it could already have read).
    The followers got "a", "b" but not yet the HW that covers them when the leader dies, and
    broker-2 cannot fetch from the new leader."""
    h = Harness()
    h.run(5)
    h.produce("broker-0", ("a", "b"), acks=1)
    h.run(20)
    assert h.replica("broker-1").log_end_offset == 2 and h.replica("broker-1").high_watermark == 0
    h.net.start_spike((), loss=1.0, links=[("broker-2", "broker-1")])
    h.cluster.brokers["broker-0"].crash()
    h.run(SESSION_MS + 30)
    assert h.leader() == "broker-1"
    state = h.replica("broker-1").leader_state
    assert state is not None and state.epoch_start_offset == 2 and state.high_watermark == 0
    cid = h.send("broker-1", lambda c: ListOffsetsRequest(c, ((TP, -1),), "read_uncommitted"))
    h.run(5)
    answer = h.answer(cid)
    assert answer is not None and isinstance(answer[1], ListOffsetsResponse)
    assert answer[1].partitions[0][1] is Errors.OFFSET_NOT_AVAILABLE


def test_a_fetch_answered_from_mid_batch_stops_the_follower_loudly():
    """A follower whose log ends inside one of the leader's batches (logs that diverged where
    it cannot tell) gets that batch from its start: Kafka's follower cannot append it
    (UnexpectedAppendOffsetException) and marks the partition failed. It stops fetching, the
    cluster does not come to rest, and the run's warnings name it."""
    h = Harness(rf=2, brokers=2)
    h.run(5)
    h.produce("broker-0", ("a", "b", "c"), acks=1)
    h.run(5)
    follower = h.replica("broker-1")
    assert follower.log_end_offset == 3
    # Its log now ends inside the leader's batch: "a", "b" as a batch of their own.
    follower.truncate_to(0, ProducerStateManager())
    follower.append_as_follower([LogBatch(0, 7, 0, 0, ("a", "b"), 0.0)], 0, h.env.now)
    h.run(3 * SESSION_MS)
    assert follower.fetch_failed is not None and follower.log_end_offset == 2
    (warning,) = h.cluster.replica_failures()
    assert warning.startswith("broker-1: follower of t-0 stopped fetching: the leader answered")
    assert any("stopped fetching" in reason for reason in h.cluster.unconverged())


def test_a_follower_hears_of_the_advance_its_own_fetch_made_one_fetch_later():
    """Partition.readRecords takes the high watermark before the read and fetchRecords
    updates the follower's state after it: the answer to the fetch that moves the HW
    carries the HW from before (the one-fetch lag behind KIP-101's truncation losses)."""
    h = Harness()
    h.run(5)
    h.produce("broker-0", ("a", "b", "c"))
    h.run(100)
    rm = h.cluster.brokers["broker-0"].replica_manager
    part = rm.partitions[TP]
    state = part.leader_state
    assert state is not None and part.high_watermark == part.log.log_end_offset == 3
    part.log.append(7, 0, 3, ("d", "e"), h.env.now)  # the followers have not fetched these
    for follower in ("broker-1", "broker-2"):
        state.follower_fetched(follower, 3, 5, h.env.now)  # type: ignore[arg-type]
    fetch = ReplicaFetchPartition(5, 0, part.leader_epoch)
    answer = rm._read_for_follower("broker-1", TP, fetch, h.env.now, update=True)
    assert answer.error is Errors.NONE and answer.high_watermark == 3
    assert part.high_watermark == 3  # broker-2 still at 3
    answer = rm._read_for_follower("broker-2", TP, fetch, h.env.now, update=True)
    assert answer.high_watermark == 3 and part.high_watermark == 5
    # A held fetch is answered by a fresh read, which sees the advance.
    held = rm._read_for_follower("broker-1", TP, fetch, h.env.now, update=False)
    assert held.high_watermark == 5


def test_an_answer_on_the_wire_when_its_broker_dies_still_arrives():
    """A SIGKILL's reset follows the bytes the broker had already written: an acks=1 answer
    sent before the crash reaches the client, then the reset (it was dropped before)."""
    h = Harness()
    h.run(5)
    one = h.produce("broker-0", ("a",), acks=1)
    broker = h.cluster.brokers["broker-0"]
    while not h.replica("broker-0").log.records():
        h.run(0.05)
    h.run(0.5)  # answered (the request handler's 0.25 ms), not yet arrived (1 ms a hop)
    assert h.answer(one) is None
    broker.crash()
    h.run(20)
    answered = h.answer(one)
    assert answered is not None and answered[1].results[0].error is Errors.NONE
    kinds = [type(p).__name__ for _t, p in h.inbox]
    assert kinds.index("ProduceResponse") < kinds.index("Disconnected")
