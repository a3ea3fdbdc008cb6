"""The classic protocol's client-side assignors (simulation/consumer/assignors.py), checked
against the cases of Kafka's RangeAssignorTest and RoundRobinAssignorTest (without racks) and
ConsumerCoordinator's choice of rebalance protocol."""

from __future__ import annotations

import pytest

from eosim.simulation.consumer.assignors import (
    DEFAULT_ASSIGNORS,
    RebalanceProtocol,
    Subscription,
    cooperative_sticky_assignor,
    member_order,
    range_assignor,
    rebalance_protocol,
    round_robin_assignor,
)


def subs(**topics: tuple[str, ...]) -> dict[str, Subscription]:
    return {member: Subscription(t) for member, t in topics.items()}


@pytest.mark.parametrize("assign", [range_assignor, round_robin_assignor])
def test_a_member_of_no_existing_topic_gets_nothing_but_has_an_entry(assign):
    assert assign({}, subs(c=("t",))) == {"c": []}
    assert assign({"t": 3}, subs(c=())) == {"c": []}


@pytest.mark.parametrize("assign", [range_assignor, round_robin_assignor])
def test_one_member_gets_every_partition(assign):
    assert assign({"t": 3}, subs(c=("t",))) == {"c": [("t", 0), ("t", 1), ("t", 2)]}


def test_range_gives_the_first_members_one_more_per_topic():
    two_topics = subs(c1=("t1", "t2"), c2=("t1", "t2"))
    assert range_assignor({"t1": 3, "t2": 3}, two_topics) == {
        "c1": [("t1", 0), ("t1", 1), ("t2", 0), ("t2", 1)],
        "c2": [("t1", 2), ("t2", 2)],
    }
    # More members than partitions: the last ones get nothing.
    assert range_assignor({"t": 2}, subs(c1=("t",), c2=("t",), c3=("t",))) == {
        "c1": [("t", 0)],
        "c2": [("t", 1)],
        "c3": [],
    }


@pytest.mark.parametrize("assign", [range_assignor, round_robin_assignor])
def test_each_topic_goes_to_its_own_subscribers_only(assign):
    """Range splits each topic among its subscribers; round robin skips, for each partition,
    the members not subscribed to its topic. Here both come to the same assignment."""
    mixed = subs(c1=("t1",), c2=("t1", "t2"), c3=("t1",))
    assert assign({"t1": 3, "t2": 2}, mixed) == {
        "c1": [("t1", 0)],
        "c2": [("t1", 1), ("t2", 0), ("t2", 1)],
        "c3": [("t1", 2)],
    }


def test_round_robin_deals_partitions_across_topics():
    two_topics = subs(c1=("t1", "t2"), c2=("t1", "t2"))
    assert round_robin_assignor({"t1": 3, "t2": 3}, two_topics) == {
        "c1": [("t1", 0), ("t1", 2), ("t2", 1)],
        "c2": [("t1", 1), ("t2", 0), ("t2", 2)],
    }


def test_static_members_come_first_in_instance_id_order_whatever_their_member_ids():
    members = {
        "a-dynamic": Subscription(("t",)),
        "z-member": Subscription(("t",), group_instance_id="instance-1"),
        "b-member": Subscription(("t",), group_instance_id="instance-2"),
    }
    assert member_order(members) == ["z-member", "b-member", "a-dynamic"]
    assert range_assignor({"t": 3}, members) == {
        "a-dynamic": [("t", 2)],
        "b-member": [("t", 1)],
        "z-member": [("t", 0)],
    }


def test_the_assignment_does_not_depend_on_the_order_members_are_given_in():
    forward = subs(c1=("t1", "t2"), c2=("t1",), c3=("t2",))
    backward = dict(reversed(list(forward.items())))
    for assign in (range_assignor, round_robin_assignor):
        assert assign({"t1": 5, "t2": 4}, forward) == assign({"t2": 4, "t1": 5}, backward)


def test_the_rebalance_protocol_is_the_most_advanced_every_assignor_supports():
    # Kafka's default list [range, cooperative-sticky] gives EAGER.
    assert rebalance_protocol(DEFAULT_ASSIGNORS) is RebalanceProtocol.EAGER
    assert rebalance_protocol(["cooperative-sticky"]) is RebalanceProtocol.COOPERATIVE
    assert rebalance_protocol(["roundrobin"]) is RebalanceProtocol.EAGER


@pytest.mark.parametrize(
    ("assignors", "message"),
    [([], "names no assignor"), (["range", "uniform"], "unknown assignor 'uniform'")],
)
def test_a_bad_assignor_list_is_refused_with_its_reason(assignors, message):
    with pytest.raises(ValueError, match=message):
        rebalance_protocol(assignors)


