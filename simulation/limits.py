"""The model's stated limits, per feature a scenario can use: one place for the report to read.

Each departure is one line, a summary of the departures listed in docs/model.md ("Departures
from Kafka, and the switch that shows each" and "Departures (transactions)"); that document
has the detail and the reasons. :func:`features` says which features a scenario uses, so a
report on a sweep shows the limits that bear on it and no others.

A few departures bias a rate eosim reports in a known direction, measured beside a real
Kafka (docs/calibration.md): :data:`BIASES` holds each with the condition under which it bears
on a scenario, and :func:`bearing` gives those that do, which ``eosim run`` prints as ``limit``
lines and ``eosim report`` puts first. To add one, give it a :class:`Bias` here with its
condition, the departure in docs/model.md it summarises, and a case in tests/test_limits.py
that shows it and one that does not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eosim.simulation.faults import KINDS
from eosim.simulation.scenario import Scenario

# Feature -> departures from Kafka that bear on it, in the order the report lists them.
DEPARTURES: dict[str, tuple[str, ...]] = {
    "unbounded": (
        "Brokers handle requests one at a time per broker at a fixed cost "
        "(cluster.request_time_ms), not with a pool of handler threads.",
        "No warm-up, garbage collection or CPU shared by processes: latency tails are shorter "
        "than Kafka's, and a fresh process is as fast as a warm one.",
    ),
    "resources": (
        "Work holds a whole core first-come first-served, without time slices; a woken "
        "thread's wait is one figure fitted to Kafka's request queue time: tails run short.",
        "Clients start at full speed: a real run's first half second is slower, which lengthens "
        "its whole-run latency tails.",
        "The controller's requests, the disk and the page cache cost nothing; the controller "
        "and brokers spend only a fitted background CPU besides their requests.",
    ),
    "producers": (
        "Record sizes are estimated (value + key + 8 bytes per record, 61 per batch), "
        "without compression.",
        "The sticky partitioner switches partitions uniformly at random, without adaptive "
        "load weighting.",
        "A TCP connect is one exchange (no SYN retransmission), and the Sender does not block "
        "in awaitNodeReady for a transactional or producer-id request's node.",
        "Backoff jitter is drawn once per wait, where Kafka draws it at every check of a "
        "retried batch or of the metadata delay.",
    ),
    "network_loss": (
        "A loss black-holes the whole connection until request.timeout.ms or a reset "
        "(network.loss_model: connection), as TCP does; loss_model: message is not TCP.",
        "Cluster-internal messages are not subject to the ambient request_loss/response_loss, "
        "only to faults aimed at nodes or links.",
    ),
    "packet_loss": (
        "A retransmission delay is drawn per message, not per segment; the RTO does not adapt "
        "to the measured round trip and there is no congestion control.",
    ),
    "replication": (
        "Replicas are placed round robin from a fixed start; no preferred-leader election, "
        "reassignment, controlled shutdown or tiered storage.",
        "A restarted broker's start is a constant 2 s (cluster.broker_startup) unless "
        "cluster.resources.startup makes it CPU work on its host; it never grows with its logs.",
        "The controller is one node, not a quorum.",
        "Consumers do not validate their position after a leader change (KIP-320), and clients "
        "refresh metadata instead of taking the new leader from errors (KIP-951).",
        "A restarted replica keeps its high watermark (Kafka reads its last checkpoint); fetch "
        "sizes are in records.",
    ),
    "idempotence": (
        "Producer snapshots are worked out from the log, never lost or corrupt; a deleted "
        "head's producers outlive a restart even where Kafka has no snapshot of them.",
        "A produced batch has one timestamp, its creation in the producer (CreateTime), which "
        "producer-id expiry and retention read.",
        "Renumbering in-flight batches on epoch exhaustion (epoch 32767) is simplified.",
    ),
    "transactions": (
        "KIP-890 verification (part 1) is a direct call to the coordinator, not a request "
        "over the network (transaction version 2's implicit add is a request).",
        "Without cluster.resources transactions commit several times faster than Kafka's "
        "(calibration case 4: 7.2 against 20.7 ms; docs/model.md, departure 13).",
        "The resource model charges one cost for every transactional request on a broker's "
        "threads (service.transaction, 0.39 ms in the calibration-host preset; Kafka: 1-3 ms "
        "local by kind on that machine).",
        "The transaction version is one rule for the whole run, not recorded per transactional.id.",
        "Transaction markers travel without a connection, each lost or delayed on its own "
        "with the response-loss probability.",
        "Internal topics' replication factor is capped at the broker count (Kafka refuses to "
        "create them).",
        "Transaction version 2 fences as Kafka 4.0.0 does (markers at epoch + 2, a failed "
        "fence's epoch kept); KAFKA-19367 (4.0.1, 4.1) bumps once.",
    ),
    "consumers": (
        "An application's empty poll waits poll_interval with no fetch in flight; Kafka's "
        "poll(timeout) keeps one held at each leader (fetch.max.wait.ms).",
        "The consumer reconnects at once after a disconnection, without Kafka's reconnect backoff.",
        "The group coordinator writes each change at once; Kafka 4.0 and 4.1 hold a "
        "non-transactional write up to 5 ms (group.coordinator.append.linger.ms).",
        "Processors that do not subscribe split their group's partitions statically (no "
        "rebalance); subscribed ones are group members.",
        "Every replica rolls segments at the same batches; DeleteRecords is applied at the "
        "leader directly, without an admin client.",
    ),
}


def features(scenario: Scenario) -> list[str]:
    """The features of :data:`DEPARTURES` that ``scenario`` uses, in that order."""
    used = {"producers", "unbounded" if scenario.cluster.resources is None else "resources"}
    net = scenario.network
    if net.request_loss > 0 or net.response_loss > 0:
        used.add("network_loss")
    if any(f.kind == "loss" for f in scenario.faults):
        used.add("network_loss")
    if net.packet_loss > 0:
        used.add("packet_loss")
    if any(t.replication_factor > 1 for t in scenario.cluster.topics):
        used.add("replication")
    clients = scenario.clients
    if any(c.enable_idempotence for c in clients.producers.values()):
        used.add("idempotence")
    if scenario.transactional_producers or any(p.transactional for p in scenario.processors):
        used.add("transactions")
    if scenario.consumers or scenario.processors:
        used.add("consumers")
    return [f for f in DEPARTURES if f in used]


def departures(scenario: Scenario) -> list[tuple[str, str]]:
    """(feature, departure) for every departure that bears on ``scenario``."""
    return [(f, line) for f in features(scenario) for line in DEPARTURES[f]]


@dataclass(frozen=True)
class Bias:
    """A departure that biases a reported rate in a known direction: its line, and the
    condition under which it bears on a scenario."""

    text: str
    bears_on: Callable[[Scenario], bool]


def _broker_faults(scenario: Scenario) -> bool:
    """Whether the scenario crashes, pauses or powers off brokers (a failover)."""
    return any(
        KINDS[f.kind].failover and any(n.startswith("broker-") for n in f.nodes)
        for f in scenario.faults
    )


def _replicated(scenario: Scenario) -> bool:
    return any(t.replication_factor > 1 for t in scenario.cluster.topics)


def _acks_below_all(scenario: Scenario) -> bool:
    return any(c.acks in (0, 1) for c in scenario.clients.producers.values())


def _plain_pipelined(scenario: Scenario) -> bool:
    return any(
        not c.enable_idempotence and c.max_in_flight > 1
        for c in scenario.clients.producers.values()
    )


def _broker_kills(scenario: Scenario) -> bool:
    """Whether the scenario kills broker processes (crash or crash_at on a broker)."""
    return any(
        f.kind in ("crash", "crash_at") and any(n.startswith("broker-") for n in f.nodes)
        for f in scenario.faults
    )


BIASES: tuple[Bias, ...] = (
    Bias(
        "acks=1 (or 0) loss when a leader dies under load is a lower bound unless "
        "cluster.resources is set: without it the model has no CPU limit, garbage collection or "
        "warm-up, which give Kafka's replication lag its tail (docs/model.md, departure 12; "
        "calibration case 1: Kafka lost six to ten times more per record).",
        lambda s: (
            s.cluster.resources is None
            and _acks_below_all(s)
            and _replicated(s)
            and _broker_faults(s)
        ),
    ),
    Bias(
        "A plain producer's reordering rate under broker failures is not confirmed: with "
        "cluster.crash_reset and cluster.resources it is within about 2x of Kafka's, without "
        "them far off both ways (docs/model.md, departure 15; calibration cases 1 and 3).",
        lambda s: _plain_pipelined(s) and _broker_faults(s),
    ),
    Bias(
        "acks=1 (or 0) loss per record when a leader dies under load may be low even with "
        "cluster.resources: its replication-lag tail is shorter than Kafka's (docs/model.md, "
        "departure 16; calibration case 1 on a warm cluster: 3 runs of 20 lost against "
        "Kafka's 4, about a quarter of the records).",
        lambda s: (
            s.cluster.resources is not None
            and _acks_below_all(s)
            and _replicated(s)
            and _broker_faults(s)
        ),
    ),
    Bias(
        "A plain producer's reordering when a broker is killed is a lower bound unless "
        "cluster.crash_reset is set: the model resets a killed broker's connections at once, "
        "where the kernel closes them only once it has torn the process down, and the producer "
        "keeps sending into them until then (docs/model.md, departure 17).",
        lambda s: _plain_pipelined(s) and _broker_kills(s) and s.cluster.crash_reset == 0,
    ),
    Bias(
        "A plain producer's duplicates after a request timeout are an upper bound under "
        "network.in_flight_after_close: deliver: the model writes every request a closed "
        "connection held, Kafka's broker about two of five (until_reset, the default; "
        "docs/model.md, departure 1; calibration case 3).",
        lambda s: (
            _plain_pipelined(s)
            and _broker_faults(s)
            and s.network.in_flight_after_close == "deliver"
        ),
    ),
    Bias(
        "Under cluster.resources without resources.wire every link takes network.latency, "
        "fitted without the resource model: it counts the processes' work on a message twice, "
        "so replication and reads run about half a millisecond late at the median and their "
        "tails are partly the latency's (docs/model.md, departure 8; the preset "
        "epyc-2026-12-02-traced sets the wire).",
        lambda s: (
            s.cluster.resources is not None
            and s.cluster.resources.wire is None
            and "latency" not in s.network.model_fields_set
        ),
    ),
)


def bearing(scenario: Scenario) -> list[str]:
    """The :data:`BIASES` that bear on ``scenario``, their lines in order."""
    return [b.text for b in BIASES if b.bears_on(scenario)]
