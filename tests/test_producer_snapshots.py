"""Producer state rebuilt from producer snapshots, as Kafka rebuilds it after a restart and after
a truncation (UnifiedLog.rebuildProducerState, ProducerStateManager.truncateAndReload and
readSnapshot, LogLoader.recoverSegment): a snapshot keeps one batch per producer, so a retry of
an earlier batch is OUT_OF_ORDER_SEQUENCE_NUMBER afterwards, and an idempotent producer's epoch
bump then writes it again (calibration case 2 on Kafka 4.1.1: producer-0-620..631 twice)."""

from __future__ import annotations

from eosim.analysis.outcome import parse, run
from eosim.simulation.broker.log import LogConfig, PartitionLog
from eosim.simulation.broker.partition import Partition
from eosim.simulation.broker.producer_state import ProducerStateManager, Verdict
from eosim.simulation.records import LogBatch, batch_size

TP = ("t", 0)


def fill(log: PartitionLog, sequences: range, pid: int = 7, at: float = 0.0) -> None:
    """One single-record batch per sequence, appended at ``at``."""
    for seq in sequences:
        log.append(pid, 0, seq, (f"v{seq}",), at)


def cached(state: ProducerStateManager, pid: int = 7) -> list[int]:
    return [b.first_seq for b in state.producers[pid].batches]


def test_a_truncation_with_no_snapshot_replays_the_whole_log():
    """truncateAndReload finds no snapshot: the log is replayed from its start, every batch
    counted (five cached)."""
    log = PartitionLog("t", 0)
    fill(log, range(6))
    log.truncate_to(4)
    state = log.rebuild_producer_state(ProducerStateManager())
    assert cached(state) == [0, 1, 2, 3]
    assert state.check(7, 0, 1, 1).verdict is Verdict.DUPLICATE


def test_a_truncation_loads_the_snapshot_the_last_one_wrote():
    """rebuildProducerState ends with a snapshot at its offset; the next truncation above it
    loads it (the last batch only) and replays the batches after it. One below it deletes it
    (truncateAndReload) and replays from the start."""
    log = PartitionLog("t", 0)
    fill(log, range(4))
    log.truncate_to(4)  # nothing to cut: no rebuild, no snapshot
    fill(log, range(4, 8))
    log.truncate_to(4)
    log.rebuild_producer_state(ProducerStateManager())  # the snapshot at 4
    fill(log, range(4, 8))
    log.truncate_to(6)
    state = log.rebuild_producer_state(ProducerStateManager())
    assert cached(state) == [3, 4, 5]
    assert state.check(7, 0, 1, 1).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert state.check(7, 0, 3, 3).verdict is Verdict.DUPLICATE
    log.truncate_to(3)
    state = log.rebuild_producer_state(ProducerStateManager())
    assert cached(state) == [0, 1, 2]


def test_a_segment_roll_leaves_a_snapshot_a_truncation_loads():
    """UnifiedLog.roll writes a snapshot at the new segment's base offset."""
    two_batches = 2 * batch_size(("v0",))
    log = PartitionLog("t", 0, LogConfig(segment_bytes=two_batches))
    fill(log, range(6))
    assert log.number_of_segments == 3  # [0, 1] [2, 3] [4, 5]
    log.truncate_to(5)
    state = log.rebuild_producer_state(ProducerStateManager())
    assert cached(state) == [3, 4]
    assert state.check(7, 0, 2, 2).verdict is Verdict.OUT_OF_ORDER_SEQUENCE


