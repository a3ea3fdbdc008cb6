"""The KIP-848 consumer group coordinator (``group.protocol=consumer``): the heartbeat's
epochs, the target assignment, revocation before reassignment, fencing by session, by
revocation deadline and by leave, offset commits validated by member epoch, a group across a
write failure and a reload, and KAFKA-16147 as a rule.

Each case drives :class:`GroupMetadataManager` directly with a manual timer (Kafka's
``GroupMetadataManagerTest`` style); the end-to-end cases with the client are in
``test_consumer_membership.py``."""

from __future__ import annotations

import pytest

from eosim.simulation.coordinator.classic_group import IllegalStateError
from eosim.simulation.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    reconcile,
    uniform_assign,
)
from eosim.simulation.coordinator.consumer_group_heartbeat import (
    HeartbeatAnswer,
    rebalance_timeout_key,
    session_timeout_key,
)
from eosim.simulation.coordinator.coordinator_timer import ManualTimer
from eosim.simulation.coordinator.group_config import GroupConfig
from eosim.simulation.coordinator.group_metadata_manager import GroupMetadataManager
from eosim.simulation.protocol import ConsumerGroupHeartbeatRequest, Errors

G = "app"
T = "in"


def tp(p: int) -> tuple[str, int]:
    return (T, p)


def manager(partitions: int = 4, **config: object) -> tuple[GroupMetadataManager, ManualTimer]:
    timer = ManualTimer()
    gmm = GroupMetadataManager(
        timer, GroupConfig(**config), partition_count=lambda t: partitions if t == T else 0
    )
    return gmm, timer


def beat(
    gmm: GroupMetadataManager,
    member: str,
    epoch: int,
    owned: tuple[tuple[str, int], ...] | None = (),
    *,
    topics: tuple[str, ...] | None = None,
    rebalance_timeout_ms: int = -1,
) -> HeartbeatAnswer:
    if epoch == 0:
        topics = topics if topics is not None else (T,)
        rebalance_timeout_ms = rebalance_timeout_ms if rebalance_timeout_ms >= 0 else 300_000
    request = ConsumerGroupHeartbeatRequest(
        1, G, member, epoch, None, rebalance_timeout_ms, topics, owned
    )
    result = gmm.consumer_group_heartbeat(request)
    if result.on_written is not None:
        result.on_written(Errors.NONE)
    answer = result.response
    assert isinstance(answer, HeartbeatAnswer)
    return answer


def group(gmm: GroupMetadataManager) -> ConsumerGroup:
    return gmm.consumer_groups[G]


# -- joining and the target assignment -------------------------------------------------------
def test_a_first_member_gets_every_partition_at_epoch_1():
    gmm, _ = manager()
    answer = beat(gmm, "a", 0)
    assert answer.error is Errors.NONE
    assert answer.member_epoch == 1
    assert answer.assignment == (tp(0), tp(1), tp(2), tp(3))
    assert answer.heartbeat_interval_ms == 5_000
    assert group(gmm).state is ConsumerGroupState.STABLE


def test_a_join_bumps_the_group_epoch_and_the_old_member_revokes_before_the_new_one_gets():
    gmm, timer = manager()
    beat(gmm, "a", 0)
    joined = beat(gmm, "b", 0)
    g = group(gmm)
    assert g.group_epoch == 2 and g.assignment_epoch == 2
    # b's half is still a's: b is at epoch 2 waiting for them (unreleased).
    assert joined.member_epoch == 2
    assert joined.assignment == ()
    assert g.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    # a must revoke its other half first and stays at epoch 1 meanwhile.
    everything = (tp(0), tp(1), tp(2), tp(3))
    revoking = beat(gmm, "a", 1, everything)
    a = g.members["a"]
    assert a.state is MemberState.UNREVOKED_PARTITIONS and revoking.member_epoch == 1
    assert revoking.assignment == tuple(sorted(a.assigned))
    assert timer.is_scheduled(rebalance_timeout_key(G, "a"))
    assert g.state is ConsumerGroupState.RECONCILING
    # b still gets nothing while a owns them.
    assert beat(gmm, "b", 2, ()).assignment is None
    # a acknowledges the revocation: epoch 2; then b's heartbeat takes the freed half.
    done = beat(gmm, "a", 1, revoking.assignment)
    assert done.member_epoch == 2 and g.members["a"].state is MemberState.STABLE
    assert not timer.is_scheduled(rebalance_timeout_key(G, "a"))
    taken = beat(gmm, "b", 2, ())
    assert taken.assignment is not None and len(taken.assignment) == 2
    assert set(taken.assignment).isdisjoint(done.assignment or revoking.assignment)
    assert g.state is ConsumerGroupState.STABLE


