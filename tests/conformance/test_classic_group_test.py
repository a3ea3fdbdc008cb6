"""Conformance with Kafka's ClassicGroupTest (group-coordinator, ``classic`` package).

One test per Kafka case, its name kept in the docstring; the facts are Kafka's, the code is
eosim's. Kafka's group starts Empty as ``new ClassicGroup(..., EMPTY, ...)``; members are built
as its ``ClassicGroupMember`` constructor calls build them (``conformance.groups.member``).
A response future is a :class:`conformance.groups.Future`.
"""

from __future__ import annotations

import pytest
from conformance.groups import Future, member
from conformance.not_modelled import not_modelled

from eosim.simulation.coordinator.classic_group import (
    ClassicGroup,
    ClassicGroupState,
    GroupError,
    IllegalStateError,
    SyncAnswer,
)
from eosim.simulation.protocol import Errors

S = ClassicGroupState
MEMBER_ID = "memberId"
INSTANCE_ID = "groupInstanceId"


@pytest.fixture
def group() -> ClassicGroup:
    return ClassicGroup("groupId")


# -- canRebalance ---------------------------------------------------------------------------
def test_can_rebalance_when_stable(group):
    """ClassicGroupTest.testCanRebalanceWhenStable (the group is in fact Empty there)."""
    assert group.can_rebalance()


def test_can_rebalance_when_completing_rebalance(group):
    """ClassicGroupTest.testCanRebalanceWhenCompletingRebalance."""
    group.transition_to(S.PREPARING_REBALANCE)
    group.transition_to(S.COMPLETING_REBALANCE)
    assert group.can_rebalance()


def test_cannot_rebalance_when_preparing_rebalance(group):
    """ClassicGroupTest.testCannotRebalanceWhenPreparingRebalance."""
    group.transition_to(S.PREPARING_REBALANCE)
    assert not group.can_rebalance()


def test_cannot_rebalance_when_dead(group):
    """ClassicGroupTest.testCannotRebalanceWhenDead."""
    group.transition_to(S.PREPARING_REBALANCE)
    group.transition_to(S.EMPTY)
    group.transition_to(S.DEAD)
    assert not group.can_rebalance()


# -- transitions ----------------------------------------------------------------------------
LEGAL_PATHS = {
    "testStableToPreparingRebalanceTransition": [
        S.PREPARING_REBALANCE,
        S.COMPLETING_REBALANCE,
        S.STABLE,
        S.PREPARING_REBALANCE,
    ],
    "testStableToDeadTransition": [
        S.PREPARING_REBALANCE,
        S.COMPLETING_REBALANCE,
        S.STABLE,
        S.DEAD,
    ],
    "testAwaitingRebalanceToPreparingRebalanceTransition": [
        S.PREPARING_REBALANCE,
        S.COMPLETING_REBALANCE,
        S.PREPARING_REBALANCE,
    ],
    "testPreparingRebalanceToDeadTransition": [S.PREPARING_REBALANCE, S.DEAD],
    "testPreparingRebalanceToEmptyTransition": [S.PREPARING_REBALANCE, S.EMPTY],
    "testEmptyToDeadTransition": [S.PREPARING_REBALANCE, S.EMPTY, S.DEAD],
    "testAwaitingRebalanceToStableTransition": [
        S.PREPARING_REBALANCE,
        S.COMPLETING_REBALANCE,
        S.STABLE,
    ],
    # Named "Illegal" in Kafka, but the test asserts that Dead -> Dead succeeds.
    "testDeadToDeadIllegalTransition": [S.PREPARING_REBALANCE, S.DEAD, S.DEAD],
}

ILLEGAL = {
    "testEmptyToStableIllegalTransition": ([], S.STABLE),
    "testStableToStableIllegalTransition": (
        [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE],
        S.STABLE,
    ),
    "testEmptyToAwaitingRebalanceIllegalTransition": ([], S.COMPLETING_REBALANCE),
    "testPreparingRebalanceToPreparingRebalanceIllegalTransition": (
        [S.PREPARING_REBALANCE],
        S.PREPARING_REBALANCE,
    ),
    "testPreparingRebalanceToStableIllegalTransition": ([S.PREPARING_REBALANCE], S.STABLE),
    "testAwaitingRebalanceToAwaitingRebalanceIllegalTransition": (
        [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE],
        S.COMPLETING_REBALANCE,
    ),
    "testDeadToStableIllegalTransition": ([S.PREPARING_REBALANCE, S.DEAD], S.STABLE),
    "testDeadToPreparingRebalanceIllegalTransition": (
        [S.PREPARING_REBALANCE, S.DEAD],
        S.PREPARING_REBALANCE,
    ),
    "testDeadToAwaitingRebalanceIllegalTransition": (
        [S.PREPARING_REBALANCE, S.DEAD],
        S.COMPLETING_REBALANCE,
    ),
}


