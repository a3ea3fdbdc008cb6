"""The partition's side of a lost write: what happened to the record's partition around it.

A lost write's own messages (its send and its acknowledgement, :mod:`eosim.analysis.timeline`)
rarely say why it was lost: that happened on the brokers. A traced run keeps what Kafka keeps
in its ``state-change.log`` (``StateChangeLogger``): broker crashes, power losses, restarts,
registrations and fencing, elections and leader epochs, ISR changes, truncations and
high-watermark moves (``eosim.simulation.trace.state_change_records``, plain records). From
them this module tells the story of one record's partition:

* what concerns the partition: its replicas' changes to it (``became_leader``,
  ``became_follower``, ``truncated``, ``high_watermark``, ``fetch_failed``), the controller's
  (``leader_elected``, ``offline``, ``isr_changed``), the life of the brokers that hold its
  replicas (``power_loss``, ``crash``, ``restart``, ``process_started``, ``metadata_published``,
  ``registered``, ``recovery``, ``running``) and the controller's changes to those brokers
  (``session_expired``, ``fenced``, ``unfenced``, ``registration_refused``, ``registered``);
* from the record's send until :data:`AFTER_ACK_MS` after its acknowledgement, and beyond that
  until the last *decisive* event, however late;
* decisive, and marked so: a power loss whose cut covers the record's offset, a truncation
  that cuts it, the election of a leader whose log ends at or before it (the controller's
  ``leader_elected`` and the broker's ``became_leader``), and an unclean election. Of the
  cuts, those count that followed the election of a leader without the record (followers
  truncating to match it), the one that took the record from that leader, and, before such
  an election, those after which no leader holding the record led (the leader it was
  appended to, until it was cut itself, or a new leader whose log reached past the offset):
  with such a leader the replica could fetch the record again, and its cut is shown without
  the mark;
* readable: runs of high-watermark moves collapse into one line ("HW 10 -> 57 (12 moves)",
  saying where the HW passed the record's offset, that is, where the record was committed),
  and so do repeated refused registrations; a story longer than :data:`MAX_EVENTS` lines leaves
  out first the routine steps of a restart after the window, then what is not near a decisive
  event, each gap said in one line.

Only plain data comes in (no import of the model): this is the analysis side of
``simulation/state_change.py``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

# How long after the record's acknowledgement every change to its partition is shown.
AFTER_ACK_MS = 1000.0
# A longer story is shortened (see the module's docstring), keeping LEAD_UP events before each
# decisive one.
MAX_EVENTS = 60
LEAD_UP = 6

# The life of a broker (the node is the broker, no partition).
BROKER_LIFE = frozenset(
    {
        "power_loss",
        "crash",
        "restart",
        "process_started",
        "metadata_published",
        "registered",
        "recovery",
        "running",
    }
)
# A broker's changes that end a run of its refused registrations (besides the controller's
# changes to it).
REFUSAL_BREAKERS = frozenset({"power_loss", "crash", "restart", "registered"})
# The routine steps of a restart, and the moves of the HW: left out first after the window.
ROUTINE = frozenset(
    {"process_started", "metadata_published", "recovery", "running", "session_expired"}
)

Record = dict[str, Any]


@dataclass
class Event:
    """One line of the story: a state change, a collapsed run of them (``count`` > 1, until
    ``end_time``), or a gap (``event`` "omitted")."""

    time: float
    node: str
    event: str
    label: str
    end_time: float | None = None
    count: int = 1
    # Why it decided the loss, in a few words ("cuts offset 7"), and in a sentence; "" if not.
    decisive: str = ""
    why: str = ""


@dataclass
class PartitionStory:
    partition: str  # "events-0"
    offset: int | None
    replicas: list[str]
    # The partition when the record was sent: "leader broker-0 at epoch 0, ISR [...]".
    at_send: str
    events: list[Event] = field(default_factory=list)

    @property
    def end(self) -> float:
        """The last time the story covers."""
        return max((e.end_time or e.time for e in self.events), default=0.0)

    def reasons(self) -> list[str]:
        """The decisive events, one sentence each, in time order."""
        return [f"{e.time:.3f} {e.why}" for e in self.events if e.decisive and e.why]

    def summary(self) -> list[str]:
        """The story's head: where the record was, then why it was lost (:meth:`reasons`;
        none when no state change cut its offset or elected a leader without it)."""
        at = f", offset {self.offset}" if self.offset is not None else ""
        head = (
            f"{self.partition}{at} (replicas {', '.join(self.replicas)}); when sent: {self.at_send}"
        )
        return [head, *self.reasons()]


def node_key(node: str) -> tuple[str, int, str]:
    """Nodes in natural order: broker-2 before broker-10."""
    m = re.fullmatch(r"(.*?)(\d+)", node)
    return (m.group(1), int(m.group(2)), node) if m else (node, -1, node)


def partition_story(
    states: list[Record],
    topic: str,
    partition: int,
    offset: int | None,
    sent: float,
    appended: float,
    acked: float,
    after_ack_ms: float = AFTER_ACK_MS,
) -> PartitionStory | None:
    """The story of partition ``topic``-``partition`` around a record at ``offset`` (None
    when unknown: then only unclean elections are decisive), sent at ``sent``, appended by
    ``appended`` (the delivery of the request that wrote it: changes before it concern another
    record at that offset) and acknowledged at ``acked``. None when no state change concerns
    the partition (a run of unreplicated partitions records none)."""
    name = f"{topic}-{partition}"

    def on_partition(r: Record) -> bool:
        return r["topic"] == topic and r["partition"] == partition

    replicas = _replicas(states, on_partition, name)
    if not replicas:
        return None
    members = set(replicas)
    relevant = [r for r in states if _concerns(r, on_partition, members)]
    at_send, _, _ = _state_at(relevant, on_partition, sent, replicas)
    _, epoch, leader = _state_at(relevant, on_partition, appended, replicas)
    later = [r for r in relevant if r["time"] >= sent]
    decisive = _decisive(later, on_partition, name, offset, appended, epoch, leader)
    window_end = acked + after_ack_ms
    end = max([window_end, *(later[i]["time"] for i in decisive)])
    hw_before: dict[str, int] = {}
    for r in relevant:
        if r["time"] >= sent:
            break
        _note_hw(r, on_partition, hw_before)
    events = _collapse(
        [(r, decisive.get(i)) for i, r in enumerate(later) if r["time"] <= end],
        on_partition,
        name,
        offset,
        hw_before,
    )
    return PartitionStory(name, offset, replicas, at_send, _fit(events, window_end))


def _replicas(states: list[Record], on_partition: Callable[[Record], bool], name: str) -> list[str]:
    """The brokers holding the partition's replicas: those that changed their replica of it,
    and those the controller named leader, in the ISR or in the ELR."""
    found: set[str] = set()
    for r in states:
        d = r["detail"]
        if on_partition(r):
            if r["node"] != "controller":
                found.add(r["node"])
            else:
                found.update(b for b in (d.get("isr") or []) if b)
                found.update(b for b in (d.get("elr") or []) if b)
                if d.get("leader"):
                    found.add(d["leader"])
        elif r["event"] == "power_loss" and name in (d.get("cut") or {}):
            found.add(r["node"])
    return sorted(found, key=node_key)


def _concerns(r: Record, on_partition: Callable[[Record], bool], replicas: set[str]) -> bool:
    if on_partition(r):
        return True
    if r["topic"] is not None:
        return False  # another partition
    if r["node"] == "controller":
        return r["detail"].get("broker") in replicas
    return r["node"] in replicas and r["event"] in BROKER_LIFE


def _state_at(
    records: Iterable[Record],
    on_partition: Callable[[Record], bool],
    when: float,
    replicas: list[str],
) -> tuple[str, int, str | None]:
    """The partition at ``when``: its leader, leader epoch and ISR as text, the epoch (-1
    when nothing says) and the leader (None when none)."""
    leader: str | None = None
    epoch = -1
    isr: list[str] = list(replicas)
    for r in records:
        if r["time"] > when:
            break
        if not on_partition(r):
            continue
        d, event = r["detail"], r["event"]
        if event in ("leader_elected", "offline"):
            leader = d.get("leader") if event == "leader_elected" else None
            epoch = d.get("leader_epoch", epoch)
            isr = list(d.get("isr") or [])
        elif event == "isr_changed":
            isr = list(d.get("isr") or [])
        elif event == "became_leader" and d.get("leader_epoch", -1) >= epoch:
            leader, epoch = r["node"], d.get("leader_epoch", epoch)
            if d.get("isr") is not None:
                isr = list(d["isr"])
    who = f"leader {leader}" if leader else "no leader"
    at = f" at epoch {epoch}" if epoch >= 0 else ""
    return f"{who}{at}, ISR [{','.join(isr)}]", epoch, leader


def _cut_of(r: Record, on_partition: Callable[[Record], bool], name: str) -> tuple[int, int] | None:
    """(log end before, after) of a truncation or a power loss of the partition's replica."""
    d = r["detail"]
    if r["event"] == "truncated" and on_partition(r):
        return d.get("log_end_offset"), d.get("to")
    if r["event"] == "power_loss":
        cut = (d.get("cut") or {}).get(name)
        if cut is not None:
            return cut[0], cut[1]
    return None


