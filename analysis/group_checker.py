"""Check that a consumer group's committed offsets never move backwards (`offset_rewind`).

A group's committed offset for a partition is where its next owner starts. Kafka's group
coordinator keeps the last commit it accepted (last writer wins), so two things can move it
back, and each makes the group process records again: a commit of a lower offset accepted
after a higher one (a late commitAsync, a zombie member that resumes), and a commit written
by a member of a generation that is no longer the group's (the coordinator's generation
check, `ClassicGroup.validateOffsetCommit`, is what refuses it: KIP-447's fencing).

How it judges, from the history's `group` lines only (what the members saw; no coordinator
state), with Jepsen's real-time order (two operations are ordered only when one completed
before the other was invoked):

* An *accepted commit* is a `commit` line without `error`; it was written at some moment
  between its `invoked` time and its `time` (its completion).
* *Rewind*: an accepted commit B of offset o for (group, topic, partition) whose write
  provably followed a higher offset's. The write just before B's was that of a commit
  completed before B was invoked and not known to precede another such one, or of a commit
  concurrent with B; when all of those wrote a higher offset, the group's offset was higher
  just before B and o after it: B moved it back. A commit that only continues from a lower
  offset someone else rewound to is not another rewind. The example names B and the
  lowest of those higher commits.
* *Stale writer*: an accepted commit B naming generation g >= 0, when, before B was invoked,
  some member had already applied an assignment of a later generation (an `assigned` line)
  or had a commit of a later generation accepted. The coordinator's generation had moved
  past g before B reached it, so B was written by a member the group had already replaced.
  Under the classic protocol a generation never goes back (it is stored with the group in
  `__consumer_offsets` and read back when the coordinator moves).

Each flagged commit counts once (with `reasons` listing which of the two it is). Commits that
failed, that were never answered or that overlap in time are never judged: a rewind must be
provable from the history. What it does not judge: transactional offset commits
(`sendOffsetsToTransaction`; their visibility is the transactional checks'), commits of
consumers that record no `group` lines, and KIP-848 member epochs.

The result is deterministic: groups and partitions in sorted order, commits in completion
order, ties broken by line.
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from typing import Any

from eosim.analysis.anomalies import names
from eosim.analysis.checker import Anomaly
from eosim.analysis.history import GroupEvent, History

# Declared in eosim.analysis.anomalies.
GROUP_ANOMALIES = names(check="group_checker")


def check_groups(history: History) -> dict[str, Anomaly]:
    """Every name in `GROUP_ANOMALIES`, with count 0 when absent."""
    anomaly = Anomaly("offset_rewind")
    by_group: dict[str, list[GroupEvent]] = defaultdict(list)
    for event in history.group_events:
        by_group[event.group].append(event)
    for group in sorted(by_group):
        events = by_group[group]
        accepted = [e for e in events if e.event == "commit" and e.error is None]
        flagged: dict[int, dict[str, Any]] = {}
        _rewinds(accepted, flagged)
        _stale_writers(events, accepted, flagged)
        for line in sorted(flagged):
            anomaly.add(flagged[line])
    return {anomaly.name: anomaly}


def _commit(event: GroupEvent) -> dict[str, Any]:
    return {
        "process": event.process,
        "member": event.member,
        "generation": event.generation,
        "epoch": event.epoch,
        "invoked": event.invoked,
        "time": event.time,
    }


def _example(event: GroupEvent, flagged: dict[int, dict[str, Any]]) -> dict[str, Any]:
    example = flagged.get(event.line)
    if example is None:
        example = {"group": event.group, **_commit(event), "reasons": []}
        flagged[event.line] = example
    return example


def _rewinds(accepted: list[GroupEvent], flagged: dict[int, dict[str, Any]]) -> None:
    """Accepted commits that provably moved a partition's offset back (see the module's
    docstring), one partition at a time."""
    commits: dict[tuple[str, int], list[tuple[GroupEvent, int]]] = defaultdict(list)
    for event in accepted:
        for tp, offset in event.offsets.items():
            commits[tp].append((event, offset))
    for tp in sorted(commits):
        for event, offset, before in _moved_back(commits[tp]):
            example = _example(event, flagged)
            if "rewind" not in example["reasons"]:
                example["reasons"].append("rewind")
                example["topic"], example["partition"] = tp
                example["offset"] = offset
                example["earlier"] = {**_commit(before[0]), "offset": before[1]}


_Commit = tuple[GroupEvent, int]  # an accepted commit and the offset it gave one partition


def _moved_back(entries: list[_Commit]) -> list[tuple[GroupEvent, int, _Commit]]:
    """The commits B of one partition whose write provably followed a higher offset's, each
    with the commit that offset came from.

    The write just before B's was one of: the commits *before* B (completed before B was
    invoked) that no other commit before B is known to follow (the latest ones: completed no
    earlier than the last invocation among the commits before B), or a commit *concurrent*
    with B (invoked before B completed, not completed before B was invoked). B moved the
    offset back when every one of those has a higher offset. Commits are visited by
    invocation; the latest ones are a window of the commits before B in completion order
    (a sliding minimum), the concurrent ones still open when B is invoked a heap by offset,
    and those invoked while B is in flight a scan of that span (short: commits of one
    partition rarely overlap)."""
    by_completion = sorted(entries, key=lambda e: (e[0].time, e[0].line))
    by_invocation = sorted(entries, key=lambda e: (e[0].invoked, e[0].line))
    invoked_times = [e[0].invoked for e in by_invocation]
    found: list[tuple[GroupEvent, int, _Commit]] = []
    window: deque[int] = deque()  # indices into by_completion, offsets increasing (sliding minimum)
    start = 0  # the first commit before B that may be the latest
    added = 0  # commits before B so far (a prefix of by_completion)
    last_invoked = float("-inf")
    open_heap: list[tuple[int, float, int]] = []  # (offset, completion, line) of started ones
    started = 0
    for index, (event, offset) in enumerate(by_invocation):
        while added < len(by_completion) and by_completion[added][0].time < event.invoked:
            earlier, earlier_offset = by_completion[added]
            last_invoked = max(last_invoked, earlier.invoked)
            while window and by_completion[window[-1]][1] >= earlier_offset:
                window.pop()
            window.append(added)
            added += 1
        while start < added and by_completion[start][0].time < last_invoked:
            start += 1
        while window and window[0] < start:
            window.popleft()
        while started < index:
            other, other_offset = by_invocation[started]
            heapq.heappush(open_heap, (other_offset, other.time, other.line))
            started += 1
        while open_heap and open_heap[0][1] < event.invoked:
            heapq.heappop(open_heap)
        if not window or by_completion[window[0]][1] <= offset:
            continue
        if open_heap and open_heap[0][0] <= offset:
            continue
        # Commits invoked while B was in flight (after B in invocation order).
        later = index + 1
        concurrent_low = False
        while later < len(by_invocation) and invoked_times[later] < event.time:
            if by_invocation[later][1] <= offset:
                concurrent_low = True
                break
            later += 1
        if not concurrent_low:
            found.append((event, offset, by_completion[window[0]]))
    return found


def _stale_writers(
    events: list[GroupEvent], accepted: list[GroupEvent], flagged: dict[int, dict[str, Any]]
) -> None:
    """Accepted commits naming a generation older than one already seen when invoked: a
    member's assignment of it, or an accepted commit naming it."""
    commits = [e for e in accepted if e.generation is not None and e.generation >= 0]
    assigned = [
        e
        for e in events
        if e.event == "assigned" and e.generation is not None and e.generation >= 0
    ]
    seen = sorted(assigned + commits, key=lambda e: (e.time, e.line))
    commits.sort(key=lambda e: (e.invoked, e.line))
    newest: GroupEvent | None = None
    i = 0
    for event in commits:
        while i < len(seen) and seen[i].time < event.invoked:
            if newest is None or seen[i].generation > newest.generation:  # type: ignore[operator]
                newest = seen[i]
            i += 1
        if newest is None or newest.generation <= event.generation:  # type: ignore[operator]
            continue
        example = _example(event, flagged)
        example["reasons"].append("stale_generation")
        example["offsets"] = [
            {"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(event.offsets.items())
        ]
        example["newer"] = {
            "event": newest.event,
            "process": newest.process,
            "generation": newest.generation,
            "time": newest.time,
        }
