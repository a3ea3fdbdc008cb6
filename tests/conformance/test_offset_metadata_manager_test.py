"""Conformance with Kafka's OffsetMetadataManagerTest, the classic-group (``testGenericGroup*``)
commit cases: the validation a commit passes before it is written
(``OffsetMetadataManager.validateOffsetCommit`` / ``validateTransactionalOffsetCommit``, then
``ClassicGroup.validateOffsetCommit``), and the session an accepted commit keeps alive.

Kafka's test context holds a ``GroupMetadataManager`` on a mock timer; here it is
:class:`conformance.groups.GroupContext`. ``commit`` and ``txn_commit`` are what the runtime does
with an OffsetCommit / TxnOffsetCommit before writing it (``tests/test_classic_group.py`` sends
them through a cluster)."""

from __future__ import annotations

from conformance.groups import GroupContext, member
from conformance.not_modelled import not_modelled

from eosim.simulation.coordinator.classic_group import ClassicGroup, ClassicGroupState
from eosim.simulation.protocol import Errors

S = ClassicGroupState


def generic_member(member_id: str, instance_id: str | None = None):
    """OffsetMetadataManagerTest.mkGenericMember: range, 5 s session and rebalance timeouts."""
    return member(
        member_id,
        instance_id,
        protocols=(("range", b""),),
        rebalance_timeout_ms=5000,
        session_timeout_ms=5000,
    )


def commit(
    ctx: GroupContext, member_id: str = "", generation: int = -1, instance_id=None
) -> Errors:
    error = ctx.manager.validate_offset_commit("foo", member_id, instance_id, generation, False)
    if error is Errors.NONE:
        ctx.manager.commit_keeps_session("foo", member_id)
    return error


def txn_commit(ctx: GroupContext, member_id: str = "", generation: int = -1) -> Errors:
    return ctx.manager.validate_offset_commit("foo", member_id, None, generation, True)


def group_at_generation_1(ctx: GroupContext, instance_id: str | None, stable: bool) -> ClassicGroup:
    group = ctx.create_group("foo")
    group.add(generic_member("member", instance_id))
    group.transition_to(S.PREPARING_REBALANCE)
    group.init_next_generation()
    assert group.generation == 1
    if stable:
        group.transition_to(S.STABLE)
    return group


def test_generic_group_offset_commit_with_dead_group():
    """OffsetMetadataManagerTest.testGenericGroupOffsetCommitWithDeadGroup."""
    ctx = GroupContext()
    ctx.create_group("foo").transition_to(S.DEAD)
    assert commit(ctx, "member", 10) is Errors.COORDINATOR_NOT_AVAILABLE


def test_generic_group_offset_commit_with_unknown_member_id():
    """OffsetMetadataManagerTest.testGenericGroupOffsetCommitWithUnknownMemberId."""
    ctx = GroupContext()
    ctx.create_group("foo")
    assert commit(ctx, "member", 10) is Errors.UNKNOWN_MEMBER_ID


def test_generic_group_offset_commit_with_illegal_generation():
    """OffsetMetadataManagerTest.testGenericGroupOffsetCommitWithIllegalGeneration."""
    ctx = GroupContext()
    group_at_generation_1(ctx, "new-instance-id", stable=False)
    assert commit(ctx, "member", 10) is Errors.ILLEGAL_GENERATION


def test_generic_group_offset_commit_with_unknown_instance_id():
    """OffsetMetadataManagerTest.testGenericGroupOffsetCommitWithUnknownInstanceId."""
    ctx = GroupContext()
    ctx.create_group("foo").add(generic_member("member"))
    assert commit(ctx, "member", 10, "instanceid") is Errors.UNKNOWN_MEMBER_ID


