"""The rules of the 4.4 preset (Kafka 4.4.0): each change since 4.1 that the model covers, at
its 4.1 value and at its 4.4 value.

Each case builds the smallest set-up that shows the difference: a standalone broker for the
markers (KIP-1228), a group shard driven by a manual timer for the consumer group coordinator
(KIP-1263, KAFKA-20268, KIP-1251, KIP-1319), a membership manager with a stub consumer for the
AsyncKafkaConsumer's reconciliation (KAFKA-20106, KAFKA-20332), and the producer's
transaction state for TxnOffsetCommit v6 (KIP-1319).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import simpy

from eosim.simulation.broker.broker import Broker, BrokerSettings
from eosim.simulation.broker.producer_id_manager import ProducerIdBlockAllocator
from eosim.simulation.broker.producer_state import ProducerStateManager, Verdict
from eosim.simulation.cluster import ClusterSettings
from eosim.simulation.config import BROKER_KEYS, ConfigException, parse_producer_config
from eosim.simulation.consumer.consumer_coordinator import GroupRebalanceConfig
from eosim.simulation.consumer.consumer_membership_manager import ConsumerMembershipManager
from eosim.simulation.coordinator.classic_group import GroupError
from eosim.simulation.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from eosim.simulation.coordinator.group_metadata_manager import GroupMetadataManager
from eosim.simulation.metadata import ClusterMetadata
from eosim.simulation.network import LatencyModel, Network, NetworkSettings
from eosim.simulation.producer.kafka_producer import KafkaProducer
from eosim.simulation.producer.transaction_manager import TransactionManager
from eosim.simulation.producer.transaction_states import State
from eosim.simulation.producer.transactions import Transactions
from eosim.simulation.protocol import (
    BatchData,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupMetadata,
    ErrorResponse,
    Errors,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import VERSIONS, ProtocolRules, preset_for
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import ScenarioError, load_scenario, parse_scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"

V41, V44 = VERSIONS["4.1"], VERSIONS["4.4"]
NEW_RULES = {
    "tv2_marker_requires_newer_epoch": True,
    "consumer_assignment_interval_ms_default": 1_000,
    "consumer_group_starts_at_epoch_1": True,
    "consumer_commit_assignment_epochs": True,
    "consumer_reconciles_in_poll": True,
    "txn_offset_commit_v6": True,
}


# -- the preset -------------------------------------------------------------------------------
def test_the_44_preset_is_41_with_the_new_rules():
    assert preset_for("4.4.0") == "4.4" and preset_for("4.3.1") is None
    assert dataclasses.replace(V41, **NEW_RULES) == V44
    # Every new rule's default is Kafka 4.1's (and 4.0's and 3.9's): existing runs keep their
    # histories.
    for name in NEW_RULES:
        values = {getattr(VERSIONS[v], name) for v in ("3.9", "4.0", "4.1")}
        assert values == {getattr(ProtocolRules(), name)}, name
        assert getattr(V44, name) != getattr(V41, name), name


SCENARIO = """
name: t
kafka: {version: "%s"}
cluster:
  brokers: 1
  topics: [{name: events, partitions: 1}]
  config: {%s}
producers:
  - name: p
    workload: {topic: events, records: 1}
