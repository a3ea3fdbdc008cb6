"""Sender: the producer's I/O thread, as a SimPy process.

Each pass of the loop (Kafka's ``Sender.runOnce``):

1. times out requests older than ``request.timeout.ms`` (as the end of Kafka's previous
   ``NetworkClient.poll`` does). This *closes the connection*, which fails every request in
   flight on it as a disconnection;
2. resolves sequences, bumps the idempotent epoch and fetches a producer id if there is none;
3. expires batches past ``delivery.timeout.ms``, queued or in flight;
4. drains ready partitions, at most one batch per partition per request, into one
   ProduceRequest per leader, as long as that connection has fewer than
   ``max.in.flight.requests.per.connection`` requests outstanding. Sequences are assigned
   here, at drain. With idempotence a partition is skipped while it has unresolved
   sequences, has stale-epoch batches in flight, or its head batch is a retry that is not
   the first in flight (so retries go out one at a time, in order);
5. sleeps until the next deadline or until woken by an append or a response.

Responses complete batches. Retriable errors re-enqueue the batch after an exponential,
jittered backoff (``retry.backoff.ms`` to ``retry.backoff.max.ms``, Kafka's
``ExponentialBackoff``: jitter first, then the cap) while ``retries`` and
``delivery.timeout.ms`` allow. Everything else fails it. A closed connection waits out the
reconnect backoff (``reconnect.backoff.ms`` to ``reconnect.backoff.max.ms``, the same
formula, ``ClusterConnectionStates``) before it is used again.

Connections, requests in flight and metadata updates are the producer's ``NetworkClient``
(:mod:`eosim.simulation.producer.network_client`): the Sender asks it which broker can take
a request now, sends through it, and is told of every answer and of every request a
disconnection cancelled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import simpy

from eosim.simulation.config import ProducerConfig
from eosim.simulation.exponential_backoff import ExponentialBackoff
from eosim.simulation.metadata import ClientMetadata, ClusterMetadata
from eosim.simulation.network import Message, Network
from eosim.simulation.probe import Probe
from eosim.simulation.producer.accumulator import ProducerBatch, RecordAccumulator
from eosim.simulation.producer.network_client import (
    INF,
    MIN_SLEEP_MS,
    InFlightRequest,
    NetworkClient,
    NodeConnection,
)
from eosim.simulation.producer.transaction_manager import TransactionManager
from eosim.simulation.producer.transaction_states import State
from eosim.simulation.producer.transactions import END_TXN, Transactions
from eosim.simulation.protocol import (
    INVALID_METADATA_ERRORS,
    NO_SEQUENCE,
    BatchData,
    Errors,
    InitProducerIdRequest,
    InitProducerIdResponse,
    PartitionResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from eosim.simulation.rng import RandomStream


class Sender:
    def __init__(
        self,
        env: simpy.Environment,
        node: str,
        network: Network,
        metadata: ClusterMetadata,
        accumulator: RecordAccumulator,
        config: ProducerConfig,
        transaction_manager: TransactionManager | None,
        rng: RandomStream,
        on_batches_done: Callable[[], None],
        metadata_rng: RandomStream | None = None,
        probe: Probe | None = None,
    ) -> None:
        self.env = env
        self.node = node
        self.network = network
        # The producer's metadata cache: partition leaders as this client believes them.
        self.metadata = ClientMetadata(
            metadata,
            config.metadata_max_age_ms,
            config.retry_backoff_ms,
            env.now,
            refresh_backoff_max_ms=config.retry_backoff_max_ms,
            jitter=metadata_rng,
        )
        self.accumulator = accumulator
        self.config = config
        self.tm = transaction_manager
        self.rng = rng
        # RecordAccumulator.retryBackoff.
        self.retry_backoff = ExponentialBackoff(
            config.retry_backoff_ms, config.retry_backoff_max_ms
        )
        self.on_batches_done = on_batches_done
        self.running = True
        self.client = NetworkClient(
            env,
            node,
            network,
            list(metadata.brokers),
            config,
            self.metadata,
            rng,
            self._cancelled,
            on_batches_done,
        )
        self._connections = self.client.connections
        self._wakeup = env.event()
        self._timer_at = INF
        self.retries = 0
        self.probe = probe
        self.paused: simpy.Event | None = None  # set while the process is frozen
        self.process = env.process(self._loop())

    # -- loop --------------------------------------------------------------------------
    def wakeup(self) -> None:
        if not self._wakeup.triggered:
            self._wakeup.succeed()

    def await_metadata(self, then: Callable[[], None]) -> None:
        """Kafka's ``requestUpdateForNewTopics`` and ``awaitUpdate`` for topics the producer
        has not used: ``then`` runs when the answer to a metadata request sent from now on
        arrives (the model's answers name every topic; one already in flight was asked
        before the new topics were added, so its answer does not count, as in Kafka)."""
        metadata = self.metadata
        skip = [self.client.metadata_in_flight]

        def updated() -> None:
            if skip[0]:
                skip[0] = False
                metadata.request_update_for_new_topics()
                metadata.on_update.append(updated)
                self.wakeup()
                return
            then()

        metadata.request_update_for_new_topics()
        metadata.on_update.append(updated)
        self.wakeup()

    def _loop(self):  # type: ignore[no-untyped-def]
        env = self.env
        while self.running:
            if self.paused is not None:
                yield self.paused
                continue
            delay = self._run_once(env.now)
            if not self.running:
                return
            if delay < INF:
                at = env.now + max(delay, MIN_SLEEP_MS)
                if at < self._timer_at:
                    self._timer_at = at
                    timer = env.timeout(at - env.now)
                    timer.callbacks.append(self._on_timer)
            yield self._wakeup
            self._wakeup = env.event()

    def _on_timer(self, _event: simpy.Event) -> None:
        self._timer_at = INF
        self.wakeup()

    def stop(self) -> None:
        self.running = False
        self.wakeup()

    def _run_once(self, now: float) -> float:
        # Requests that timed out are failed first: in Kafka that is the end of the previous
        # NetworkClient.poll, before runOnce resolves sequences and bumps the epoch.
        self.client.time_out_requests(now)
        delay = INF
        tm = self.tm
        txn = self.txn
        if tm is not None:
            tm.maybe_resolve_sequences()
        if txn is not None:
            if txn.state.state in (
                State.ABORTABLE_ERROR,
                State.ABORTING_TRANSACTION,
                State.FATAL_ERROR,
            ):
                self.abort_undrained_batches(txn.last_error or "TransactionAbortedException")
        elif tm is not None:
            if tm.epoch_bump_required:
                tm.bump_idempotent_epoch()
            if not tm.has_producer_id and not tm.initializing:
                delay = min(delay, self._send_init_producer_id(now))
        delay = min(delay, self._expire_batches(now))
        if txn is not None:
            delay = min(delay, self._maybe_send_txn_request(now))
        delay = min(delay, self.client.maybe_update_metadata(now))
        if tm is not None and not tm.has_producer_id:
            # Nothing can be drained yet, but the InitProducerId request may still time out.
            return min(delay, self.client.next_connection_delay(now))
        ready, ready_delay = self.accumulator.ready(now, self._sendable, self.metadata.leader_epoch)
        delay = min(delay, ready_delay)
        if ready:
            self._drain_and_send(ready, now)
            # Sender.sendProducerData polls with a zero timeout after sending to ready nodes,
            # so the loop drains again at once: the next batch of a partition goes out in the
            # next request, until max.in.flight.requests.per.connection stops it.
            delay = 0.0
        return min(delay, self.client.next_connection_delay(now))

    # -- InitProducerId ----------------------------------------------------------------
    def _send_init_producer_id(self, now: float) -> float:
        client = self.client
        nc = client.least_loaded_node(now)
        if nc is None:
            return client.backoff_wait(now)
        assert self.tm is not None
        self.tm.initializing = True
        cid = client.next_correlation_id()
        request = InitProducerIdRequest(cid, self.config.transactional_id)
        client.track(nc, InFlightRequest(cid, client.deadline(now), [], True))
        client.send(nc, request)
        return INF

    # -- drain -------------------------------------------------------------------------
    def _sendable(self, tp: TopicPartition) -> bool:
        leader = self.metadata.leader(tp)
        if leader is None:
            self.metadata.request_update()  # Sender: a partition with no known leader
            return False
        nc = self._connections[leader]
        if not self.client.ready(nc, self.env.now):
            return False
        tm = self.tm
        if tm is None:
            return True
        txn = self.txn
        if txn is not None and not txn.is_partition_added(tp):
            return False
        head = self.accumulator.head(tp)
        assert head is not None
        if not head.has_sequence:
            if tm.has_stale_producer_id_and_epoch(tp) and not tm.maybe_update_producer_id_and_epoch(
                tp
            ):
                return False
            if tm.has_unresolved_sequence(tp):
                return False
        first = tm.first_in_flight_sequence(tp)
        return not (first != NO_SEQUENCE and head.has_sequence and head.base_sequence != first)

    def _drain_and_send(self, ready: list[TopicPartition], now: float) -> None:
        by_leader: dict[str, list[TopicPartition]] = {}
        for tp in ready:
            by_leader.setdefault(self.metadata.leader(tp), []).append(tp)
        for broker, tps in by_leader.items():
            batches: list[ProducerBatch] = []
            size = 0
            for tp in tps:
                head = self.accumulator.head(tp)
                assert head is not None
                if batches and size + head.size > self.config.max_request_size:
                    break
                batch = self.accumulator.pop_head(tp)
                if self.tm is not None and not batch.has_sequence:
                    self.tm.assign_sequence(batch)
                size += batch.size
                batches.append(batch)
            self._send_produce(self._connections[broker], batches, now)

    def _send_produce(self, nc: NodeConnection, batches: list[ProducerBatch], now: float) -> None:
        client = self.client
        cid = client.next_correlation_id()
        partitions = []
        for b in batches:
            b.attempts += 1
            b.in_flight = True
            # Draining closes the batch (ProducerBatch.close), which clears "reopened": only
            # answers to attempts sent before a renumbering see the sequence as reset.
            b.sequence_has_been_reset = False
            if b.attempts > 1:
                self.retries += 1
            values = tuple(b.values)
            # The batch's timestamp: CreateTime, taken here as the batch's creation (Kafka
            # stamps each record at send(); the batch's max timestamp is its last record's).
            data = BatchData(
                b.producer_id,
                b.epoch,
                b.base_sequence,
                values,
                self._txn_id is not None,
                b.created_ms,
                b.size,
            )
            partitions.append((b.tp, data))
        acks = self.config.acks
        request = ProduceRequest(
            cid,
            acks,
            partitions,
            batches,
            self._txn_id,
            self.config.request_timeout_ms,
        )
        client.send(nc, request)
        if acks == 0:
            # Nothing will answer: the batches count as sent and done (offset unknown).
            for b in batches:
                self._complete_batch(b, PartitionResponse(Errors.NONE, -1), now)
            self.on_batches_done()
            return
        client.track(nc, InFlightRequest(cid, client.deadline(now), batches))

    # -- responses ---------------------------------------------------------------------
    def receive(self, msg: Message) -> None:
        if not self.running:
            return
        answer = self.client.receive(msg, self.env.now)
        if answer is None:
            return
        request, payload = answer
        if request is not None:
            now = self.env.now
            if request.txn is not None:
                assert self.txn is not None
                self.txn.on_response(request.txn, payload)
            elif isinstance(payload, InitProducerIdResponse):
                if self.tm is not None and payload.error is Errors.NONE:
                    self.tm.set_producer_id_and_epoch(payload.producer_id, payload.epoch)
                elif self.tm is not None:
                    self.tm.initializing = False
            elif isinstance(payload, ProduceResponse):
                for batch, result in zip(request.batches, payload.results, strict=True):
                    self._complete_batch(batch, result, now)
                self.on_batches_done()
        self.wakeup()

    def _cancelled(self, request: InFlightRequest, error: Errors, now: float) -> None:
        """A disconnection cancelled ``request`` (NetworkClient.cancelInFlightRequests): a
        produce's batches fail with ``error``, and nobody knows whether the broker appended
        them."""
        if request.txn is not None:
            assert self.txn is not None
            self.txn.on_disconnect(request.txn)
            return
        if request.init_producer_id:
            if self.tm is not None:
                self.tm.initializing = False
            return
        for batch in request.batches:
            batch.fate_unknown = True
            self._complete_batch(batch, PartitionResponse(error, log_start_offset=-1), now)

    def _complete_batch(
        self, batch: ProducerBatch, response: PartitionResponse, now: float
    ) -> None:
        """Sender.completeBatch: success, a retry, or a failure that may adjust sequences."""
        batch.in_flight = False
        error = response.error
        tm = self.tm
        if error in INVALID_METADATA_ERRORS:
            self.metadata.request_update()
        if error is Errors.NONE:
            if tm is not None:
                tm.handle_completed_batch(batch, response.base_offset)
            if batch.complete(response.base_offset):
                self.accumulator.deallocate(batch)
            return
        if self._can_retry(batch, response, now):
            backoff = self._retry_backoff(batch)
            self.accumulator.reenqueue(batch, now, backoff)
            return
        # Sequences are adjusted only while the batch has retries left: once they are
        # exhausted nobody knows whether its sequence was taken (Kafka's attempts < retries;
        # eosim counts sends, Kafka counts retries).
        adjust = batch.attempts - 1 < self.config.retries
        self._fail_batch(batch, f"{error.exception_name}: {error.name}", error, adjust)

    def _fail_batch(
        self,
        batch: ProducerBatch,
        message: str,
        error: Errors | None = None,
        adjust_sequences: bool = False,
    ) -> None:
        """Sender.failBatch: complete the batch with the error, then let the transaction
        manager react (only if this completed it; an expired batch is already done)."""
        if batch.fail(message):
            if self.tm is not None:
                self.tm.handle_failed_batch(batch, error, message, adjust_sequences)
            self.accumulator.deallocate(batch)

    def _can_retry(self, batch: ProducerBatch, response: PartitionResponse, now: float) -> bool:
        if now - batch.created_ms >= self.config.delivery_timeout_ms:
            return False
        if batch.attempts - 1 >= self.config.retries or batch.done:
            return False
        if self.tm is None:
            return response.error.retriable
        return self.tm.can_retry(batch, response)

    def _retry_backoff(self, batch: ProducerBatch) -> float:
        """RecordAccumulator: ``retryBackoff.backoff(attempts - 1)``, Kafka counting the
        batch's retries where eosim counts its sends. The jitter is drawn once, at re-enqueue
        (Kafka draws it each time it checks the batch)."""
        return self.retry_backoff.backoff(max(batch.attempts - 1, 0), self.rng)

    # -- delivery timeout --------------------------------------------------------------
    def _expire_batches(self, now: float) -> float:
        """Fail batches past ``delivery.timeout.ms``, queued or in flight, without adjusting
        sequences; one that had been retried leaves its partition's sequence unresolved."""
        limit = self.config.delivery_timeout_ms
        message = "TimeoutException: record expired after delivery.timeout.ms"
        expired = self.accumulator.expired_batches(now)
        delay = self.accumulator.next_expiry_delay(now)
        for nc in self._connections.values():
            for request in nc.in_flight:
                for batch in request.batches:
                    if batch.done:
                        continue
                    left = batch.created_ms + limit - now
                    if left <= 0:
                        batch.fate_unknown = True  # its request is still outstanding
                        expired.append(batch)
                    else:
                        delay = min(delay, left)
        for batch in expired:
            self._fail_batch(batch, message)
            if self.tm is not None and batch.in_retry:
                self.tm.mark_sequence_unresolved(batch)
        if expired:
            self.on_batches_done()
        return delay

    # -- transactions ------------------------------------------------------------------
    @property
    def txn(self) -> Transactions | None:
        """The producer's transactional half. The TransactionManager holds it as the
        TransactionalHalf its bookkeeping needs; the Sender drives all of it."""
        tm = self.tm
        return cast("Transactions | None", tm.txn) if tm is not None else None

    @property
    def _txn_id(self) -> str | None:
        txn = self.txn
        return txn.transactional_id if txn is not None else None

    def _maybe_send_txn_request(self, now: float) -> float:
        txn = self.txn
        assert txn is not None
        request = txn.next_request(now, self.accumulator.incomplete > 0)
        if request is None:
            return txn.next_wakeup(now)
        client = self.client
        node = txn.coordinator_node(request)
        if node is None:
            # FindCoordinator goes to any broker that can take it.
            ready = client.least_loaded_node(now)
            if ready is None:
                return client.backoff_wait(now)
            nc = ready
        else:
            nc = self._connections[node]
            if not client.ready(nc, now):
                return client.reconnect_wait(nc, now)
        txn.sent(request)
        cid = client.next_correlation_id()
        payload = request.build(cid)
        client.track(nc, InFlightRequest(cid, client.deadline(now), [], txn=request))
        client.send(nc, payload)
        if request.priority == END_TXN and self.probe is not None:
            self.probe.hit("producer.after_end_txn_sent", self.node)
        return INF

    def abort_undrained_batches(self, message: str) -> None:
        batches = self.accumulator.abort_undrained()
        for batch in batches:
            # RecordAccumulator.abortUndrainedBatches: no transaction-manager reaction.
            if batch.fail(message):
                self.accumulator.deallocate(batch)
        if batches:
            self.on_batches_done()

    def pause(self) -> None:
        if self.paused is None:
            self.paused = self.env.event()

    def resume(self) -> None:
        if self.paused is not None:
            paused, self.paused = self.paused, None
            paused.succeed()
            self.wakeup()

    def abandon(self) -> None:
        """The producer process died: stop without completing anything."""
        self.running = False
        self.client.abandon()