def _decisive(
    later: list[Record],
    on_partition: Callable[[Record], bool],
    name: str,
    offset: int | None,
    appended: float,
    epoch: int,
    leader: str | None,
) -> dict[int, tuple[str, str]]:
    """Index in ``later`` -> (a few words, a sentence) for each decisive event. ``epoch`` and
    ``leader`` are the partition's when the record was appended (that leader holds it)."""
    out: dict[int, tuple[str, str]] = {}
    cuts: list[tuple[int, str]] = []  # (index, broker) of each cut of the record's offset
    leaders_without: list[int] = []  # became_leader of a replica without the record
    for i, r in enumerate(later):
        if offset is None or r["time"] < appended:
            continue
        cut = _cut_of(r, on_partition, name)
        if cut is not None and None not in cut and cut[1] <= offset < cut[0]:
            cuts.append((i, r["node"]))
        d = r["detail"]
        if (
            r["event"] == "became_leader"
            and on_partition(r)
            and d.get("leader_epoch", -1) > epoch
            and d.get("log_end_offset", offset + 1) <= offset
        ):
            leaders_without.append(i)
    elected_without: dict[int, int] = {}  # leader_elected index -> its became_leader index
    for j in leaders_without:
        node, d = later[j]["node"], later[j]["detail"]
        for i in range(j - 1, -1, -1):
            e = later[i]
            if (
                e["event"] == "leader_elected"
                and on_partition(e)
                and e["detail"].get("leader") == node
                and e["detail"].get("leader_epoch") == d.get("leader_epoch")
            ):
                elected_without[i] = j
                break
    # Which cuts count. Until a leader without the record is elected, a cut is made good
    # when a leader holding the record leads after it (the replica can fetch it again):
    # the leader it was appended to, until it is cut itself, then each new leader whose log
    # reaches past the offset. The cut that took the record from a leader-to-be without it,
    # and every cut from that election on, count.
    elections = [
        min([j, *(i for i, k in elected_without.items() if k == j)]) for j in leaders_without
    ]
    first = min(elections, default=len(later))
    holder, holds = leader, leader is not None
    cut_at = dict(cuts)
    counted: set[int] = set()
    pending: list[int] = []
    for i, r in enumerate(later[:first]):
        if i in cut_at:
            if cut_at[i] == holder:
                holds = False
            if not holds:
                pending.append(i)
        d = r["detail"]
        if (
            offset is not None
            and r["event"] == "became_leader"
            and on_partition(r)
            and d.get("leader_epoch", -1) > epoch
        ):
            holder, holds = r["node"], d.get("log_end_offset", -1) > offset
            if holds:
                pending = []  # made good
    counted.update(pending)
    counted.update(i for i, _ in cuts if i >= first)
    for j in leaders_without:
        own = [i for i, node in cuts if node == later[j]["node"] and i < j]
        if own:
            counted.add(own[-1])
    for i in sorted(counted):
        r = later[i]
        before, after = _cut_of(r, on_partition, name) or (None, None)
        if r["event"] == "power_loss":
            why = (
                f"power loss on {r['node']}: the page cache is lost, {name} is cut from "
                f"{before} to {after}, offset {offset} with it"
            )
        else:
            why = (
                f"{r['node']} truncates {name} from {before} to {after} "
                f"({r['detail'].get('reason')}): offset {offset} is cut"
            )
        out[i] = (f"cuts offset {offset}", why)
    elected = {j: i for i, j in elected_without.items()}
    for j in leaders_without:
        d = later[j]["detail"]
        # Said once, by the election, when the controller's election is in the log.
        why = (
            ""
            if j in elected
            else f"{later[j]['node']} leads {name} at epoch {d.get('leader_epoch')} with its "
            f"log ending at {d.get('log_end_offset')}: without offset {offset}"
        )
        out[j] = (f"leads without offset {offset}", why)
    for i, r in enumerate(later):
        if r["event"] != "leader_elected" or not on_partition(r):
            continue
        d = r["detail"]
        unclean = bool(d.get("unclean"))
        if i not in elected_without and not unclean:
            continue
        how = "unclean election" if unclean else "election"
        short = f"{how} of a leader without offset {offset}" if i in elected_without else how
        why = f"the controller elects {d.get('leader')} for {name} at epoch {d.get('leader_epoch')}"
        if i in elected_without:
            end = later[elected_without[i]]["detail"].get("log_end_offset")
            why += f": its log ends at {end}, without offset {offset}"
        if unclean:
            why += " (unclean: a replica out of the ISR)"
        out[i] = (short, why)
    return out