@pytest.mark.parametrize("kafka_test", sorted(LEGAL_PATHS))
def test_legal_transition(group, kafka_test):
    """ClassicGroupTest's legal transition cases, each a path of transitions that succeed."""
    for state in LEGAL_PATHS[kafka_test]:
        group.transition_to(state)
    assert group.state is LEGAL_PATHS[kafka_test][-1]


@pytest.mark.parametrize("kafka_test", sorted(ILLEGAL))
def test_illegal_transition(group, kafka_test):
    """ClassicGroupTest's illegal transition cases: the last step raises and changes
    nothing."""
    path, target = ILLEGAL[kafka_test]
    for state in path:
        group.transition_to(state)
    before = group.state
    with pytest.raises(IllegalStateError):
        group.transition_to(target)
    assert group.state is before


# -- protocols ------------------------------------------------------------------------------
def test_select_protocol(group):
    """ClassicGroupTest.testSelectProtocol: a 1-1 vote is a tie (Kafka: either); a third
    member's vote for roundrobin decides."""
    group.add(member(MEMBER_ID, protocols=(("range", b""), ("roundrobin", b""))))
    group.add(member("member2", protocols=(("roundrobin", b""), ("range", b""))))
    assert group.select_protocol() in ("range", "roundrobin")
    group.add(member("member3", protocols=(("roundrobin", b""), ("range", b""))))
    assert group.select_protocol() == "roundrobin"


def test_select_protocol_raises_if_no_members(group):
    """ClassicGroupTest.testSelectProtocolRaisesIfNoMembers."""
    with pytest.raises(IllegalStateError):
        group.select_protocol()


def test_select_protocol_chooses_compatible_protocol(group):
    """ClassicGroupTest.testSelectProtocolChoosesCompatibleProtocol: member 1 prefers range,
    but only roundrobin is supported by both."""
    group.add(member(MEMBER_ID, protocols=(("range", b""), ("roundrobin", b""))))
    group.add(member("member2", protocols=(("roundrobin", b""), ("foo", b""))))
    assert group.select_protocol() == "roundrobin"


def test_supports_protocols(group):
    """ClassicGroupTest.testSupportsProtocols."""
    assert group.supports_protocols("consumer", ("range", "roundrobin"))
    group.add(member(MEMBER_ID, protocols=(("range", b""), ("roundrobin", b""))))
    group.transition_to(S.PREPARING_REBALANCE)
    assert group.supports_protocols("consumer", ("roundrobin", "foo"))
    assert group.supports_protocols("consumer", ("range", "bar"))
    assert not group.supports_protocols("consumer", ("foo", "bar"))


# -- generations ----------------------------------------------------------------------------
def test_init_next_generation(group):
    """ClassicGroupTest.testInitNextGeneration."""
    group.transition_to(S.PREPARING_REBALANCE)
    group.add(member(MEMBER_ID), Future())
    assert (group.generation, group.protocol_name) == (0, None)
    group.init_next_generation()
    assert (group.generation, group.protocol_name) == (1, "roundrobin")
    assert group.state is S.COMPLETING_REBALANCE


def test_init_next_generation_empty_group(group):
    """ClassicGroupTest.testInitNextGenerationEmptyGroup: no member, so Empty (E2)."""
    group.transition_to(S.PREPARING_REBALANCE)
    group.init_next_generation()
    assert (group.generation, group.protocol_name, group.state) == (1, None, S.EMPTY)


def test_new_generation_clears_pending_sync_members(group):
    """ClassicGroupTest.testNewGenerationClearsPendingSyncMembers."""
    group.add(member(MEMBER_ID))
    group.transition_to(S.PREPARING_REBALANCE)
    group.add_pending_sync_member(MEMBER_ID)
    assert list(group.pending_sync) == [MEMBER_ID]
    group.init_next_generation()
    assert list(group.pending_sync) == []


# -- static members -------------------------------------------------------------------------
def test_replace_group_instance_with_non_existing_member(group):
    """ClassicGroupTest.testReplaceGroupInstanceWithNonExistingMember."""
    with pytest.raises(ValueError):
        group.replace_static_member(INSTANCE_ID, MEMBER_ID, "newMemberId")


