"""How a run uses Python's cyclic garbage collector.

A run allocates millions of short-lived objects (SimPy events, requests, batches) and keeps a
large heap alive (the logs, the history). With CPython's default thresholds (700, 10, 10) the
collector runs a young collection every 700 allocations and a full one, scanning the whole
heap, every few hundred thousand: on the standard benchmark that was more than half of a run's
wall time (docs/performance.md). :func:`run_collection` gives a run its own collection policy:

* objects that existed before the run are frozen (``gc.freeze``): no collection during the
  run scans them, and they are not the run's garbage;
* during the run a young collection runs every 100,000 net allocations (:data:`RUN_THRESHOLDS`:
  the cycles a run makes, SimPy's process frames and their events, mostly die young and are
  freed there), older generations rarely;
* when the run is over (the caller has dropped the model: a cluster, its SimPy environment
  and its processes form one large cycle), one full collection frees it, scanning only what
  the run allocated, and the objects from before are unfrozen. Memory is then what it was
  before the run plus its result; without that collection the old generation would keep one
  dead model per run until some later full collection (peak RSS 340 MiB instead of 194 MiB
  after three standard runs in one process).

The thresholds in force before are restored afterwards, so code around a run (a sweep task, a
test) keeps its own. Collection never changes a run's course: nothing in the model depends on
when an object is freed (no weak reference or finaliser takes part in it), which the history
digests of every shipped scenario confirm (docs/performance.md).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# (young, middle, old): a young collection every 100,000 net allocations, a middle one every
# 50 young ones, a full one every 100 middle ones (and then only when the heap has grown by a
# quarter since the last, CPython's own rule).
RUN_THRESHOLDS = (100_000, 50, 100)


@contextmanager
def run_collection() -> Iterator[None]:
    """Run the body under :data:`RUN_THRESHOLDS`, the older heap frozen; then collect what
    the body left (its caller must have dropped the model by then), unfreeze and restore the
    thresholds it found."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*RUN_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.collect()
        gc.unfreeze()
