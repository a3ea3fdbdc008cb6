"""The classic group coordinator in a cluster: every (from, to) state transition, member ids
across processes, a group across a coordinator failover, parked joins, the join timeout, and
offset commits validated against the group (with the what-if rule
``offset_commit_checks_generation``).

Requests go from client nodes to the group's coordinator over the model's network
(``tests/conformance/cluster.py``), so answers, held answers and writes to
``__consumer_offsets`` are the runtime's own."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conformance.cluster import Cluster

from eosim.simulation.coordinator.classic_group import (
    VALID_PREVIOUS_STATES,
    ClassicGroup,
    ClassicGroupState,
    IllegalStateError,
)
from eosim.simulation.coordinator.group_coordinator import offsets_partition
from eosim.simulation.coordinator.group_metadata_manager import (
    GroupMetadataManager,
    GroupMetadataRecord,
    heartbeat_key,
)
from eosim.simulation.protocol import (
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)

S = ClassicGroupState
ROOT = Path(__file__).resolve().parent.parent
GROUP = "app"
TP = ("t", 0)

# The legal (from, to) pairs, written out from ClassicGroupState.java:111-117 (design note E1).
LEGAL = {
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.STABLE, S.DEAD),
    (S.PREPARING_REBALANCE, S.DEAD),
    (S.COMPLETING_REBALANCE, S.DEAD),
    (S.EMPTY, S.DEAD),
    (S.DEAD, S.DEAD),
}
PAIRS = list(itertools.product(S, S))


def group_in(state: ClassicGroupState) -> ClassicGroup:
    group = ClassicGroup("g")
    path = {
        S.EMPTY: [],
        S.PREPARING_REBALANCE: [S.PREPARING_REBALANCE],
        S.COMPLETING_REBALANCE: [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE],
        S.STABLE: [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE],
        S.DEAD: [S.DEAD],
    }[state]
    for step in path:
        group.transition_to(step)
    return group


def test_the_table_has_25_pairs_and_11_are_legal():
    assert len(PAIRS) == 25
    table = {(f, t) for t, froms in VALID_PREVIOUS_STATES.items() for f in froms}
    assert table == LEGAL


@pytest.mark.parametrize(
    ("source", "target"), [p for p in PAIRS if p in LEGAL], ids=lambda s: s.value
)
def test_classic_group_transitions_legal(source, target):
    """Among them Dead -> Dead (Kafka's own test of it, testDeadToDeadIllegalTransition,
    asserts that it succeeds)."""
    group = group_in(source)
    group.transition_to(target)
    assert (group.state, group.previous_state) == (target, source)


@pytest.mark.parametrize(
    ("source", "target"), [p for p in PAIRS if p not in LEGAL], ids=lambda s: s.value
)
def test_classic_group_transitions_illegal(source, target):
    """Among them Empty -> CompletingRebalance and PreparingRebalance -> Stable; the group is
    left as it was."""
    group = group_in(source)
    before = (group.state, group.previous_state)
    with pytest.raises(IllegalStateError):
        group.transition_to(target)
    assert (group.state, group.previous_state) == before


# -- a cluster with several clients ---------------------------------------------------------
class Clients:
    """Client nodes, each with its own connection (a parked JoinGroup mutes only its sender's
    connection, as Kafka's consumer keeps a separate coordinator connection)."""

    def __init__(self, cl: Cluster) -> None:
        self.cl = cl
        self.inboxes: dict[str, list[Any]] = {}
        self._cid = 1000

    def send(self, client: str, request_of: Any, group: str = GROUP) -> int:
        if client not in self.inboxes:
            inbox: list[Any] = []
            self.inboxes[client] = inbox
            self.cl.net.register(
                client, lambda m, inbox=inbox: inbox.append(m.payload), client=True
            )
        self._cid += 1
        self.cl.net.send(client, self.cl.coordinator_of(group, "group"), request_of(self._cid))
        return self._cid

    def answer(self, client: str, cid: int) -> Any:
        found = [a for a in self.inboxes[client] if getattr(a, "correlation_id", None) == cid]
        return found[-1] if found else None

    def call(self, client: str, request_of: Any, wait_ms: float = 50.0, group: str = GROUP) -> Any:
        cid = self.send(client, request_of, group)
        self.cl.run(wait_ms)
        return self.answer(client, cid)


def join(member_id: str = "", rebalance_ms: int = 5000, session_ms: int = 10_000, instance=None):
    return lambda cid: JoinGroupRequest(
        cid,
        GROUP,
        member_id,
        instance,
        session_ms,
        rebalance_ms,
        (("range", b"m"),),
        "consumer",
        "c",
    )


def shard(cl: Cluster) -> GroupMetadataManager:
    runtime = cl.brokers[cl.coordinator_of(GROUP, "group")].coordinator
    assert runtime is not None
    return runtime.groups.shards[offsets_partition(GROUP)[1]]


def stable_member(cl: Cluster, clients: Clients, client: str = "a", **kw: Any) -> tuple[str, int]:
    """One member joins (MEMBER_ID_REQUIRED, then its id), the initial delay completes the join,
    it syncs: (member id, generation)."""
    first = clients.call(client, join(**kw))
    assert first.error is Errors.MEMBER_ID_REQUIRED
    joined = clients.call(client, join(first.member_id, **kw), wait_ms=3100)
    assert joined.error is Errors.NONE and joined.leader == first.member_id
    sync = clients.call(
        client,
        lambda cid: SyncGroupRequest(
            cid,
            GROUP,
            joined.member_id,
            None,
            joined.generation,
            "range",
            "consumer",
            ((joined.member_id, b"p0"),),
        ),
    )
    assert sync.error is Errors.NONE and sync.assignment == b"p0"
    return joined.member_id, joined.generation


def test_join_parks_answer_until_complete():
    """The second JoinGroup is held while the group waits out group.initial.rebalance.delay.ms
    (3 s), then answered with generation 1 (GroupMetadataManager.prepareRebalance,
    tryCompleteInitialRebalanceElseSchedule)."""
    cl = Cluster(brokers=1, partitions=(TP,))
    clients = Clients(cl)
    first = clients.call("a", join())
    assert first.error is Errors.MEMBER_ID_REQUIRED and first.member_id.startswith("c-")
    cid = clients.send("a", join(first.member_id))
    cl.run(2900)
    assert clients.answer("a", cid) is None
    assert shard(cl).group(GROUP).is_in_state(S.PREPARING_REBALANCE)
    cl.run(200)
    answer = clients.answer("a", cid)
    assert (answer.error, answer.generation, answer.leader) == (Errors.NONE, 1, first.member_id)
    assert [m.member_id for m in answer.members] == [first.member_id]
    assert shard(cl).group(GROUP).is_in_state(S.COMPLETING_REBALANCE)


def test_join_timeout_is_max_rebalance_timeout():
    """A rebalance waits for absent members up to the group's rebalance timeout, the largest
    member's (ClassicGroup.rebalanceTimeoutMs), not the joining member's: B (8 s) keeps its
    session with heartbeats but never rejoins; A's join is answered 8 s after the rebalance
    began, with B removed and generation 2."""
    cl = Cluster(brokers=1, partitions=(TP,))
    clients = Clients(cl)
    a_first = clients.call("a", join(rebalance_ms=2000))
    b_first = clients.call("b", join(rebalance_ms=8000))
    a_cid = clients.send("a", join(a_first.member_id, rebalance_ms=2000))
    b_cid = clients.send("b", join(b_first.member_id, rebalance_ms=8000))
    cl.run(8100)
    a, b = clients.answer("a", a_cid), clients.answer("b", b_cid)
    assert a.error is b.error is Errors.NONE and a.generation == 1
    assignments = ((a.member_id, b"p0"), (b.member_id, b"p1"))
    leader = "a" if a.leader == a.member_id else "b"
    leader_id = a.leader
    sync = clients.call(
        leader,
        lambda cid: SyncGroupRequest(
            cid, GROUP, leader_id, None, 1, "range", "consumer", assignments
        ),
    )
    follower = "b" if leader == "a" else "a"
    follower_id = b.member_id if follower == "b" else a.member_id
    assert sync.error is Errors.NONE
    assert (
        clients.call(follower, lambda cid: SyncGroupRequest(cid, GROUP, follower_id, None, 1)).error
        is Errors.NONE
    )
    group = shard(cl).group(GROUP)
    assert group.is_in_state(S.STABLE) and group.rebalance_timeout_ms() == 8000
    # A (the leader or not) rejoins with new metadata: a rebalance starts.
    rejoin = clients.send(
        "a",
        lambda cid: JoinGroupRequest(
            cid, GROUP, a.member_id, None, 10_000, 2000, (("range", b"new"),), "consumer", "c"
        ),
    )
    start = cl.env.now
    heartbeats = []
    while cl.env.now - start < 7800:
        hb = clients.call(
            "b", lambda cid: HeartbeatRequest(cid, GROUP, b.member_id, None, 1), wait_ms=1000
        )
        heartbeats.append(hb.error)
    assert set(heartbeats) == {Errors.REBALANCE_IN_PROGRESS}
    assert clients.answer("a", rejoin) is None
    cl.run(8000 - (cl.env.now - start) + 100)
    answer = clients.answer("a", rejoin)
    assert (answer.error, answer.generation, answer.leader) == (Errors.NONE, 2, a.member_id)
    assert list(group.members) == [a.member_id]


def test_group_survives_coordinator_failover():
    """The new coordinator replays the group record: Stable at the same generation with the
    member and its assignment, and the member's session restarted (onLoaded): heartbeats keep
    it, silence expires it and the Empty generation 2 is written."""
    cl = Cluster(brokers=3, partitions=(TP,))
    clients = Clients(cl)
    member_id, generation = stable_member(cl, clients)
    owner = cl.coordinator_of(GROUP, "group")
    cl.brokers[owner].crash()
    cl.run(500)
    successor = cl.coordinator_of(GROUP, "group")
    assert successor != owner
    manager = shard(cl)
    group = manager.group(GROUP)
    assert group.is_in_state(S.STABLE) and group.generation == generation
    assert list(group.members) == [member_id] and group.leader == member_id
    assert group.member(member_id).assignment == b"p0"
    assert manager.timer.is_scheduled(heartbeat_key(GROUP, member_id))
    for _ in range(3):
        hb = clients.call("a", lambda cid: HeartbeatRequest(cid, GROUP, member_id, None, 1), 3000)
        assert hb.error is Errors.NONE
    cl.run(10_100)
    hb = clients.call("a", lambda cid: HeartbeatRequest(cid, GROUP, member_id, None, 1))
    assert hb.error is Errors.UNKNOWN_MEMBER_ID
    assert group.is_in_state(S.EMPTY) and group.generation == 2
    log = cl.brokers[successor].logs[offsets_partition(GROUP)]
    last = [b.payload for b in log.batches if isinstance(b.payload, GroupMetadataRecord)][-1]
    assert (last.generation, last.members) == (2, ())


def test_parked_join_gets_not_coordinator_when_the_partition_moves():
    """onUnloaded: a leadership move (not a crash) answers a parked join NOT_COORDINATOR."""
    cl = Cluster(brokers=3, partitions=(TP,))
    clients = Clients(cl)
    first = clients.call("a", join())
    cid = clients.send("a", join(first.member_id))
    cl.run(100)
    runtime = cl.brokers[cl.coordinator_of(GROUP, "group")].coordinator
    runtime.role_changed(offsets_partition(GROUP), None, False)  # becomes a follower
    cl.run(10)
    assert clients.answer("a", cid).error is Errors.NOT_COORDINATOR


MEMBER_IDS = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [sys.argv[1], sys.argv[2]]
    from conformance.cluster import Cluster
    from eosim.simulation.protocol import JoinGroupRequest
    from eosim.simulation.rng import RandomStreams
    cl = Cluster(brokers=1, partitions=(("t", 0),))
    streams = RandomStreams(7)
    for name, broker in cl.brokers.items():
        broker.coordinator.member_id_stream = (
            lambda n=name: streams.stream(f"group-coordinator:{n}")
        )
    ids = []
    for instance in (None, None, "static-1"):
        # a static member is added at once and its join parked for the initial delay
        answer = cl.call(
            cl.coordinator_of("app", "group"),
            lambda cid: JoinGroupRequest(
                cid, "app", "", instance, 10000, 5000, (("range", b""),), "consumer", "client"
            ),
            3100.0,
        )
        ids.append(answer.member_id)
    print(" ".join(ids))
    """
)


def test_member_ids_are_deterministic(tmp_path):
    """Member ids come from the seeded stream group-coordinator:<broker>, so processes with
    different hash seeds give the same ids; dynamic ids start with the client id, static ones
    with the instance id (ClassicGroup.generateMemberId)."""
    script = tmp_path / "ids.py"
    script.write_text(MEMBER_IDS)
    outputs = []
    for hash_seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, str(script), str(ROOT / "tests"), str(ROOT)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.append(out.stdout.split())
    assert outputs[0] == outputs[1]
    dynamic1, dynamic2, static = outputs[0]
    assert dynamic1.startswith("client-") and dynamic2.startswith("client-")
    assert dynamic1 != dynamic2 and static.startswith("static-1-")


# -- offset commits -----------------------------------------------------------------------------
def commit(clients: Clients, member_id: str = "", generation: int = -1) -> Errors:
    return clients.call(
        "a",
        lambda cid: OffsetCommitRequest(cid, GROUP, ((TP, 5),), member_id, generation),
    ).error


@pytest.mark.parametrize("checks", [True, False])
def test_offset_commit_checks_generation_rule(checks):
    """A commit from the group's generation is written; one from another generation is
    ILLEGAL_GENERATION and not written, unless the what-if rule is off. A commit naming no
    member (an assign() consumer) is refused while the group has members; an unknown group
    with a generation is GROUP_ID_NOT_FOUND (OffsetCommit v9)."""
    cl = Cluster(brokers=1, partitions=(TP,), offset_commit_checks_generation=checks)
    clients = Clients(cl)
    member_id, generation = stable_member(cl, clients)
    runtime = cl.brokers[cl.coordinator_of(GROUP, "group")].coordinator
    assert commit(clients, member_id, generation) is Errors.NONE
    assert runtime.groups.store.committed[GROUP][TP] == 5
    stale = commit(clients, member_id, generation - 1)
    assert stale is (Errors.ILLEGAL_GENERATION if checks else Errors.NONE)
    plain = commit(clients)
    assert plain is (Errors.UNKNOWN_MEMBER_ID if checks else Errors.NONE)
    unknown = clients.call(
        "a", lambda cid: OffsetCommitRequest(cid, "other", ((TP, 1),), "m", 3), group="other"
    ).error
    assert unknown is (Errors.GROUP_ID_NOT_FOUND if checks else Errors.NONE)


def test_commits_without_a_group_are_accepted_as_before():
    """What every application commits today (no member, generation -1) is accepted by the
    Empty group the commit creates, and nothing but the offsets is written."""
    cl = Cluster(brokers=1, partitions=(TP,))
    clients = Clients(cl)
    assert commit(clients) is Errors.NONE
    assert commit(clients) is Errors.NONE
    node = cl.coordinator_of(GROUP, "group")
    log = cl.brokers[node].logs[offsets_partition(GROUP)]
    assert not any(isinstance(b.payload, GroupMetadataRecord) for b in log.batches)
    assert shard(cl).group(GROUP).is_in_state(S.EMPTY)


@pytest.mark.parametrize("checks", [True, False])
def test_txn_offset_commit_is_validated_after_the_add_and_before_the_write(checks):
    """TxnOffsetCommit (transaction version 2, so the coordinator adds the offsets partition to
    the transaction first): a stale generation is ILLEGAL_GENERATION and nothing is pending;
    the current generation, and EOS v1's metadata (no member, generation -1), are accepted in a
    group with members (ClassicGroup.validateOffsetCommit). With the what-if rule off the stale
    commit is accepted too (Kafka before KIP-447)."""
    from eosim.simulation.protocol import TxnOffsetCommitRequest

    cl = Cluster(brokers=1, partitions=(TP,), offset_commit_checks_generation=checks)
    clients = Clients(cl)
    member_id, generation = stable_member(cl, clients)
    runtime = cl.brokers[cl.coordinator_of(GROUP, "group")].coordinator
    r = cl.init("tx")

    def txn_commit(offset: int, member: str, gen: int) -> Errors:
        return clients.call(
            "a",
            lambda cid: TxnOffsetCommitRequest(
                cid, "tx", GROUP, r.producer_id, r.epoch, ((TP, offset),), member, gen
            ),
            wait_ms=100,
        ).error

    stale = txn_commit(7, member_id, generation + 1)
    assert stale is (Errors.ILLEGAL_GENERATION if checks else Errors.NONE)
    pending = runtime.groups.store.pending.get((GROUP, r.producer_id), {})
    assert pending.get(TP) == (None if checks else 7)
    assert txn_commit(8, member_id, generation) is Errors.NONE
    assert txn_commit(9, "", -1) is Errors.NONE
    assert runtime.groups.store.pending[(GROUP, r.producer_id)][TP] == 9