def test_replace_group_instance(group):
    """ClassicGroupTest.testReplaceGroupInstance: the new id takes the leadership and the
    instance; the old member's parked join and sync get FENCED_INSTANCE_ID."""
    old = member(MEMBER_ID, INSTANCE_ID)
    join, sync = Future(), Future()
    group.add(old, join)
    old.awaiting_sync = sync
    assert group.is_leader(MEMBER_ID) and group.static_member_id(INSTANCE_ID) == MEMBER_ID
    group.replace_static_member(INSTANCE_ID, MEMBER_ID, "newMemberId")
    assert group.is_leader("newMemberId")
    assert group.static_member_id(INSTANCE_ID) == "newMemberId"
    assert join.value.error is Errors.FENCED_INSTANCE_ID
    assert sync.value.error is Errors.FENCED_INSTANCE_ID
    assert not old.is_awaiting_join() and not old.is_awaiting_sync()


def test_cannot_add_static_member_if_already_present(group):
    """ClassicGroupTest.testCannotAddStaticMemberIfAlreadyPresent."""
    m = member(MEMBER_ID, INSTANCE_ID)
    group.add(m)
    assert group.has_member(MEMBER_ID) and group.has_static_member(INSTANCE_ID)
    with pytest.raises(IllegalStateError):
        group.add(m)


# -- futures and pending members --------------------------------------------------------------
def test_complete_join_future(group):
    """ClassicGroupTest.testCompleteJoinFuture."""
    m = member(MEMBER_ID)
    future = Future()
    group.add(m, future)
    assert group.has_all_members_joined()
    assert group.complete_join(m, "answer")
    assert future.value == "answer"
    assert group.num_awaiting_join == 0 and not group.has_all_members_joined()


def test_not_complete_join_future(group):
    """ClassicGroupTest.testNotCompleteJoinFuture."""
    m = member(MEMBER_ID)
    group.add(m)
    assert not m.is_awaiting_join()
    assert not group.complete_join(m, "answer")
    assert group.num_awaiting_join == 0 and not group.has_all_members_joined()


def test_complete_sync_future(group):
    """ClassicGroupTest.testCompleteSyncFuture."""
    m = member(MEMBER_ID)
    group.add(m)
    future = Future()
    m.awaiting_sync = future
    assert group.complete_sync(m, SyncAnswer(Errors.NONE))
    assert future.done and not m.is_awaiting_sync()


def test_not_complete_sync_future(group):
    """ClassicGroupTest.testNotCompleteSyncFuture."""
    m = member(MEMBER_ID)
    group.add(m)
    assert not group.complete_sync(m, SyncAnswer(Errors.NONE))


def test_cannot_add_pending_member_if_stable(group):
    """ClassicGroupTest.testCannotAddPendingMemberIfStable."""
    group.add(member(MEMBER_ID))
    with pytest.raises(IllegalStateError):
        group.add_pending_member(MEMBER_ID)


def test_removal_from_pending_after_member_is_stable(group):
    """ClassicGroupTest.testRemovalFromPendingAfterMemberIsStable."""
    group.add_pending_member(MEMBER_ID)
    assert not group.has_member(MEMBER_ID) and group.is_pending_member(MEMBER_ID)
    group.add(member(MEMBER_ID))
    assert group.has_member(MEMBER_ID) and not group.is_pending_member(MEMBER_ID)


def test_removal_from_pending_when_member_is_removed(group):
    """ClassicGroupTest.testRemovalFromPendingWhenMemberIsRemoved."""
    group.add_pending_member(MEMBER_ID)
    assert group.is_pending_member(MEMBER_ID)
    group.remove(MEMBER_ID)
    assert not group.is_pending_member(MEMBER_ID) and not group.has_member(MEMBER_ID)


def test_cannot_add_pending_sync_of_unknown_member(group):
    """ClassicGroupTest.testCannotAddPendingSyncOfUnknownMember."""
    with pytest.raises(IllegalStateError):
        group.add_pending_sync_member(MEMBER_ID)


def test_cannot_remove_pending_sync_of_unknown_member(group):
    """ClassicGroupTest.testCannotRemovePendingSyncOfUnknownMember."""
    with pytest.raises(IllegalStateError):
        group.remove_pending_sync_member(MEMBER_ID)