# -- cooperative-sticky (CooperativeStickyAssignor, the constrained builder) --------------


def owning(generation: int = 1, **owned: list[tuple[str, int]]) -> dict[str, Subscription]:
    return {m: Subscription(("t",), None, tuple(p), generation) for m, p in owned.items()}


def test_cooperative_sticky_from_nothing_is_round_robin_in_member_order():
    assert cooperative_sticky_assignor({"t": 5}, owning(c1=[], c2=[])) == {
        "c1": [("t", 0), ("t", 2), ("t", 4)],
        "c2": [("t", 1), ("t", 3)],
    }


def test_a_new_member_gets_moved_partitions_only_in_the_second_round():
    """Round 1: the owner keeps its quota; what would move is left out, so the newcomer gets
    nothing. Round 2 (the owner revoked and rejoined): the newcomer gets the rest."""
    all_six = [("t", p) for p in range(6)]
    first = cooperative_sticky_assignor({"t": 6}, owning(c1=all_six, c2=[]))
    assert first == {"c1": [("t", 0), ("t", 1), ("t", 2)], "c2": []}
    second = cooperative_sticky_assignor({"t": 6}, owning(2, c1=first["c1"], c2=[]))
    assert second == {"c1": [("t", 0), ("t", 1), ("t", 2)], "c2": [("t", 3), ("t", 4), ("t", 5)]}


def test_a_partition_nobody_owns_goes_at_once():
    """A member that left owned it: nobody revokes it, so it is given in the same round."""
    assert cooperative_sticky_assignor({"t": 4}, owning(c1=[("t", 0), ("t", 1)], c2=[])) == {
        "c1": [("t", 0), ("t", 1)],
        "c2": [("t", 2), ("t", 3)],
    }


def test_a_partition_claimed_twice_in_one_generation_is_nobodys_this_round():
    """CooperativeStickyAssignorTest's two cases of a partition claimed by two members in the
    same generation: neither keeps it, and nobody gets it until both have revoked it."""
    claims = {
        "c1": Subscription(("t",), None, (("t", 0), ("t", 1)), 1),
        "c2": Subscription(("t",), None, (("t", 0), ("t", 2)), 1),
        "c3": Subscription(("t",), None, (), 1),
    }
    assert cooperative_sticky_assignor({"t": 3}, claims) == {
        "c1": [("t", 1)],
        "c2": [("t", 2)],
        "c3": [],
    }
    assert cooperative_sticky_assignor({"t": 4}, claims) == {
        "c1": [("t", 1), ("t", 3)],
        "c2": [("t", 2)],
        "c3": [],
    }


def test_the_higher_generation_keeps_a_partition_claimed_twice():
    """A member that missed a rebalance still claims what it owned in generation 1; the
    owner of generation 2 keeps it."""
    claims = {
        "c1": Subscription(("t",), None, (("t", 0), ("t", 1)), 1),
        "c2": Subscription(("t",), None, (("t", 0),), 2),
    }
    assert cooperative_sticky_assignor({"t": 2}, claims) == {"c1": [("t", 1)], "c2": [("t", 0)]}


def test_cooperative_sticky_balances_to_the_quota_and_moves_the_fewest():
    """Three owners of 3, 2 and 1 of six partitions become 2, 2, 2: one partition moves, in
    the second round."""
    owned = owning(c1=[("t", 0), ("t", 1), ("t", 2)], c2=[("t", 3), ("t", 4)], c3=[("t", 5)])
    first = cooperative_sticky_assignor({"t": 6}, owned)
    assert first == {"c1": [("t", 0), ("t", 1)], "c2": [("t", 3), ("t", 4)], "c3": [("t", 5)]}
    second = cooperative_sticky_assignor({"t": 6}, owning(2, **first))
    assert second["c3"] == [("t", 5), ("t", 2)]


def test_cooperative_sticky_refuses_different_subscriptions():
    mixed = {"c1": Subscription(("t",)), "c2": Subscription(("t", "u"))}
    with pytest.raises(ValueError, match="different subscriptions"):
        cooperative_sticky_assignor({"t": 2, "u": 1}, mixed)


def test_cooperative_sticky_alone_selects_the_cooperative_protocol():
    assert rebalance_protocol(["cooperative-sticky"]) is RebalanceProtocol.COOPERATIVE
    assert rebalance_protocol(["cooperative-sticky", "range"]) is RebalanceProtocol.EAGER