def _note_hw(r: Record, on_partition: Callable[[Record], bool], hw: dict[str, int]) -> None:
    """Follow each leader's HW (its moves, and where a new leader starts it)."""
    if on_partition(r) and r["event"] in ("high_watermark", "became_leader"):
        value = r["detail"].get("high_watermark")
        if value is not None:
            hw[r["node"]] = value


@dataclass
class _Run:
    """A run of HW moves of one leader, or of refused registrations of one broker."""

    event: Event
    first: int | None = None  # HW before the run
    last: int | None = None
    passed: float | None = None  # when the HW passed the record's offset


def _collapse(
    chosen: list[tuple[Record, tuple[str, str] | None]],
    on_partition: Callable[[Record], bool],
    name: str,
    offset: int | None,
    hw: dict[str, int],
) -> list[Event]:
    """The chosen changes as lines, runs of HW moves and of refused registrations collapsed.
    A run of HW moves of a leader goes on until another change of the partition or of that
    broker's life; a run of refusals of a broker, until another change of that broker."""
    events: list[Event] = []
    hw_runs: dict[str, _Run] = {}
    refusals: dict[str, _Run] = {}

    def close_hw(node: str | None = None) -> None:
        for key in [k for k in hw_runs if node is None or k == node]:
            run = hw_runs.pop(key)
            e = run.event
            moves = f" ({e.count} moves)" if e.count > 1 else ""
            start = f"{run.first} -> " if run.first is not None else ""
            e.label = f"{name}: HW {start}{run.last}{moves}"
            if run.passed is not None:
                e.label += f"; passes offset {offset} at {run.passed:.3f}"
            if e.count == 1:
                e.end_time = None

    def close_refusals(broker: str | None) -> None:
        run = refusals.pop(broker, None) if broker is not None else None
        if run is not None and run.event.count > 1:
            run.event.label = f"refuses to register {broker} {run.event.count} times"

    for r, decisive in chosen:
        event, node, d, time = r["event"], r["node"], r["detail"], r["time"]
        if event == "high_watermark" and on_partition(r):
            value = d.get("high_watermark")
            before = hw.get(node)
            hw[node] = value
            run = hw_runs.get(node)
            if run is None:
                run = _Run(Event(time, node, event, r["label"]), first=before)
                hw_runs[node] = run
                events.append(run.event)
            else:
                run.event.count += 1
            run.event.end_time = time
            run.last = value
            if (
                offset is not None
                and run.passed is None
                and value is not None
                and (before is None or before <= offset)
                and value > offset
            ):
                run.passed = time
            continue
        if event == "registration_refused" and node == "controller" and decisive is None:
            broker = d.get("broker")
            run = refusals.get(broker)
            if run is None:
                refusals[broker] = _Run(Event(time, node, event, r["label"]))
                events.append(refusals[broker].event)
            else:
                run.event.count += 1
                run.event.end_time = time
            continue
        # Anything else ends the runs it concerns.
        if on_partition(r):
            close_hw()
        elif node != "controller":
            close_hw(node)
        if node == "controller":
            close_refusals(d.get("broker"))
        elif event in REFUSAL_BREAKERS:
            close_refusals(node)
        _note_hw(r, on_partition, hw)
        e = Event(time, node, event, _label(r, name))
        if decisive is not None:
            e.decisive, e.why = decisive
        events.append(e)
    close_hw()
    for broker in list(refusals):
        close_refusals(broker)
    return events