def test_can_add_and_remove_pending_sync_member(group):
    """ClassicGroupTest.testCanAddAndRemovePendingSyncMember."""
    group.add(member(MEMBER_ID))
    group.add_pending_sync_member(MEMBER_ID)
    assert list(group.pending_sync) == [MEMBER_ID]
    group.remove_pending_sync_member(MEMBER_ID)
    assert list(group.pending_sync) == []


def test_removal_from_pending_sync_when_member_is_removed(group):
    """ClassicGroupTest.testRemovalFromPendingSyncWhenMemberIsRemoved."""
    group.add(member(MEMBER_ID, INSTANCE_ID))
    group.add_pending_sync_member(MEMBER_ID)
    group.remove(MEMBER_ID)
    assert list(group.pending_sync) == []


# -- leaders --------------------------------------------------------------------------------
def test_elect_new_joined_leader(group):
    """ClassicGroupTest.testElectNewJoinedLeader: the leader did not rejoin, the first member
    that did leads."""
    leader = member(MEMBER_ID)
    group.add(leader)
    assert group.is_leader(MEMBER_ID) and not leader.is_awaiting_join()
    group.add(member("new-leader"), Future())
    group.add(member("new-member"))
    assert group.maybe_elect_new_joined_leader()
    assert group.is_leader("new-leader")


def test_maybe_elect_new_joined_leader_choose_existing(group):
    """ClassicGroupTest.testMaybeElectNewJoinedLeaderChooseExisting."""
    leader = member(MEMBER_ID)
    group.add(leader, Future())
    assert group.is_leader(MEMBER_ID) and leader.is_awaiting_join()
    group.add(member("new-member"))
    assert group.maybe_elect_new_joined_leader()
    assert group.is_leader(MEMBER_ID)


# -- offset commits -------------------------------------------------------------------------
def _error(group: ClassicGroup, *args) -> Errors:
    try:
        group.validate_offset_commit(*args)
    except GroupError as e:
        return e.error
    return Errors.NONE


def test_validate_offset_commit(group):
    """ClassicGroupTest.testValidateOffsetCommit (every OffsetCommit version alike)."""
    assert _error(group, "", "", -1, False) is Errors.NONE  # admin client, Empty group
    group.add(member("member-id", "instance-id", rebalance_timeout_ms=100, session_timeout_ms=100))
    group.transition_to(S.PREPARING_REBALANCE)
    group.init_next_generation()
    assert _error(group, "", None, -1, False) is Errors.UNKNOWN_MEMBER_ID
    assert _error(group, "", None, -1, True) is Errors.NONE  # transactional, no member
    assert _error(group, "unknown", "unknown", -1, False) is Errors.UNKNOWN_MEMBER_ID
    assert _error(group, "member-id", "unknown", -1, False) is Errors.UNKNOWN_MEMBER_ID
    assert _error(group, "member-id", "instance-id", 0, False) is Errors.ILLEGAL_GENERATION
    # CompletingRebalance
    assert _error(group, "member-id", "instance-id", 1, False) is Errors.REBALANCE_IN_PROGRESS
    group.transition_to(S.STABLE)
    assert _error(group, "member-id", "instance-id", 1, False) is Errors.NONE
    group.replace_static_member("instance-id", "member-id", "new-member-id")
    assert _error(group, "member-id", "instance-id", 1, False) is Errors.FENCED_INSTANCE_ID
    group.remove("new-instance-id")
    group.transition_to(S.DEAD)
    dead = _error(group, "member-id", "new-instance-id", 1, False)
    assert dead is Errors.COORDINATOR_NOT_AVAILABLE


test_not_modelled = not_modelled(
    "ClassicGroupTest",
    {
        "testSubscribedTopics": "subscribed topics are not tracked (one input topic per group)",
        "testSubscribedTopicsNonConsumerGroup": "only consumer groups are modelled",
        "testIsSubscribedToTopic": "subscribed topics are not tracked",
        "testUpdateMember": "covered by the join tests of GroupMetadataManagerTest",
        "testValidateOffsetDelete": "OffsetDelete is not modelled",
        "testValidateDeleteGroup": "DeleteGroups is not modelled",
        "testOffsetExpirationCondition": "offset expiry is not modelled",
        "testIsInStates": "ListGroups is not modelled",
        "testCompleteAllJoinFutures": "covered by testClassicGroupOnUnloadedCompletingRebalance",
        "testCompleteAllSyncFutures": "covered by testClassicGroupOnUnloadedCompletingRebalance",
        "testFromConsumerGroupWithJoiningMember": "no classic/consumer group conversion",
        "testFromConsumerGroupWithoutJoiningMember": "no classic/consumer group conversion",
    },
)
