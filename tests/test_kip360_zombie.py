"""KIP-360: a zombie's late epoch bump must fence the zombie, never the live instance.

Instance A of a transactional.id hits an abortable error, aborts (EndTxn answered), and then
stalls (a GC pause) before its epoch-bump InitProducerId, which carries A's producer id and
epoch, reaches the coordinator. Meanwhile B, a new instance with the same transactional.id,
initialises (no expected epoch: the coordinator bumps and forgets the last epoch) and goes on
committing. When A's bump finally arrives, the coordinator
(TransactionMetadata.prepareIncrementProducerEpoch) answers PRODUCER_FENCED: A stops, B goes
on. Before KIP-360 was modelled, A's bump carried no id and epoch, was taken for a new
instance's, and fenced B; A would then have processed input B had already committed.

Real clients and the real coordinator talk over the simulated network; the test plays the
Sender for each client (it sends the client's next request and hands it the answer).
"""

from __future__ import annotations

from typing import Any

from conformance.cluster import Cluster
from conformance.test_transaction_manager import write

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation.producer.transaction_manager import TransactionManager
from eosim.simulation.producer.transaction_states import State
from eosim.simulation.producer.transactions import Transactions
from eosim.simulation.protocol import AddPartitionsToTxnRequest, Errors, InitProducerIdRequest
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import parse_scenario

TP = ("t", 0)


class Instance:
    """One producer instance of transactional.id "app", talking to the cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cl = cluster
        self.tm = TransactionManager()
        self.txn = Transactions(cluster.env, "app", 60_000, 100, self.tm, 1)
        self.tm.txn = self.txn
        self.txn.coordinators["transaction", "app"] = cluster.coordinator_of("app")

    def step(self) -> Any:
        """Send the next request and deliver the answer; the request sent (or None)."""
        request = self.txn.next_request(self.cl.env.now, False)
        if request is None:
            return None
        self.txn.sent(request)
        built = None

        def make(cid: int) -> Any:
            nonlocal built
            built = request.build(cid)
            return built

        answer = self.cl.call(self.cl.coordinator_of("app"), make)
        self.txn.on_response(request, answer)
        return built

    def until_idle(self, limit: int = 50) -> list[Any]:
        sent = []
        for _ in range(limit):
            request = self.step()
            if request is None:
                self.cl.run(150)  # a retry backoff
                if self.txn.next_request(self.cl.env.now, False) is None:
                    return sent
                continue
            sent.append(request)
        return sent


def test_a_zombies_late_epoch_bump_fences_the_zombie_not_the_live_instance():
    cl = Cluster(version="3.9")  # transaction version 1: the client bumps after an abort
    cl.run(50)
    a = Instance(cl)
    a.txn.init_transactions()
    a.until_idle()
    assert a.txn.state.state is State.READY
    assert a.txn.begin() is None
    a.txn.maybe_add_partition(TP)
    a.until_idle()
    # A produce fails for good: abortable, and the abort must bump the epoch.
    a.tm.handle_failed_batch(write(a.tm, TP), Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, "OOO", True)
    a.txn.abort()
    end = a.step()
    assert type(end).__name__ == "EndTxnRequest"
    assert a.txn.state.state is State.INITIALIZING  # the bump is next, but A stalls here
    cl.run(200)  # the abort's markers land

    b = Instance(cl)
    b.txn.init_transactions()
    b.until_idle()
    assert b.txn.state.state is State.READY and b.tm.epoch > a.tm.epoch

    sent = a.until_idle()  # A wakes up and sends its bump
    assert [type(r) for r in sent] == [InitProducerIdRequest]
    assert a.txn.state.state is State.FATAL_ERROR
    assert a.txn.last_error.startswith("ProducerFencedException")
    assert (sent[0].producer_id, sent[0].epoch) == (a.tm.producer_id, a.tm.epoch)

    # B goes on: its epoch stands.
    assert b.txn.begin() is None
    b.txn.maybe_add_partition(TP)
    sent = b.until_idle()
    assert [type(r) for r in sent] == [AddPartitionsToTxnRequest]
    assert b.txn.is_partition_added(TP) and b.txn.state.state is State.IN_TRANSACTION


ZOMBIE_PROCESSOR = """
name: zombie-epoch-bump
kafka: {version: "3.9"}
cluster:
  brokers: 3
  config: {group.min.session.timeout.ms: 1000}
  topics:
    - {name: in, partitions: 1}
    - {name: out, partitions: 1}
producers:
  - name: source
    config: {enable.idempotence: true}
    workload: {topic: in, records: 1000, rate: 50}
processors:
  # Two members of group `group` with a transactional.id per input partition (EOS v1:
  # `group-in-0` whoever owns it). app-a owns the one partition (it sorts first for the range
  # assignor); app-b waits.
  - name: app-a
    input: &input
      topic: in
      group: group
      auto.offset.reset: earliest
      subscribe: true
      session.timeout.ms: 2s
      heartbeat.interval.ms: 500ms
    output: {topic: out}
    transactional: true
    transactional_id_per: partition
    config: &config
      request.timeout.ms: 1000
      delivery.timeout.ms: 2000
      transaction.timeout.ms: 60000
      max.block.ms: 60000
  - name: app-b
    input: *input
    output: {topic: out}
    transactional: true
    transactional_id_per: partition
    config: *config
faults:
  # The leader of `out` dies as a commit's marker reaches it, so that transaction stays in
  # PrepareCommit for a while; the next one cannot add its partition, its output expires,
  # and the instance aborts and must bump its epoch (transaction version 1).
  - {kind: crash_at, point: leader.before_marker, nodes: [broker-0], occurrence: 100,
     duration: 10s}
  # app-a freezes with its bump still to be accepted; after its session the group gives the
  # partition to app-b, whose initTransactions for group-in-0 fences app-a's producer.
  - {kind: pause, nodes: [app-a], at: 7s, duration: 40s}
"""


def test_a_paused_processors_late_bump_cannot_resume_it_as_a_zombie():
    """The scenario form of the test above: app-a aborts after its sendOffsetsToTransaction
    failed, freezes before its epoch bump goes through, and the group hands the partition to
    app-b, whose task producer (the same transactional.id) initialises and commits. When
    app-a thaws, its bump is fenced, so it cannot process again input that app-b has already
    committed; nothing is duplicated or lost."""
    scenario = parse_scenario(ZOMBIE_PROCESSOR, "zombie.yaml", ())
    for seed in (1, 2, 3):
        records = list(run_scenario(scenario, seed).history.records())
        verdict = check_history(history_from_records(records))
        assert {n: a.count for n, a in verdict.anomalies.items() if a.count} == {}, seed
        last = [r for r in records if r.get("f") == "process" and r.get("process") == "app-a/0"]
        assert last[-1]["type"] == "info", seed
        assert last[-1]["error"].endswith("ProducerFencedException: PRODUCER_FENCED"), seed
        if seed in (1, 2):  # the abort's own epoch bump is what the coordinator fences
            assert last[-1]["error"].endswith(
                "abort failed: ProducerFencedException: PRODUCER_FENCED"
            )
        processed = {r["process"] for r in records if r.get("f") == "process" and r["type"] == "ok"}
        assert processed == {"app-a/0", "app-b/0"}, seed
