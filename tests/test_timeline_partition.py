"""A lost write's timeline tells what happened to its partition (issue 17, point 16): the
state changes of the record's partition, its replicas and the controller's changes to them,
with the events that decided the loss marked and summed up."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_timeline_shrink import overflowing_labels

from eosim import api
from eosim.analysis import partition_story as ps
from eosim.analysis import timeline
from eosim.cli import main

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"


def lost_write_timeline(name: str, seed: int = 1, overrides: tuple[str, ...] = ()):
    outcome = api.run(api.load(SCENARIOS / name, list(overrides)), seed, trace=True)
    (lost,) = [t for t in api.timelines(outcome) if t.anomaly == "lost_write"]
    example = outcome.check.anomalies["lost_write"].examples[0]
    return lost, example


def decisive(t: timeline.Timeline) -> list[timeline.Row]:
    return [r for r in t.rows if r.kind == "state" and r.note]


def test_last_replica_standing_names_the_power_loss_and_the_election_without_the_record():
    """kafka.version 4.0 (no ELR): broker-0, the last ISR member, loses power with the record
    in its page cache, is elected again without it, and the others truncate to follow it."""
    t, example = lost_write_timeline("replication-last-replica-standing.yaml")
    offset = example["offset"]
    assert (example["partition"], offset) == (0, 0)
    power, elected, leads, *truncations = decisive(t)
    assert (power.src, power.status, power.note) == ("broker-0", "power_loss", "cuts offset 0")
    assert "events-0 cut 1002->0" in power.label
    assert (elected.src, elected.status) == ("controller", "leader_elected")
    assert "broker-0 leads at epoch 2" in elected.label
    assert elected.note == "election of a leader without offset 0"
    assert (leads.src, leads.status, leads.note) == (
        "broker-0",
        "became_leader",
        "leads without offset 0",
    )
    # The two followers truncate as each next fetches (in either order: their fetch timing).
    assert sorted((r.src, r.status, r.note) for r in truncations) == [
        ("broker-1", "truncated", "cuts offset 0"),
        ("broker-2", "truncated", "cuts offset 0"),
    ]
    # Around them: the fencing that left broker-0 alone in the ISR, its restart and its
    # registration after an unclean shutdown, the refused registrations in one line.
    labels = [r.label for r in t.rows if r.kind == "state"]
    assert "events-0: ISR [broker-0] (fenced)" in labels
    assert "registers broker-0 (broker epoch 4) after an unclean shutdown" in labels
    refused = [r for r in t.rows if r.status == "registration_refused"]
    assert [r.label for r in refused] == ["refuses to register broker-0 6 times"]
    assert refused[0].end_time is not None and refused[0].end_time > refused[0].time
    # The HW moves of the record's time are one line, saying where the record was committed.
    (hw,) = [r for r in t.rows if r.status == "high_watermark"]
    assert "moves); passes offset 0 at" in hw.label
    # Time order, and the lanes: the replicas and the controller after the producer.
    times = [r.time for r in t.rows]
    assert times == sorted(times)
    assert t.lanes == ["producer-0", "broker-0", "broker-1", "broker-2", "controller"]

    text = t.text()
    assert text.splitlines()[2].startswith("partition  events-0, offset 0 (replicas broker-0")
    assert "when sent: leader broker-0 at epoch 0, ISR [broker-0,broker-1,broker-2]" in text
    assert (
        "lost by    20000.000 power loss on broker-0: the page cache is lost, events-0 is cut "
        "from 1002 to 0, offset 0 with it"
    ) in text
    assert "the controller elects broker-0 for events-0 at epoch 2: its log ends at 0" in text
    assert (
        "!   20000.000             broker-0                   power loss: page cache lost" in text
    )
    assert "events-0: truncated from 1002 to 0 (diverging epoch (0, 0))  <== cuts offset 0" in text

    svg = t.svg()
    root = ET.fromstring(svg)
    texts = ["".join(n.itertext()) for n in root.iter("{http://www.w3.org/2000/svg}text")]
    assert (
        "lost by: 20000.000 power loss on broker-0: the page cache is lost, events-0 is cut "
        "from 1002 to 0, offset 0 with it" in texts
    )
    assert "power loss: page cache lost, events-0 cut 1002->0  <== cuts offset 0" in texts
    assert any(s.endswith("<== election of a leader without offset 0") for s in texts)
    assert len(root.findall("{http://www.w3.org/2000/svg}polygon")) == len(decisive(t)) == 5
    assert "controller" in texts  # its lane
    assert overflowing_labels(svg) == []


def test_with_eligible_leader_replicas_nothing_is_lost():
    """The same faults with kafka.version 4.1: no lost write, so no partition story."""
    outcome = api.run(
        api.load(SCENARIOS / "replication-last-replica-standing.yaml", ["kafka.version=4.1"]),
        1,
        trace=True,
    )
    assert outcome.check.anomalies["lost_write"].count == 0
    assert all(r.kind in ("message", "op", "fault") for t in api.timelines(outcome) for r in t.rows)


def test_truncation_to_the_high_watermark_is_named():
    """Before KIP-101: broker-2 truncates to its lagging HW, cutting the acknowledged record,
    and is elected without it; broker-1, back, truncates too."""
    t, example = lost_write_timeline("replication-truncation-hw.yaml")
    offset = example["offset"]
    cut, elected, leads, late = decisive(t)
    assert (cut.src, cut.status, cut.note) == ("broker-2", "truncated", f"cuts offset {offset}")
    assert "(high watermark (before KIP-101))" in cut.label
    assert "broker-2 leads at epoch 2" in elected.label
    assert (leads.src, leads.note) == ("broker-2", f"leads without offset {offset}")
    assert (late.src, late.status) == ("broker-1", "truncated")  # late, still shown
    assert late.time > 30_000
    # broker-1's truncation 535 -> 480 keeps the record's offset: shown, not marked.
    kept = [r for r in t.rows if r.status == "truncated" and "535 to 480" in r.label]
    assert kept and not any(r.note for r in kept)
    text = t.text()
    assert (
        f"broker-2 truncates events-0 from 480 to {offset} (high watermark (before KIP-101)): "
        f"offset {offset} is cut"
    ) in text
    assert (
        f"the controller elects broker-2 for events-0 at epoch 2: its log ends at {offset}" in text
    )
    svg = t.svg()
    assert "high watermark (before KIP-101))  &lt;== cuts offset" in svg
    assert overflowing_labels(svg) == []
    # The crash of broker-1 (a replica) long after the record's acknowledgement is shown.
    assert any(r.kind == "fault" and r.src == "broker-1" for r in t.rows)


def test_a_run_without_losses_shows_no_partition_events():
    outcome = api.run(api.load(SCENARIOS / "at-least-once.yaml"), 1, trace=True)
    assert outcome.check.anomalies["lost_write"].count == 0
    found = api.timelines(outcome)
    assert found  # duplicates
    for t in found:
        assert t.summary == []
        assert all(r.kind in ("message", "op", "fault") for r in t.rows)
        assert "controller" not in t.lanes


def test_eosim_run_timeline_and_svg(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(
            [
                "run",
                str(SCENARIOS / "replication-truncation-hw.yaml"),
                "--timeline",
                "--svg",
                str(tmp_path),
            ]
        )
    out = capsys.readouterr().out
    assert re.search(r"lost by +[0-9.]+ broker-2 truncates events-0 from 480 to 427", out), out
    svg = (tmp_path / "seed-1-lost_write.svg").read_text()
    assert re.search(r"lost by: [0-9.]+ broker-2 truncates events-0", svg)


# -- the story from hand-made state changes -------------------------------------------------
def change(time, node, event, partition=0, label=None, **detail):
    return {
        "time": time,
        "node": node,
        "event": event,
        "topic": "t" if partition is not None else None,
        "partition": partition,
        "label": label or f"{node} {event}",
        "detail": detail,
    }


START = [
    change(
        0.0,
        "broker-0",
        "became_leader",
        leader_epoch=0,
        isr=["broker-0", "broker-1"],
        log_end_offset=0,
        high_watermark=0,
    ),
    change(0.0, "broker-1", "became_follower", leader="broker-0", leader_epoch=0, log_end_offset=0),
]


def story(states, offset=5, sent=10.0, appended=11.0, acked=12.0, after_ack_ms=1.0):
    """The story of t-0 around a record at ``offset``, its window ending at 13 ms."""
    return ps.partition_story(states, "t", 0, offset, sent, appended, acked, after_ack_ms)


def test_hw_moves_collapse_and_say_where_the_record_was_committed():
    moves = [
        change(10.0 + i / 2, "broker-0", "high_watermark", high_watermark=3 + i) for i in range(6)
    ]
    s = story([*START, change(5.0, "broker-0", "high_watermark", high_watermark=2), *moves])
    (hw,) = [e for e in s.events if e.event == "high_watermark"]
    assert hw.label == "t-0: HW 2 -> 8 (6 moves); passes offset 5 at 11.500"
    assert (hw.time, hw.end_time, hw.count) == (10.0, 12.5, 6)
    # An ISR change in between splits the run.
    split = [*moves[:3], change(11.25, "controller", "isr_changed", isr=["broker-0"]), *moves[3:]]
    s = story([*START, *split])
    assert [e.label for e in s.events if e.event == "high_watermark"] == [
        "t-0: HW 0 -> 5 (3 moves)",
        "t-0: HW 5 -> 8 (3 moves); passes offset 5 at 11.500",
    ]


def test_refused_registrations_collapse_until_the_broker_registers():
    refusals = [
        change(100.0 + i, "controller", "registration_refused", None, broker="broker-0")
        for i in range(4)
    ]
    late = [
        change(99.0, "broker-0", "power_loss", None, cut={"t-0": [9, 2]}),
        *refusals[:2],
        change(101.5, "broker-0", "metadata_published", None),  # not the end of the run
        *refusals[2:],
        change(
            104.0, "controller", "registered", None, broker="broker-0", broker_epoch=3, unclean=True
        ),
        change(105.0, "controller", "registration_refused", None, broker="broker-0"),
    ]
    s = story([*START, *late], after_ack_ms=200.0)
    refused = [e for e in s.events if e.event == "registration_refused"]
    assert [(e.label, e.time, e.end_time) for e in refused] == [
        ("refuses to register broker-0 4 times", 100.0, 103.0),
        ("controller registration_refused", 105.0, None),
    ]


def test_the_decisive_events():
    """A cut of the offset that a replica fetched back from a leader that still had it is
    shown unmarked; the cut that took it from the replica elected without it, the election
    and the truncations after it are marked; so is an unclean election."""
    states = [
        *START,
        change(20.0, "broker-1", "truncated", log_end_offset=9, to=4, reason="high watermark"),
        change(30.0, "broker-0", "power_loss", None, cut={"t-0": [12, 3], "u-0": [4, 1]}),
        change(
            31.0,
            "controller",
            "leader_elected",
            leader="broker-1",
            leader_epoch=1,
            isr=["broker-1"],
            unclean=False,
        ),
        change(
            31.5, "broker-1", "became_leader", leader_epoch=1, log_end_offset=12, high_watermark=9
        ),
        change(40.0, "broker-1", "truncated", log_end_offset=12, to=2, reason="diverging epoch"),
        change(
            41.0,
            "controller",
            "leader_elected",
            leader="broker-1",
            leader_epoch=2,
            isr=["broker-1"],
            unclean=True,
        ),
        change(
            41.5, "broker-1", "became_leader", leader_epoch=2, log_end_offset=2, high_watermark=2
        ),
        change(50.0, "broker-0", "truncated", log_end_offset=3, to=2, reason="diverging epoch"),
    ]
    s = story(states)
    marked = [(e.time, e.node, e.decisive) for e in s.events if e.decisive]
    assert marked == [
        (40.0, "broker-1", "cuts offset 5"),
        (41.0, "controller", "unclean election of a leader without offset 5"),
        (41.5, "broker-1", "leads without offset 5"),
    ]
    # broker-0's power loss cut offset 5 too, but broker-0 did not lead again and cut nothing after.
    (power,) = [e for e in s.events if e.event == "power_loss"]
    assert power.label == "power loss: page cache lost, t-0 cut 12->3 (and 1 other partition(s))"
    assert s.reasons() == [
        "40.000 broker-1 truncates t-0 from 12 to 2 (diverging epoch): offset 5 is cut",
        "41.000 the controller elects broker-1 for t-0 at epoch 2: its log ends at 2, "
        "without offset 5 (unclean: a replica out of the ISR)",
    ]
    # The story ends at its last decisive event: broker-0's truncation at 50 is not in it.
    assert s.events[-1].time == 41.5
    # Changes before the record was appended concern another record at that offset.
    early = story(
        [*START, change(10.5, "broker-1", "truncated", log_end_offset=9, to=0, reason="x")]
    )
    assert not any(e.decisive for e in early.events)
    assert len(early.summary()) == 1 and early.reasons() == []


def test_a_cut_counts_unless_a_leader_holding_the_record_leads_after_it():
    """Without a leader change: broker-1's cut while broker-0, which holds the record, leads
    can be fetched back; once broker-0 loses it too, both count. Power lost on every replica
    at once: every cut counts."""
    follower = change(20.0, "broker-1", "truncated", log_end_offset=9, to=4, reason="x")
    leader = change(30.0, "broker-0", "power_loss", None, cut={"t-0": [12, 3]})
    s = story([*START, follower], after_ack_ms=100.0)
    assert not any(e.decisive for e in s.events)
    s = story([*START, follower, leader])
    assert [(e.time, e.decisive) for e in s.events if e.decisive] == [(30.0, "cuts offset 5")]
    both = change(30.0, "broker-1", "power_loss", None, cut={"t-0": [12, 0]})
    s = story([*START, leader, both])
    assert [(e.node, e.decisive) for e in s.events if e.decisive] == [
        ("broker-0", "cuts offset 5"),
        ("broker-1", "cuts offset 5"),
    ]


def test_the_story_ends_at_its_last_decisive_event_and_skips_other_partitions():
    states = [
        *START,
        change(100.0, "controller", "isr_changed", isr=["broker-0"]),  # after the window: not shown
        change(
            20.0, "controller", "leader_elected", partition=1, leader="broker-1", leader_epoch=1
        ),
        change(20.0, "broker-9", "crash", None),  # not a replica
        change(20.0, "controller", "fenced", None, broker="broker-9"),
    ]
    states.sort(key=lambda r: r["time"])
    s = story(states)
    assert s.events == []  # nothing from the send (10) to the window's end (13)
    late_cut = change(5000.0, "broker-0", "truncated", log_end_offset=9, to=0, reason="x")
    s = story([*states, late_cut])
    assert [e.event for e in s.events] == ["isr_changed", "truncated"]
    assert s.replicas == ["broker-0", "broker-1"]


def test_a_long_story_is_shortened_around_its_decisive_events():
    churn = []
    for i in range(80):
        t = 2000.0 + 100 * i
        churn.append(
            change(
                t,
                "controller",
                "isr_changed",
                isr=["broker-0"] if i % 2 else ["broker-0", "broker-1"],
            )
        )
        churn.append(change(t + 1, "broker-1", "running", None))
    cut = change(10_000.0, "broker-0", "truncated", log_end_offset=9, to=0, reason="x")
    states = sorted([*START, *churn, cut], key=lambda r: r["time"])
    s = story(states)
    assert len(s.events) <= ps.MAX_EVENTS
    gaps = [e for e in s.events if e.event == "omitted"]
    assert gaps and all(e.label.startswith("... ") for e in gaps)
    assert sum(e.count for e in s.events if e.event != "omitted") + sum(
        int(e.label.split()[1]) for e in gaps
    ) == len([r for r in states if r["time"] >= 10.0 and r["time"] <= 10_000.0])
    # The last ISR changes before the cut are kept, the cut marked, the routine steps said
    # once at the end.
    *before, cut_line, routine = s.events
    assert cut_line.decisive == "cuts offset 5"
    assert routine.label == f"... {ps.LEAD_UP} routine steps left out ({ps.LEAD_UP} running)"
    shown = [e for e in before if e.event != "omitted"]
    assert [e.event for e in shown] == ["isr_changed"] * ps.LEAD_UP
    assert [e.time for e in shown] == [2000.0 + 100 * i for i in range(80 - ps.LEAD_UP, 80)]
    (gap,) = [e for e in before if e.event == "omitted"]
    n = 80 - ps.LEAD_UP
    assert gap.label == f"... {2 * n} partition events left out ({n} isr_changed, {n} running)"


def test_partition_story_rows_are_escaped_in_svg():
    states = [
        *START,
        change(30.0, "broker-0", "power_loss", None, cut={"t-0": [12, 3]}),
        change(31.0, "controller", "isr_changed", label="<b>isr</b>", isr=["broker-0"]),
    ]
    trace = [
        {
            "time": 10.0,
            "event": "send",
            "msg": 1,
            "src": "p",
            "dst": "broker-0",
            "kind": "produce",
            "label": "Produce",
            "values": ["v"],
            "correlation": 1,
            "generation": 1,
        },
    ]
    history = [
        {
            "kind": "op",
            "type": "ok",
            "time": 12.0,
            "process": "p/0",
            "value": {"value": "v", "partition": 0, "offset": 5},
        },
    ]
    t = timeline.build(
        "lost_write",
        {"value": "v", "topic": "t", "partition": 0, "offset": 5},
        trace,
        history,
        states,
    )
    svg = t.svg()
    ET.fromstring(svg)
    assert "<b>" not in svg and "&lt;b&gt;isr&lt;/b&gt;" in svg
    assert t.lanes == ["p", "broker-0", "broker-1", "controller"]
    # Not for other anomalies.
    other = timeline.build("duplicate", {"value": "v"}, trace, history, states)
    assert other.summary == [] and all(r.kind != "state" for r in other.rows)


def test_a_loss_no_state_change_explains_says_so():
    """at-most-once: an acks=0 write lost on the network. It has no offset (its completion
    says -1), so there is none to cut, and the timeline says nothing of the partition
    explains it."""
    t, example = lost_write_timeline("at-most-once.yaml")
    assert example["offset"] is None and "@2:-1" in t.text()
    lines = t.text().splitlines()
    assert lines[2].startswith(f"partition  events-{example['partition']} (replicas ")
    assert lines[3] == f"lost by    ({timeline.NOT_EXPLAINED})"
    assert decisive(t) == []
    assert any(r.kind == "message" and r.status == "lost" for r in t.rows)