def test_no_partition_is_ever_owned_by_two_members():
    gmm, _ = manager(partitions=6)
    owned: dict[str, tuple[tuple[str, int], ...]] = {}
    epochs: dict[str, int] = {}
    order = ["a", "b", "c", "a", "b", "c", "a", "b", "c", "c", "b", "a"]
    for m in ["a", "b", "c"]:
        answer = beat(gmm, m, 0)
        epochs[m], owned[m] = answer.member_epoch, answer.assignment or ()
    for m in order:
        answer = beat(gmm, m, epochs[m], owned[m])
        epochs[m] = answer.member_epoch
        if answer.assignment is not None:
            owned[m] = answer.assignment
        held = [p for parts in owned.values() for p in parts]
        assert len(held) == len(set(held))
    assert sorted(p for parts in owned.values() for p in parts) == [tp(i) for i in range(6)]
    assert group(gmm).state is ConsumerGroupState.STABLE


def test_a_new_subscription_bumps_the_group_epoch_and_the_same_one_does_not():
    gmm, _ = manager()
    beat(gmm, "a", 0)
    beat(gmm, "a", 1, (tp(0), tp(1), tp(2), tp(3)), topics=(T,))
    assert group(gmm).group_epoch == 1
    beat(gmm, "a", 1, (tp(0), tp(1), tp(2), tp(3)), topics=(T, "other"))
    assert group(gmm).group_epoch == 2


# -- epochs ----------------------------------------------------------------------------------
def test_a_greater_epoch_is_fenced():
    gmm, _ = manager()
    beat(gmm, "a", 0)
    assert beat(gmm, "a", 5, ()).error is Errors.FENCED_MEMBER_EPOCH


def test_the_previous_epoch_is_accepted_only_with_owned_partitions_inside_the_assignment():
    gmm, _ = manager()
    beat(gmm, "a", 0)
    beat(gmm, "b", 0)
    everything = (tp(0), tp(1), tp(2), tp(3))
    kept = beat(gmm, "a", 1, everything).assignment
    assert kept is not None
    beat(gmm, "a", 1, kept)  # now at epoch 2; previous epoch 1
    assert group(gmm).members["a"].member_epoch == 2
    # The answer with epoch 2 was lost: epoch 1 with a subset is accepted.
    assert beat(gmm, "a", 1, kept).error is Errors.NONE
    # Epoch 1 still owning a revoked partition is not; nor is unknown ownership.
    assert beat(gmm, "a", 1, everything).error is Errors.FENCED_MEMBER_EPOCH
    assert beat(gmm, "a", 1, None).error is Errors.FENCED_MEMBER_EPOCH


def test_an_unknown_member_and_an_unknown_group():
    gmm, _ = manager()
    request = ConsumerGroupHeartbeatRequest(1, G, "x", 3, None, -1, None, ())
    assert gmm.consumer_group_heartbeat(request).response.error is Errors.GROUP_ID_NOT_FOUND
    beat(gmm, "a", 0)
    assert beat(gmm, "x", 3, ()).error is Errors.UNKNOWN_MEMBER_ID


def test_a_join_without_its_fields_is_an_invalid_request():
    gmm, _ = manager()
    request = ConsumerGroupHeartbeatRequest(1, G, "a", 0, None, -1, None, ())
    assert gmm.consumer_group_heartbeat(request).response.error is Errors.INVALID_REQUEST