"""


def _interval(version: str, config: str = "") -> int:
    settings = ClusterSettings.from_scenario(parse_scenario(SCENARIO % (version, config), "t"))
    return settings.coordinator.groups.consumer_assignment_interval_ms


def test_the_assignment_interval_is_a_broker_config_whose_default_is_the_versions():
    """group.consumer.assignment.interval.ms: KIP-1263's 1000 on the 4.4 preset, 0 (what Kafka
    up to 4.2 does, having no such config) before; a scenario may set it on either."""
    assert BROKER_KEYS["group.consumer.assignment.interval.ms"].default == 0
    assert _interval("4.1") == 0 and _interval("4.0") == 0
    assert _interval("4.4") == 1_000
    assert _interval("4.4", "group.consumer.assignment.interval.ms: 0") == 0
    assert _interval("4.1", "group.consumer.assignment.interval.ms: 250") == 250
    with pytest.raises(ScenarioError, match="15000"):
        parse_scenario(SCENARIO % ("4.4", "group.consumer.assignment.interval.ms: 20000"), "t")
    with pytest.raises(ConfigException):
        BROKER_KEYS["group.consumer.assignment.interval.ms"].parse("k", -1)


def test_a_kip848_run_takes_the_presets_group_rules():
    """End to end (the rules reach the coordinator and the client through the scenario). The
    first member gets every partition at epoch 1 on 4.1, 2 on 4.4 (KAFKA-20268), as soon on
    both (KAFKA-20106: its poll starts the reconciliation at once). The second joins
    milliseconds later with nothing: at the new assignment epoch on 4.1 (its half waits for
    the first member's revocation), at the old one on 4.4, the new target waiting for the
    assignment interval (KIP-1263)."""
    for version, a_epoch, b_epoch in (("4.1", 1, 2), ("4.4", 2, 2)):
        scenario = load_scenario(
            SCENARIOS / "kip848-within-poll-interval.yaml", [f"kafka.version={version}"]
        )
        lines = [json.loads(line) for line in run_scenario(scenario, 1).history.lines()]
        assigned = [
            (g["process"], g["epoch"], len(g["partitions"]), g["time"])
            for g in lines
            if g["kind"] == "group" and g["event"] == "assigned"
        ]
        (a, a_got, a_parts, a_time), (b, b_got, b_parts, b_time) = assigned[:2]
        assert (a, a_got, a_parts) == ("app-a/0", a_epoch, 4), version
        assert (b, b_got, b_parts) == ("app-b/0", b_epoch, 0), version
        assert a_time < 10 and b_time < 10, version


# -- KIP-1228: a transaction-version-2 marker must raise the producer's epoch -------------------
TP = ("t", 0)
PID = 7


def _broker(rules: ProtocolRules) -> tuple[simpy.Environment, Network, Broker, list[Any]]:
    env = simpy.Environment()
    net = Network(
        env, NetworkSettings(LatencyModel("constant", value_ms=1.0)), RandomStreams(1).stream("n")
    )
    inbox: list[Any] = []
    net.register("c", lambda m: inbox.append(m.payload), client=True)
    broker = Broker(env, "broker-0", net, [TP], rules, ProducerIdBlockAllocator(), BrokerSettings())
    return env, net, broker, inbox


def _late_marker(rules: ProtocolRules) -> tuple[list[Errors], Broker]:
    """Transaction 1 at epoch 0 ends with its marker at epoch 1 (transaction version 2 bumps
    the epoch at every end); the producer's next transaction writes at epoch 1; then a copy
    of transaction 1's COMMIT arrives late (a WriteTxnMarkers the coordinator sent again
    after a timeout, both reaching the leader)."""
    env, net, broker, inbox = _broker(rules)

    def produce(cid: int, epoch: int, value: str) -> None:
        data = BatchData(PID, epoch, 0, (value,), True)
        net.send("c", "broker-0", ProduceRequest(cid, -1, [(TP, data)]))
        env.run(until=env.now + 10)

    def marker(cid: int) -> None:
        net.send("c", "broker-0", WriteTxnMarkersRequest(cid, PID, 1, True, 0, (TP,)))
        env.run(until=env.now + 10)

    produce(1, 0, "txn-1")
    marker(2)
    marker(3)  # a retry with no transaction open: written again under both rules
    produce(4, 1, "txn-2")
    marker(5)  # the late copy, while transaction 2 is open
    assert [r.results[0].error for r in inbox if isinstance(r, ProduceResponse)] == [
        Errors.NONE,
        Errors.NONE,
    ]
    answers = [e for r in inbox if isinstance(r, WriteTxnMarkersResponse) for _, e in r.results]
    return answers, broker


def test_a_late_tv2_marker_at_the_same_epoch_ends_the_next_transaction_before_4_2():
    answers, broker = _late_marker(V41)
    assert answers == [Errors.NONE, Errors.NONE, Errors.NONE]
    log = broker.logs[TP]
    # Transaction 2 was committed by transaction 1's marker: nobody will end it any more.
    assert len(log.markers()) == 3 and log.last_stable_offset() == log.log_end_offset


def test_a_late_tv2_marker_at_the_same_epoch_is_refused_from_4_2():
    answers, broker = _late_marker(V44)
    assert answers == [Errors.NONE, Errors.NONE, Errors.INVALID_PRODUCER_EPOCH]
    log = broker.logs[TP]
    assert len(log.markers()) == 2 and log.last_stable_offset() < log.log_end_offset


def test_the_marker_rule_needs_transaction_version_2():
    """Under transaction version 1 a marker carries the transaction's own epoch: the leader
    keeps the older check whatever the rule says."""
    rules = V44.with_overrides({"transaction_version": 1})
    env, net, _broker_0, inbox = _broker(rules)
    net.send("c", "broker-0", ProduceRequest(1, -1, [(TP, BatchData(PID, 0, 0, ("a",), True))]))
    env.run(until=10)
    net.send("c", "broker-0", WriteTxnMarkersRequest(2, PID, 0, True, 0, (TP,)))
    env.run(until=20)
    assert [e for r in inbox if isinstance(r, WriteTxnMarkersResponse) for _, e in r.results] == [
        Errors.NONE
    ]


def test_the_producer_state_check_of_a_marker():
    state = ProducerStateManager()
    state.update(PID, 3, 0, 0, 0, 0)
    # A newer epoch is taken either way; an older one never.
    assert state.check_marker(PID, 4, 0, strict=True, transaction_open=True) is Verdict.APPEND
    assert state.check_marker(PID, 2, 0) is Verdict.INVALID_PRODUCER_EPOCH
    # The same epoch: 4.1's check takes it; KIP-1228's only as a retry (nothing open).
    assert state.check_marker(PID, 3, 0, transaction_open=True) is Verdict.APPEND
    assert (
        state.check_marker(PID, 3, 0, strict=True, transaction_open=True)
        is Verdict.INVALID_PRODUCER_EPOCH
    )
    assert state.check_marker(PID, 3, 0, strict=True, transaction_open=False) is Verdict.APPEND


# -- the consumer group coordinator -----------------------------------------------------------
# The group coordinator's helpers of tests/test_consumer_group.py (a group "app" on topic
# "in" of four partitions).
from test_consumer_group import G, T, beat, manager, tp  # noqa: E402

ALL = (tp(0), tp(1), tp(2), tp(3))


def test_kip_1263_a_join_within_the_interval_waits_for_a_later_heartbeat():
    """With the interval at 0 (4.1) a second member's join computes the new target at once;
    at 1000 (4.4) the group epoch moves but the new member joins at the old assignment epoch
    with nothing, and the first heartbeat of any member after the interval computes it."""
    gmm, timer = manager()
    assert beat(gmm, "a", 0).assignment == ALL
    timer.advance(100)
    joined = beat(gmm, "b", 0)
    group = gmm.consumer_groups[G]
    assert (group.group_epoch, group.assignment_epoch, joined.member_epoch) == (2, 2, 2)
    assert set(group.target["b"])

    gmm, timer = manager(consumer_assignment_interval_ms=1_000)
    assert beat(gmm, "a", 0).assignment == ALL
    timer.advance(100)
    joined = beat(gmm, "b", 0)
    group = gmm.consumer_groups[G]
    assert (group.group_epoch, group.assignment_epoch) == (2, 1)
    assert (joined.member_epoch, joined.assignment) == (1, ())
    assert "b" not in group.target
    timer.advance(800)  # 900 ms after the first assignment: a keeps everything
    kept = beat(gmm, "a", 1, ALL)
    assert group.assignment_epoch == 1 and kept.assignment is None
    assert group.members["a"].state is MemberState.STABLE
    timer.advance(100)  # the interval has passed: this heartbeat computes the target
    revoking = beat(gmm, "a", 1, ALL)
    assert group.assignment_epoch == 2 and set(group.target["b"])
    assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert revoking.assignment is not None and len(revoking.assignment) == 2


def test_kip_1263_the_interval_runs_from_the_last_assignment_across_a_reload():
    """The time of the last assignment is in the group's record (Kafka's AssignmentTimestamp),
    so a coordinator that loads the group does not cut the interval short."""
    gmm, timer = manager(consumer_assignment_interval_ms=1_000)
    timer.advance(5_000)
    beat(gmm, "a", 0)
    group = gmm.consumer_groups[G]
    assert group.assignment_time_ms == 5_000
    loaded = ConsumerGroup.replay(group.record())
    assert loaded.assignment_time_ms == 5_000 and loaded.copy().assignment_time_ms == 5_000


def test_kafka_20268_a_new_group_starts_at_epoch_1():
    gmm, _ = manager()
    first = beat(gmm, "a", 0)
    assert first.member_epoch == 1 and gmm.consumer_groups[G].group_epoch == 1
    gmm, _ = manager(starts_at_epoch_1=True)
    first = beat(gmm, "a", 0)
    assert (first.member_epoch, first.assignment) == (2, ALL)
    group = gmm.consumer_groups[G]
    assert (group.group_epoch, group.assignment_epoch) == (2, 2)
    assert beat(gmm, "b", 0).member_epoch == 3


def _revoked_half(**config: Any) -> GroupMetadataManager:
    """a holds every partition from epoch 1; b joins (epoch 2), a gives up half and moves to
    epoch 2, keeping two partitions it got at epoch 1; b takes the other two at epoch 2."""
    gmm, _ = manager(**config)
    beat(gmm, "a", 0)
    beat(gmm, "b", 0)
    revoking = beat(gmm, "a", 1, ALL)
    assert revoking.assignment is not None
    done = beat(gmm, "a", 1, revoking.assignment)
    assert done.member_epoch == 2
    beat(gmm, "b", 2, ())
    return gmm


def _commit(
    gmm: GroupMetadataManager, epoch: int, partitions: list[tuple[str, int]], txn: bool = False
) -> Errors:
    return gmm.validate_offset_commit(G, "a", None, epoch, txn, True, partitions)


def test_kip_1251_the_reconciliation_keeps_each_partitions_assignment_epoch():
    gmm = _revoked_half()
    a, b = gmm.consumer_groups[G].members["a"], gmm.consumer_groups[G].members["b"]
    assert a.member_epoch == 2 and dict(a.assignment_epochs) == dict.fromkeys(a.assigned, 1)
    assert b.member_epoch == 2 and dict(b.assignment_epochs) == dict.fromkeys(b.assigned, 2)


def test_kip_1251_a_commit_at_an_older_epoch_of_partitions_still_held():
    """4.1 refuses any epoch but the member's (STALE_MEMBER_EPOCH); 4.3+ takes an older epoch
    for partitions the member still holds since that epoch, never for one it gave up."""
    kept = sorted(_revoked_half().consumer_groups[G].members["a"].assigned)
    gone = sorted(set(ALL) - set(kept))
    for config, expected in (
        ({}, Errors.STALE_MEMBER_EPOCH),
        ({"commit_assignment_epochs": True}, Errors.NONE),
    ):
        gmm = _revoked_half(**config)
        assert _commit(gmm, 2, list(ALL)) is Errors.NONE
        assert _commit(gmm, 1, kept) is expected
        assert _commit(gmm, 1, gone[:1]) is Errors.STALE_MEMBER_EPOCH
        assert _commit(gmm, 3, kept) is Errors.STALE_MEMBER_EPOCH


def test_kip_1251_the_assignment_epoch_bounds_an_older_commit():
    """Member at epoch 5: p0 assigned at 3, p1 at 5, p2 pending revocation since 4."""
    member = ConsumerGroupMember(
        "m",
        member_epoch=5,
        state=MemberState.UNREVOKED_PARTITIONS,
        assigned=frozenset({tp(0), tp(1)}),
        pending_revocation=frozenset({tp(2)}),
        assignment_epochs=((tp(0), 3), (tp(1), 5), (tp(2), 4)),
    )
    group = ConsumerGroup(G, 5, 5, members={"m": member})

    def error(epoch: int, *partitions: tuple[str, int]) -> Errors:
        try:
            group.validate_offset_commit("m", None, epoch, False, partitions, True)
        except GroupError as e:
            return e.error
        return Errors.NONE

    assert error(4, tp(0), tp(2)) is Errors.NONE
    assert error(3, tp(0)) is Errors.NONE
    assert error(3, tp(2)) is Errors.STALE_MEMBER_EPOCH  # pending since 4
    assert error(4, tp(1)) is Errors.STALE_MEMBER_EPOCH  # assigned at 5
    assert error(4, tp(3)) is Errors.STALE_MEMBER_EPOCH  # not the member's
    assert error(6, tp(0)) is Errors.STALE_MEMBER_EPOCH  # newer than the member


def test_kip_1319_txn_offset_commit_errors_from_version_6():
    """A TxnOffsetCommit's STALE_MEMBER_EPOCH and GROUP_ID_NOT_FOUND were ILLEGAL_GENERATION
    up to version 5; version 6 (4.4, under transaction version 2) answers them as they are."""
    for config, stale, missing in (
        ({}, Errors.ILLEGAL_GENERATION, Errors.ILLEGAL_GENERATION),
        ({"txn_offset_commit_v6": True}, Errors.STALE_MEMBER_EPOCH, Errors.GROUP_ID_NOT_FOUND),
    ):
        gmm = _revoked_half(**config)
        assert _commit(gmm, 1, list(ALL), txn=True) is stale
        assert gmm.validate_offset_commit("other", "m", None, 3, True, True, [tp(0)]) is missing
        # OffsetCommit answers both as they are in every version.
        assert _commit(gmm, 1, list(ALL)) is Errors.STALE_MEMBER_EPOCH
        assert (
            gmm.validate_offset_commit("other", "m", None, 3, False, True, [tp(0)])
            is Errors.GROUP_ID_NOT_FOUND
        )


# -- the producer: TxnOffsetCommit v6 ---------------------------------------------------------
def _transactions(v6: bool) -> tuple[Transactions, Any]:
    env = simpy.Environment()
    tm = TransactionManager()
    txn = Transactions(env, "txn", 60_000, 100, tm, 2, v6)
    tm.txn = txn
    for kind, key in (("transaction", "txn"), ("group", "g")):
        txn.coordinators[kind, key] = "broker-0"

    def answer(response: Any) -> Any:
        request = txn.next_request(env.now, False)
        assert request is not None
        txn.sent(request)
        built = request.build(1)
        txn.on_response(request, response)
        return built

    txn.init_transactions()
    answer(InitProducerIdResponse(1, Errors.NONE, 5, 0))
    assert txn.begin() is None
    return txn, answer


@pytest.mark.parametrize("error", [Errors.GROUP_ID_NOT_FOUND, Errors.STALE_MEMBER_EPOCH])
def test_kip_1319_the_producer_aborts_on_the_new_errors(error):
    """Up to 4.3 the client does not expect these from TxnOffsetCommit (the coordinator sent
    ILLEGAL_GENERATION): they are fatal. From 4.4 they are CommitFailedException, abortable."""
    meta = ConsumerGroupMetadata("g", 3, "m", None)
    for v6, state in ((False, State.FATAL_ERROR), (True, State.ABORTABLE_ERROR)):
        txn, answer = _transactions(v6)
        result = txn.send_offsets_to_transaction(((tp(0), 10),), meta)
        assert isinstance(answer(ErrorResponse(1, error)), TxnOffsetCommitRequest)
        assert txn.state.state is state
        assert result.triggered and (result.value or "").startswith(
            "CommitFailedException" if v6 else error.exception_name
        )


def _producer(rules: ProtocolRules) -> tuple[simpy.Environment, KafkaProducer, list[float]]:
    """A transactional producer with no broker behind it, whose Transactions record when
    sendOffsetsToTransaction reaches them."""
    env = simpy.Environment()
    network = Network(env, NetworkSettings(), RandomStreams(1).stream("n"))
    config = parse_producer_config({"transactional.id": "x", "max.block.ms": 5_000}, rules)
    producer = KafkaProducer(
        env,
        "p",
        network,
        ClusterMetadata(("b0",), {"out": 1, T: 4}),
        config,
        RandomStreams(1).stream("p"),
        rules,
    )
    reached: list[float] = []
    txn = producer.transactions
    assert txn is not None

    def send_offsets(_offsets: Any, _group: Any) -> simpy.Event:
        reached.append(env.now)
        done = env.event()
        done.succeed(None)
        return done

    txn.send_offsets_to_transaction = send_offsets  # type: ignore[method-assign]
    return env, producer, reached


def test_kip_1319_send_offsets_waits_for_the_consumed_topics_metadata():
    """4.1 sends the offsets at once; 4.4 first waits for a metadata answer naming the
    consumed topic, once per topic, and gives up after max.block.ms."""
    env, producer, reached = _producer(V41)
    producer.send_offsets_to_transaction(((tp(0), 1),), "g")
    assert reached == [0.0]

    env, producer, reached = _producer(V44)
    metadata = producer.sender.metadata
    done = producer.send_offsets_to_transaction(((tp(0), 1),), "g")
    env.run(until=50)
    assert reached == [] and metadata.update_requested and metadata.time_to_update(50) == 0
    metadata.update({}, env.now)  # the answer to the metadata request
    env.run(until=60)
    assert reached == [50.0] and done.triggered and done.value is None
    producer.send_offsets_to_transaction(((tp(1), 1),), "g")  # a topic it knows now
    assert reached == [50.0, 60.0]

    env, producer, reached = _producer(V44)
    done = producer.send_offsets_to_transaction(((tp(0), 1),), "g")
    env.run(until=6_000)
    assert reached == [] and done.value == (
        f"TimeoutException: Topic {T} not present in metadata after 5000 ms."
    )


# -- the AsyncKafkaConsumer's reconciliation (KAFKA-20106, KAFKA-20332) ---------------------------
class _Client:
    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.sent: list[tuple[Any, simpy.Event]] = []
        self._cid = 0

    def next_correlation_id(self) -> int:
        self._cid += 1
        return self._cid

    def send(self, _broker: str, request: Any) -> simpy.Event:
        event = self.env.event()
        self.sent.append((request, event))
        return event


class _Consumer:
    """What the membership manager uses of a KafkaConsumer, recording what it is told."""

    def __init__(self) -> None:
        self.env = simpy.Environment()
        self.client = _Client(self.env)
        self.node = "c"
        self.coordinator: str | None = "broker-0"
        self.metadata = None
        self.rng = RandomStreams(1).stream("c")
        self.assignment: list[tuple[str, int]] = []
        self.positions: dict[tuple[str, int], int] = {}
        self.auto_commit_interval_ms: float | None = None
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []

    @property
    def auto_commit(self) -> bool:
        return False

    def mark_pending_revocation(self, partitions: list[tuple[str, int]] | None = None) -> None:
        self.calls.append(("pending", sorted(partitions or [])))

    def assign_from_subscribed(self, partitions: list[tuple[str, int]]) -> None:
        self.assignment = list(partitions)
        self.calls.append(("assign", sorted(partitions)))

    def commit_async(self) -> None:
        pass

    def commit_sync_before_rebalance(self, _timeout_ms: float):  # type: ignore[no-untyped-def]
        yield from ()

    def restart_auto_commit_timer(self) -> None:
        pass


def _member(in_poll: bool) -> tuple[_Consumer, ConsumerMembershipManager]:
    consumer = _Consumer()
    config = GroupRebalanceConfig(G, group_protocol="consumer", reconciles_in_poll=in_poll)
    member = ConsumerMembershipManager(consumer, config, (T,))  # type: ignore[arg-type]
    return consumer, member


def _answer(
    consumer: _Consumer,
    epoch: int,
    assignment: tuple[tuple[str, int], ...] | None,
    error: Errors = Errors.NONE,
) -> None:
    """Answer the heartbeat in flight."""
    consumer.env.run(until=consumer.env.now + 1)
    request, event = consumer.client.sent[-1]
    event.succeed(
        ConsumerGroupHeartbeatResponse(request.correlation_id, error, "", epoch, 5_000, assignment)
    )
    consumer.env.run(until=consumer.env.now + 1)


def _poll(member: ConsumerMembershipManager) -> None:
    """A poll(): its start, a pass of its loop (the callbacks), and a moment of waiting."""
    env = member.env
    member.on_poll_start()
    env.run(until=env.now + 1)
    member.poll()
    env.run(until=env.now + 1)


def _pass(member: ConsumerMembershipManager) -> None:
    """One more pass of the loop of a poll() under way."""
    member.poll()
    member.env.run(until=member.env.now + 1)


@pytest.mark.parametrize("in_poll", [False, True])
def test_kafka_20106_a_reconciliation_starts_only_in_poll(in_poll):
    """Without auto-commit, 4.2 and before start a reconciliation on the network thread as
    soon as a new assignment arrives (the revoked partitions are marked at once, the added
    ones join the subscription at once); 4.3 waits for the application thread, which starts
    it on its next pass of poll()'s loop."""
    consumer, member = _member(in_poll)
    _poll(member)  # joins
    _answer(consumer, 1, (tp(0), tp(1)))
    started = [("pending", []), ("assign", [tp(0), tp(1)])]
    assert consumer.calls == ([] if in_poll else started)
    _pass(member)
    assert consumer.calls == started
    _pass(member)  # onPartitionsAssigned
    assert consumer.assignment == [tp(0), tp(1)]
    consumer.calls.clear()
    _answer(consumer, 2, (tp(0),))  # tp(1) is to be revoked
    assert consumer.calls == ([] if in_poll else [("pending", [tp(1)])])
    _poll(member)  # the revocation: onPartitionsRevoked, then the new assignment
    assert consumer.calls[0] == ("pending", [tp(1)])
    assert consumer.calls[-1] == ("assign", [tp(0)])


@pytest.mark.parametrize("in_poll", [False, True])
def test_kafka_20332_lost_partitions_stop_at_once(in_poll):
    """A fenced member's partitions are lost: 4.3 stops fetching them (and returning their
    fetched records) at once; before, only onPartitionsLost in the next poll() did."""
    consumer, member = _member(in_poll)
    _poll(member)
    _answer(consumer, 1, (tp(0), tp(1)))
    _poll(member)
    consumer.calls.clear()
    consumer.env.run(until=consumer.env.now + 5_000)  # the next heartbeat is due
    _answer(consumer, 1, None, Errors.FENCED_MEMBER_EPOCH)
    assert consumer.calls == ([("pending", [tp(0), tp(1)])] if in_poll else [])
    _poll(member)
    assert consumer.calls[-1] == ("assign", []) and not consumer.assignment