def test_generic_group_offset_commit_with_fenced_instance_id():
    """OffsetMetadataManagerTest.testGenericGroupOffsetCommitWithFencedInstanceId: an instance
    id the group does not know is UNKNOWN_MEMBER_ID (FENCED_INSTANCE_ID needs the instance to
    map to another member, ClassicGroupTest.testValidateOffsetCommit)."""
    ctx = GroupContext()
    ctx.create_group("foo").add(generic_member("member", "new-instance-id"))
    assert commit(ctx, "member", 10, "old-instance-id") is Errors.UNKNOWN_MEMBER_ID


def test_generic_group_offset_commit_while_in_completing_rebalance_state():
    """OffsetMetadataManagerTest.testGenericGroupOffsetCommitWhileInCompletingRebalanceState."""
    ctx = GroupContext()
    group_at_generation_1(ctx, "new-instance-id", stable=False)
    assert commit(ctx, "member", 1) is Errors.REBALANCE_IN_PROGRESS


def test_generic_group_offset_commit_without_member_id_and_generation():
    """OffsetMetadataManagerTest.testGenericGroupOffsetCommitWithoutMemberIdAndGeneration: a
    plain commit naming no member is refused by a group with members."""
    ctx = GroupContext()
    group_at_generation_1(ctx, "new-instance-id", stable=False)
    assert commit(ctx) is Errors.UNKNOWN_MEMBER_ID


def test_generic_group_offset_commit_maintains_session():
    """OffsetMetadataManagerTest.testGenericGroupOffsetCommitMaintainsSession: a commit at half
    the session restarts it; the member expires a full session after the commit."""
    ctx = GroupContext()
    group = group_at_generation_1(ctx, None, stable=True)
    ctx.manager.reschedule_heartbeat(group, group.member("member"))
    assert ctx.advance(2500) == []
    assert commit(ctx, "member", 1) is Errors.NONE
    assert ctx.advance(2500) == []
    assert ctx.advance(2500) == ["heartbeat-foo-member"]
    assert not group.has_member("member")


def test_generic_group_transactional_offset_commit():
    """OffsetMetadataManagerTest.testGenericGroupTransactionalOffsetCommit."""
    ctx = GroupContext()
    group_at_generation_1(ctx, None, stable=True)
    assert txn_commit(ctx, "member", 1) is Errors.NONE


def test_generic_group_transactional_offset_commit_with_unknown_group_id():
    """OffsetMetadataManagerTest.testGenericGroupTransactionalOffsetCommitWithUnknownGroupId."""
    ctx = GroupContext()
    assert txn_commit(ctx, "member", 10) is Errors.ILLEGAL_GENERATION
    assert ctx.manager.group("foo") is None


def test_generic_group_transactional_offset_commit_with_unknown_member_id():
    """OffsetMetadataManagerTest.testGenericGroupTransactionalOffsetCommitWithUnknownMemberId."""
    ctx = GroupContext()
    ctx.create_group("foo")
    assert txn_commit(ctx, "member", 10) is Errors.UNKNOWN_MEMBER_ID


def test_generic_group_transactional_offset_commit_with_illegal_generation_id():
    """OffsetMetadataManagerTest.testGenericGroupTransactionalOffsetCommitWithIllegalGenerationId."""
    ctx = GroupContext()
    group_at_generation_1(ctx, None, stable=True)
    assert txn_commit(ctx, "member", 100) is Errors.ILLEGAL_GENERATION


test_not_modelled = not_modelled(
    "OffsetMetadataManagerTest",
    {
        "testGenericGroupOffsetCommitWithRetentionTime": "offset retention is not modelled",
        "testGenericGroupFetchOffsetsWithDeadGroup": "OffsetFetch of a Dead group: groups are "
        "dropped with their shard on unload, so a fetch meets NOT_COORDINATOR first",
        "testGenericGroupFetchAllOffsetsWithDeadGroup": "fetching all offsets is not modelled",
        "testGenericGroupOffsetDelete": "OffsetDelete is not modelled",
        "testGenericGroupOffsetDeleteWithErrors": "OffsetDelete is not modelled",
        "testGenericGroupOffsetDeleteWithPendingTransactionalOffsets": "OffsetDelete is not "
        "modelled",
    },
)