# -- fencing ---------------------------------------------------------------------------------
def test_an_expired_session_fences_the_member_and_frees_its_partitions_at_once():
    gmm, timer = manager(consumer_session_timeout_ms=45_000)
    beat(gmm, "a", 0)
    beat(gmm, "b", 0)
    a = beat(gmm, "a", 1, (tp(0), tp(1), tp(2), tp(3)))
    beat(gmm, "a", 1, a.assignment)
    b = beat(gmm, "b", 2, ())
    assert b.assignment is not None and len(b.assignment) == 2
    timer.advance(44_000)
    beat(gmm, "b", 2, b.assignment)  # b keeps its session; a does not
    fired = timer.advance(2_000)
    assert [key for key, _ in fired] == [session_timeout_key(G, "a")]
    g = group(gmm)
    assert "a" not in g.members and g.group_epoch == 3
    assert all(g.current_partition_epoch(p) == -1 for p in a.assignment or ())
    # b gets everything at its next heartbeat; a's late heartbeat is UNKNOWN_MEMBER_ID.
    taken = beat(gmm, "b", 2, b.assignment)
    assert taken.member_epoch == 3 and taken.assignment == (tp(0), tp(1), tp(2), tp(3))
    assert beat(gmm, "a", 2, a.assignment).error is Errors.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced():
    gmm, timer = manager()
    beat(gmm, "a", 0, rebalance_timeout_ms=10_000)
    beat(gmm, "b", 0)
    beat(gmm, "a", 1, (tp(0), tp(1), tp(2), tp(3)))
    assert group(gmm).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    timer.advance(9_999)
    assert "a" in group(gmm).members
    fired = timer.advance(1)
    assert rebalance_timeout_key(G, "a") in [key for key, _ in fired]
    assert "a" not in group(gmm).members


def test_a_rebalance_timeout_for_an_epoch_the_member_has_left_does_nothing():
    gmm, timer = manager()
    beat(gmm, "a", 0, rebalance_timeout_ms=10_000)
    beat(gmm, "b", 0)
    kept = beat(gmm, "a", 1, (tp(0), tp(1), tp(2), tp(3))).assignment
    beat(gmm, "a", 1, kept)
    timer.advance(20_000)
    assert "a" in group(gmm).members


def test_a_leave_fences_the_member_and_bumps_the_epoch():
    gmm, _ = manager()
    beat(gmm, "a", 0)
    answer = beat(gmm, "a", -1, None)
    assert answer.error is Errors.NONE and answer.member_epoch == -1
    assert group(gmm).members == {} and group(gmm).group_epoch == 2
    assert group(gmm).state is ConsumerGroupState.EMPTY


# -- offset commits --------------------------------------------------------------------------
def test_a_commit_must_carry_the_members_current_epoch():
    gmm, _ = manager()
    beat(gmm, "a", 0)
    assert gmm.validate_offset_commit(G, "a", None, 1, False) is Errors.NONE
    assert gmm.validate_offset_commit(G, "a", None, 0, False) is Errors.STALE_MEMBER_EPOCH
    assert gmm.validate_offset_commit(G, "zz", None, 1, False) is Errors.UNKNOWN_MEMBER_ID
    # A transactional commit's stale epoch is ILLEGAL_GENERATION.
    assert gmm.validate_offset_commit(G, "a", None, 0, True) is Errors.ILLEGAL_GENERATION
    # No epoch: refused while the group has members, accepted once it is empty.
    assert gmm.validate_offset_commit(G, "", None, -1, False) is Errors.UNKNOWN_MEMBER_ID
    beat(gmm, "a", -1, None)
    assert gmm.validate_offset_commit(G, "", None, -1, False) is Errors.NONE


def test_any_epoch_bump_fails_a_commit_of_the_old_epoch_even_for_a_kept_partition():
    gmm, _ = manager()
    beat(gmm, "a", 0)
    beat(gmm, "b", 0)
    kept = beat(gmm, "a", 1, (tp(0), tp(1), tp(2), tp(3))).assignment
    assert gmm.validate_offset_commit(G, "a", None, 1, False) is Errors.NONE
    beat(gmm, "a", 1, kept)
    assert gmm.validate_offset_commit(G, "a", None, 1, False) is Errors.STALE_MEMBER_EPOCH