def test_a_restart_loads_one_batch_per_producer_and_drops_the_expired_ones():
    """LogLoader.load: the recovery writes a snapshot at the log end and the state is loaded
    from it, which keeps each producer's last batch and leaves out the producers idle for
    producer.id.expiration.ms (loadFromSnapshot), unless a transaction of theirs is open."""
    log = PartitionLog("t", 0)
    fill(log, range(3), pid=1, at=0.0)  # idle since 0
    log.append(2, 0, 0, ("t0",), 0.0, transactional=True)  # idle, but its transaction is open
    fill(log, range(4), pid=3, at=900.0)
    part = Partition(TP, "broker-0", ProducerStateManager(expiration_ms=1_000.0))
    part.log = log
    part.recover(ProducerStateManager(expiration_ms=1_000.0), 1_500.0)
    state = part.producer_state
    assert sorted(state.producers) == [2, 3]
    assert cached(state, 3) == [3]
    assert state.check(3, 0, 3, 3).verdict is Verdict.DUPLICATE
    assert state.check(3, 0, 2, 2).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert state.check(1, 0, 0, 0).verdict is Verdict.APPEND  # forgotten: a new producer
    # The snapshot at the log end is where the next truncation starts from.
    assert log.snapshot_offsets == [log.log_end_offset]


def test_a_follower_that_becomes_leader_keeps_every_cached_batch():
    """No restart, no truncation: a follower's state grew with every fetched batch
    (UnifiedLog.appendAsFollower updates it, up to five per producer), and makeLeader keeps
    it, so it recognises the retries the old leader would have."""
    part = Partition(TP, "broker-1", ProducerStateManager())
    part.append_as_follower([LogBatch(i, 7, 0, i, (f"v{i}",), 0.0) for i in range(6)], 6, 0.0)
    assert cached(part.producer_state) == [1, 2, 3, 4, 5]
    assert part.producer_state.check(7, 0, 1, 1).verdict is Verdict.DUPLICATE


# -- end to end: calibration case 2's duplicate --------------------------------------------------
CASE_2 = """\
name: restarted-leader-duplicates
description: >
  Calibration case 2's duplicate, small: both followers paused, so the leader's appends stay
  uncommitted; a produce request waits for the high watermark until its timeout (5 s) and the
  next one is read, so the leader holds two batches of the producer past the high watermark when
  it is killed. Restarted, it is the only ISR member left and leads again, with the producer
  state of the snapshot its recovery wrote: the last batch only. The producer's retry of the
  first is OUT_OF_ORDER_SEQUENCE_NUMBER; it bumps its epoch, renumbers both and writes them
  again.
seed: 1
kafka: {version: "4.1"}
cluster:
  brokers: 3
  config: {replica.lag.time.max.ms: 30000}
  topics:
    - name: events
      partitions: 1
      replication_factor: 3
      config: {min.insync.replicas: 1, unclean.leader.election.enable: false}
producers:
  - name: producer-0
    config:
      acks: all
      enable.idempotence: true
      request.timeout.ms: 5000
      delivery.timeout.ms: 60000
    workload: {topic: events, records: 3000, rate: 1000}
faults:
  - {kind: pause, nodes: [broker-1, broker-2], at: 1s, duration: 20s}
  - {kind: crash, nodes: [broker-0], at: 8s, duration: 3s}
"""


def test_a_restarted_leader_refuses_an_earlier_retry_and_the_epoch_bump_duplicates_it():
    outcome = run(parse(CASE_2, "case-2.yaml"))
    dup = outcome.check.anomalies["duplicate"]
    assert dup.count == 12
    assert [e["value"] for e in dup.examples][:1] == ["producer-0-996"]
    first = dup.examples[0]["positions"]
    assert [p["offset"] for p in first] == [996, 1008]
    (log,) = [r for r in outcome.run.history.records() if r["kind"] == "log"]
    records = {r["offset"]: r for r in log["records"]}
    # The copies: the same records, renumbered from 0 at the bumped epoch.
    assert [(records[o]["epoch"], records[o]["sequence"]) for o in (996, 1008, 1019)] == [
        (0, 996),
        (1, 0),
        (1, 11),
    ]
    assert outcome.check.anomalies["lost_write"].count == 0


def test_without_snapshots_the_restarted_leader_deduplicates_the_retry():
    """The what-if rule off: the whole log replayed, the retry recognised, no duplicate."""
    scenario = parse(
        CASE_2, "case-2.yaml", ["kafka.rules.producer_state_rebuilt_from_snapshots=false"]
    )
    assert run(scenario).check.anomalies["duplicate"].count == 0
