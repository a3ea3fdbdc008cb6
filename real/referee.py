"""The referee of a real run: what a run on a real cluster must prove before it counts.

A real run is evidence about Kafka only if what its history says happened did happen: a
pause whose threads never all stopped, a partition whose rules never loaded, a delay whose
delayer died, a broker that never served again, a drain that stopped short, are not the
faults and the final state the history claims. Each rule below is checked while the run goes
(by :mod:`eosim.real.nemesis`, :mod:`eosim.real.cluster`, :mod:`eosim.real.netns` and
:mod:`eosim.real.runner`), and a run that breaks one is **invalid**: its reasons go into
:attr:`eosim.simulation.runner.RunResult.invalid`, the sweep's run table marks it
(``valid``, ``invalid_reason``), and ``eosim calibrate`` leaves it out of every row and counts
it in the report. Each reason is ``"<rule>: <detail>"``; the report groups by rule.

The rules (:data:`RULES`):

- **fault not applied**: a fault's operation failed or could not be confirmed in effect
  before its ``start`` line: every thread of a paused process stopped (``/proc``), nftables
  rules read back from each namespace, the delayer's queue rules read back (a crash is in
  effect once its SIGKILL is sent);
- **fault late**: confirmed in effect more than :data:`LATE_BOUND_MS` after its scheduled
  time (the ``fault`` line carries both, ``scheduled`` and ``time``);
- **fault not undone**: a fault's end failed or could not be confirmed before its ``stop``
  line: a resumed process running again, nftables tables gone from every namespace, a killed
  process reaped before its restart;
- **not back**: a restarted broker (or controller) did not serve again within
  :data:`BACK_TIMEOUT_S` (its ``stop`` line carries ``served``, when it did);
- **delayer died**: a delayer was found dead while it held a delay fault (its rules hand
  packets to a queue nobody reads, and, without ``--queue-bypass``, drop them);
- **faults skipped**: scheduled faults the run never played (cut before their time);
- **workload late**: an application's first operation went more than :data:`LATE_BOUND_MS`
  after its start time (its JVM, warm-up or first metadata took longer than the lead), or a
  reader's warm-up ended that late (its first poll went then);
- **driver died**: an application's driver exited with an error;
- **not warm**: the warm-up load before the run ended with a broker's JIT still compiling
  (its compiler threads' CPU over the last slice above the bound of
  :data:`eosim.real.runner.JIT_SETTLED_MS_PER_S`, after
  :data:`eosim.real.runner.WARMUP_MAX_S`): its request paths are not yet the compiled
  code the model's costs describe, and the JIT takes cores from them;
- **compiling**: a broker's JIT compiler threads ran above
  :data:`eosim.real.runner.JIT_WORKLOAD_MS_PER_S` over the workload's fault-free start (from
  the epoch to the first fault, judged when that is at least
  :data:`eosim.real.runner.JIT_WINDOW_MIN_S` long): a warm-up that settled under its own load
  does not prove the run's load compiled. The first two runs after a cluster start of
  calibration case 5 compiled 68-120 ms/s a broker and lagged 2-8 times more of their records
  by 10 ms or more than the runs after them, which compiled 0-25 ms/s (docs/calibration.md,
  "Kafka's acks=1 tail and the JVMs' pauses"). The runner rehearses the run's load after a
  warm-up so that it keeps this rule (:meth:`eosim.real.runner.RealRun.rehearse`);
- **clock**: a driver's clock is not the runner's (its first reading of the run's time lies
  outside the window in which eosim started it);
- **drain incomplete**: the final drain did not read every partition to its end (a partition
  without a ``log`` line hides its losses), or failed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

# How late a fault may be confirmed in effect after its scheduled time, and how late an
# application's first operation may go after its start time, before the run is invalid.
LATE_BOUND_MS = 250.0
# How long a restarted broker may take to serve again (a JVM start and a catch-up on a loaded
# two-core machine: 2-4.4 s measured, docs/calibration.md) before the run is invalid.
BACK_TIMEOUT_S = 45.0

FAULT_NOT_APPLIED = "fault not applied"
FAULT_LATE = "fault late"
FAULT_NOT_UNDONE = "fault not undone"
NOT_BACK = "not back"
DELAYER_DIED = "delayer died"
FAULTS_SKIPPED = "faults skipped"
WORKLOAD_LATE = "workload late"
DRIVER_DIED = "driver died"
NOT_WARM = "not warm"
COMPILING = "compiling"
CLOCK = "clock"
DRAIN_INCOMPLETE = "drain incomplete"

RULES: tuple[str, ...] = (
    FAULT_NOT_APPLIED,
    FAULT_LATE,
    FAULT_NOT_UNDONE,
    NOT_BACK,
    DELAYER_DIED,
    FAULTS_SKIPPED,
    WORKLOAD_LATE,
    DRIVER_DIED,
    NOT_WARM,
    COMPILING,
    CLOCK,
    DRAIN_INCOMPLETE,
)


class Referee:
    """The reasons one real run is invalid, collected from any thread (the nemesis, the
    restart watchers, the runner), in the order they were found."""

    def __init__(self) -> None:
        self._reasons: list[str] = []
        self._lock = threading.Lock()

    def invalid(self, rule: str, detail: str) -> None:
        """Record that the run broke ``rule`` (one of :data:`RULES`)."""
        if rule not in RULES:
            raise ValueError(f"{rule!r} is not a referee rule ({', '.join(RULES)})")
        with self._lock:
            self._reasons.append(f"{rule}: {detail}")

    def extend(self, rule: str, details: Iterable[str]) -> None:
        for detail in details:
            self.invalid(rule, detail)

    @property
    def reasons(self) -> list[str]:
        with self._lock:
            return list(self._reasons)

    @property
    def valid(self) -> bool:
        return not self.reasons


__all__ = [
    "BACK_TIMEOUT_S",
    "CLOCK",
    "COMPILING",
    "DELAYER_DIED",
    "DRAIN_INCOMPLETE",
    "DRIVER_DIED",
    "FAULTS_SKIPPED",
    "FAULT_LATE",
    "FAULT_NOT_APPLIED",
    "FAULT_NOT_UNDONE",
    "LATE_BOUND_MS",
    "NOT_BACK",
    "NOT_WARM",
    "RULES",
    "WORKLOAD_LATE",
    "Referee",
]