def test_the_generation_check_rule_off_accepts_a_stale_epoch():
    gmm, _ = manager()
    beat(gmm, "a", 0)
    assert gmm.validate_offset_commit(G, "a", None, 0, True, False) is Errors.NONE


# -- writes and loads ------------------------------------------------------------------------
def test_a_failed_write_restores_the_group_as_it_was():
    gmm, _ = manager()
    beat(gmm, "a", 0)
    before = group(gmm).record()
    request = ConsumerGroupHeartbeatRequest(1, G, "b", 0, None, 300_000, (T,), ())
    result = gmm.consumer_group_heartbeat(request)
    assert "b" in group(gmm).members
    assert result.on_written is not None
    result.on_written(Errors.NOT_COORDINATOR)
    assert group(gmm).record() == before


def test_a_failed_write_of_a_new_group_removes_it():
    gmm, _ = manager()
    request = ConsumerGroupHeartbeatRequest(1, G, "a", 0, None, 300_000, (T,), ())
    result = gmm.consumer_group_heartbeat(request)
    assert result.on_written is not None
    result.on_written(Errors.COORDINATOR_NOT_AVAILABLE)
    assert G not in gmm.consumer_groups


def test_a_reloaded_group_is_the_written_one_and_its_sessions_restart():
    gmm, _ = manager()
    beat(gmm, "a", 0, rebalance_timeout_ms=10_000)
    beat(gmm, "b", 0)
    beat(gmm, "a", 1, (tp(0), tp(1), tp(2), tp(3)))
    record = group(gmm).record()
    other, timer = manager()
    other.replay_consumer_group(record)
    other.on_loaded()
    assert other.consumer_groups[G].record() == record
    assert other.consumer_groups[G].partition_epochs == group(gmm).partition_epochs
    assert timer.is_scheduled(session_timeout_key(G, "a"))
    assert timer.is_scheduled(session_timeout_key(G, "b"))
    assert timer.is_scheduled(rebalance_timeout_key(G, "a"))


def test_a_classic_join_into_a_consumer_group_is_refused():
    from eosim.simulation.protocol import JoinGroupRequest

    gmm, _ = manager()
    beat(gmm, "a", 0)
    answers = []
    gmm.classic_group_join(
        JoinGroupRequest(1, G, "", None, 10_000, 10_000, (("range", None),), "c"),
        answers.append,
    )
    assert answers[0].error is Errors.INCONSISTENT_GROUP_PROTOCOL


# -- the assignor and the builder ------------------------------------------------------------
def test_the_uniform_assignor_is_balanced_and_sticky():
    first = uniform_assign(["a", "b"], (T,), {T: 5}, {})
    assert sorted(len(p) for p in first.values()) == [2, 3]
    assert sorted(p for parts in first.values() for p in parts) == [tp(i) for i in range(5)]
    second = uniform_assign(["a", "b", "c"], (T,), {T: 5}, first)
    for m in ("a", "b"):
        assert second[m] <= first[m]  # nobody takes another's partition
    assert sorted(len(p) for p in second.values()) == [1, 2, 2]


def test_the_builder_keeps_a_revoking_member_until_its_heartbeat_drops_the_partitions():
    member = ConsumerGroupMember("a", member_epoch=1, assigned=frozenset({tp(0), tp(1)}))
    target = frozenset({tp(0)})
    revoking = reconcile(member, 2, target, {tp(0): 1, tp(1): 1}, (tp(0), tp(1)))
    assert revoking.state is MemberState.UNREVOKED_PARTITIONS and revoking.member_epoch == 1
    same = reconcile(revoking, 2, target, {tp(0): 1, tp(1): 1}, (tp(0), tp(1)))
    assert same == revoking
    done = reconcile(revoking, 2, target, {tp(0): 1, tp(1): 1}, (tp(0),))
    assert done.state is MemberState.STABLE and done.member_epoch == 2
    # A member that already dropped them skips UNREVOKED_PARTITIONS altogether.
    direct = reconcile(member, 2, target, {tp(0): 1, tp(1): 1}, (tp(0),))
    assert direct.state is MemberState.STABLE and direct.member_epoch == 2