def _label(r: Record, name: str) -> str:
    """The record's label; a power loss names only this partition's cut."""
    d = r["detail"]
    if r["event"] == "became_follower" and d.get("leader") is None:
        return (
            f"{name}: no leader to follow at epoch {d.get('leader_epoch')}, log end "
            f"{d.get('log_end_offset')}"
        )
    if r["event"] != "power_loss":
        return r["label"]
    cut = (r["detail"].get("cut") or {}).get(name)
    others = len(r["detail"].get("cut") or {}) - (cut is not None)
    if cut is None:
        text = "power loss: page cache lost"
        return text + (f", {others} other partition(s) cut" if others else "")
    more = f" (and {others} other partition(s))" if others else ""
    return f"power loss: page cache lost, {name} cut {cut[0]}->{cut[1]}{more}"


def _fit(events: list[Event], window_end: float) -> list[Event]:
    """At most :data:`MAX_EVENTS` lines: first the routine steps of restarts and the HW moves
    after the window go, then whatever after it is not among the :data:`LEAD_UP` lines before
    a decisive event; each gap becomes one line."""
    if len(events) <= MAX_EVENTS:
        return events
    keep = [e.time <= window_end or bool(e.decisive) or not _routine(e) for e in events]
    if sum(keep) > MAX_EVENTS:
        near = [e.time <= window_end or bool(e.decisive) for e in events]
        for j, e in enumerate(events):
            if not e.decisive:
                continue
            shown = 0
            for i in range(j - 1, -1, -1):
                if shown >= LEAD_UP:
                    break
                if keep[i] and not near[i]:
                    near[i] = True
                    shown += 1
        keep = [k and n for k, n in zip(keep, near, strict=True)]
    out: list[Event] = []
    gap: list[Event] = []
    routine: list[Event] = []  # left out between kept lines, and nothing but routine

    def flush() -> None:
        if gap and all(_routine(e) for e in gap):
            routine.extend(gap)
        elif gap:
            out.append(_gap(gap, "partition events"))
        gap.clear()

    for e, k in zip(events, keep, strict=True):
        if k:
            flush()
            out.append(e)
        else:
            gap.append(e)
    flush()
    if routine:  # said once, at the end
        line = _gap(routine, "routine steps")
        line.time, line.end_time = out[-1].time if out else line.time, None
        out.append(line)
    return out


def _routine(e: Event) -> bool:
    """A routine step of a restart (the broker's own registration too: the controller's says
    it), or HW moves."""
    return (
        e.event in ROUTINE
        or e.event == "high_watermark"
        or (e.event == "registered" and e.node != "controller")
    )


def _gap(events: list[Event], what: str) -> Event:
    """One line for events left out: how many, of which kinds, from when until when."""
    kinds = Counter(e.event for e in events)
    which = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    count = sum(e.count for e in events)
    return Event(
        events[0].time,
        "",
        "omitted",
        f"... {count} {what} left out ({which})",
        end_time=max(e.end_time or e.time for e in events),
    )