# -- KAFKA-16147 -----------------------------------------------------------------------------
def _give_back(strict: bool) -> ConsumerGroup:
    """a revokes tp(2), tp(3) for b; b leaves before a finishes; a's next target gives them
    back (KAFKA-16147's log: revoking P to stable P)."""
    gmm, _ = manager(strict_partition_epochs=strict)
    beat(gmm, "a", 0)
    beat(gmm, "b", 0)
    beat(gmm, "a", 1, (tp(0), tp(1), tp(2), tp(3)))
    assert group(gmm).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    beat(gmm, "b", -1, None)
    beat(gmm, "a", 1, (tp(0), tp(1), tp(2), tp(3)))
    return group(gmm)


def test_kafka_16147_fixed_a_member_keeps_the_epochs_of_partitions_it_still_holds():
    g = _give_back(strict=True)
    a = g.members["a"]
    held = a.assigned | a.pending_revocation
    assert held == frozenset(tp(i) for i in range(4))
    assert all(g.current_partition_epoch(p) == a.member_epoch for p in held)


def test_kafka_16147_on_partitions_given_back_lose_their_epoch():
    g = _give_back(strict=False)
    a = g.members["a"]
    assert a.state is MemberState.STABLE and a.assigned == frozenset(tp(i) for i in range(4))
    lost = [p for p in a.assigned if g.current_partition_epoch(p) == -1]
    assert lost == [tp(2), tp(3)] or sorted(lost) == [tp(2), tp(3)]


def test_strict_bookkeeping_refuses_a_partition_owned_twice():
    g = ConsumerGroup(G)
    g.update_member(ConsumerGroupMember("a", member_epoch=1, assigned=frozenset({tp(0)})))
    with pytest.raises(IllegalStateError):
        g.update_member(ConsumerGroupMember("b", member_epoch=1, assigned=frozenset({tp(0)})))


def test_every_reconciliation_step_moves_the_previous_epoch_even_at_the_same_epoch():
    """Kafka's ``ConsumerGroupMember.Builder.updateMemberEpoch`` always sets the previous
    epoch to the current one, also when a step keeps the epoch (entering
    UNREVOKED_PARTITIONS, or UNRELEASED_PARTITIONS becoming STABLE): the epoch before is then
    no longer accepted as the previous one."""
    member = ConsumerGroupMember(
        "a", member_epoch=4, previous_member_epoch=3, assigned=frozenset({tp(0), tp(1)})
    )
    revoking = reconcile(member, 5, frozenset({tp(0)}), {tp(0): 4, tp(1): 4}, (tp(0), tp(1)))
    assert revoking.state is MemberState.UNREVOKED_PARTITIONS
    assert (revoking.member_epoch, revoking.previous_member_epoch) == (4, 4)
    waiting = ConsumerGroupMember(
        "b", member_epoch=5, previous_member_epoch=4, state=MemberState.UNRELEASED_PARTITIONS
    )
    stable = reconcile(waiting, 5, frozenset({tp(1)}), {}, ())
    assert stable.state is MemberState.STABLE and stable.assigned == frozenset({tp(1)})
    assert (stable.member_epoch, stable.previous_member_epoch) == (5, 5)


def test_a_heartbeat_with_the_epoch_before_an_unchanged_step_is_fenced():
    gmm, _ = manager()
    beat(gmm, "a", 0)  # epoch 1, previous 0
    beat(gmm, "b", 0)
    everything = (tp(0), tp(1), tp(2), tp(3))
    assert beat(gmm, "a", 1, everything).member_epoch == 1  # revoking at epoch 1
    assert group(gmm).members["a"].previous_member_epoch == 1
    assert beat(gmm, "a", 0, ()).error is Errors.FENCED_MEMBER_EPOCH
