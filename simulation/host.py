"""Hosts and the processes on them: the CPU side of the resource model (``cluster.resources``).

Kafka's replication lag and its latency tails come from what the unbounded model leaves out:
request handler and network threads, the cores the processes of a machine share, garbage
collection and a JVM's warm-up (docs/calibration.md). With ``cluster.resources`` set, every
process the resource model knows (brokers; the applications, as load) runs on a
:class:`Host`, and each is a :class:`Jvm`:

* a :class:`Host` has ``cores``, shared by the processes placed on it. CPU work is *booked*
  on a calendar: a piece of work ready at time ``t`` with a cost of ``c`` ms starts on the core
  that frees first (or at ``t``) and holds it for ``c``; since the simulation books work in
  time order, this is first-come first-served over the cores, a non-preemptive stand-in for
  the operating system's scheduler (whose time slices, 3-4 ms under CFS on a loaded machine,
  are longer than most of this work). A process's work that finds every core busy ends
  ``scheduler.wakeup_ms`` after its core frees: the scheduler's latency for a woken thread
  (the core goes on to the next work), fitted so that the brokers wait for a core the share of
  their runnable time Kafka's threads do. Booking costs no simulation event: the caller waits
  once, until the work's end;
* a :class:`Jvm` is one process's common fate: **stop-the-world pauses** (young garbage
  collections, driven by allocation: each request allocates, and every ``young_mb`` allocated
  stops every thread of the process for a pause drawn from a lognormal; and a ``pause``
  fault's SIGSTOP), which stretch every piece of work in progress (:meth:`Jvm.finish`), and
  **warm-up**: for ``warmup.seconds`` after the process starts, its work costs up to
  ``warmup.factor`` times more, decaying exponentially (a cold JIT and cold caches); and its
  **start** can be CPU work of its own (:meth:`Jvm.run`, ``resources.startup``), handed a core
  a slice at a time so that a busy host stretches it.

To give another kind of process CPU, a host and pauses: give it a :class:`Jvm` on its host
(:meth:`HostPlan.jvm`), book its work with :meth:`Jvm.book` and wait until the returned end,
call :meth:`Jvm.allocate` for what the work allocates, and ask :meth:`Jvm.finish` for the end
past the pauses before acting on it (see :mod:`eosim.simulation.broker.request_handler_pool`).
To give a process CPU it spends whatever it is asked (timers, a JIT), add a
:class:`Background` to its host (:meth:`Host.add_background`) and call
:meth:`Host.before_change` before anything its ``running`` reads changes (see
:meth:`eosim.simulation.resources.Machines.start_background`).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import simpy

from eosim.simulation.rng import RandomStream


class Host:
    """A machine's cores, booked first-come first-served (see the module docstring).
    ``wakeup_ms`` is the scheduler's latency for a thread woken while every core is busy
    (:meth:`book`'s ``woken``)."""

    __slots__ = (
        "_env",
        "_free",
        "_next",
        "_resync",
        "_sources",
        "busy_ms",
        "cores",
        "late_ms",
        "name",
        "wakeup_ms",
    )

    def __init__(self, name: str, cores: int, wakeup_ms: float = 0.0) -> None:
        if cores < 1:
            raise ValueError(f"host {name}: a host has at least one core, not {cores}")
        self.name = name
        self.cores = cores
        self.wakeup_ms = wakeup_ms
        self._free = [0.0] * cores  # a heap of the moments each core frees
        # CPU booked so far; a background burst counts once booked (:meth:`catch_up`).
        self.busy_ms = 0.0
        # The scheduler's latency paid so far by woken threads (:meth:`book`).
        self.late_ms = 0.0
        # The background's sources, the earliest of their next moments, and its clock.
        self._sources: list[Background] = []
        self._next = math.inf
        self._resync = False  # a process's state changed: its sources re-read it
        self._env: simpy.Environment | None = None

    def add_background(self, env: simpy.Environment, source: Background) -> None:
        """Run ``source``'s bursts on this host from now on. They are booked lazily: when the
        host is next asked to book or for its :meth:`earliest` core, every burst due by then
        is booked first, at its own moment and in order (so the calendar is the one that
        booking each burst as it came would give, without a simulation event per burst). A
        change to what a source reads (its process dies, stops, resumes or restarts) must be
        preceded by :meth:`before_change`, so that the bursts before it are judged as they
        were and the sources re-read the process after it."""
        if self._sources and source.burst_ms != self._sources[0].burst_ms:
            raise ValueError(
                f"host {self.name}: its background sources share one burst length "
                f"({self._sources[0].burst_ms} ms), not {source.burst_ms} ms"
            )
        self._env = env
        self._sources.append(source)
        self._next = min(self._next, source.start())

    def before_change(self, now: float) -> None:
        """Book every background burst due by ``now``: a process on this host is about to
        die, stop, resume or restart. The next catch-up has the sources re-read it (a
        restart begins a new JIT)."""
        self.catch_up(now)
        if self._sources:
            self._resync = True
            self._next = -math.inf

    def catch_up(self, now: float) -> None:
        """Book every background burst due by ``now``, in the order of their moments (each
        source's drawn in its own order, then merged)."""
        if self._next > now:
            return
        moments: list[float] = []
        following = math.inf
        resync, self._resync = self._resync, False
        for source in self._sources:
            if resync:
                source.sync()
            if source.next <= now:
                source.collect(now, moments)
            if source.next < following:
                following = source.next
        self._next = following
        if not moments:
            return
        moments.sort()
        free, burst, replace = self._free, self._sources[0].burst_ms, heapq.heapreplace
        for moment in moments:
            first = free[0]
            replace(free, (first if first > moment else moment) + burst)
        self.busy_ms += burst * len(moments)

    def book(self, ready: float, cost: float, woken: bool = False) -> float:
        """Run ``cost`` ms of work ready at ``ready`` on the core that frees first; the
        moment it ends. Work a thread is ``woken`` for that finds every core busy ends
        ``wakeup_ms`` later than its core frees: the scheduler's latency, which booking whole
        pieces of work first-come first-served does not have (a Linux thread woken while every
        core is busy waits in a run queue whose threads take turns in slices; docs/model.md,
        departure 16). The core itself is not held longer: Linux's scheduler leaves no core
        idle while a thread can run, so the latency delays the woken thread only, not the
        work booked after it."""
        if self._sources and self._next <= self._env.now:  # type: ignore[union-attr]
            self.catch_up(self._env.now)  # type: ignore[union-attr]
        free = self._free
        busy = free[0] > ready
        start = free[0] if busy else ready
        end = start + cost
        heapq.heapreplace(free, end)
        self.busy_ms += cost
        if busy and woken:
            self.late_ms += self.wakeup_ms
            return end + self.wakeup_ms
        return end

    def earliest(self) -> float:
        """When the next core frees."""
        if self._sources:
            self.catch_up(self._env.now)  # type: ignore[union-attr]
        return self._free[0]


class Background:
    """CPU a process spends whatever it is asked (its timers, the JIT compiling after a
    start): bursts of ``burst_ms`` on one core of its host at the moments of two independent
    Poisson processes, kept while ``running()`` says the process runs. The steady part runs
    at ``base_ms`` per second (moments drawn from ``rng``); the JIT's part, after each start
    of the :class:`Jvm`, at ``jit_ms`` per second decaying with ``seconds`` and over after
    20 of them (moments drawn from ``jit_rng`` by inverting its cumulative rate, a new
    sequence from each start). Together their rate is the process's, ``base + jit *
    exp(-age / seconds)``, and every drawn moment is a burst unless the process is down:
    no moment is drawn to be thrown away, as thinning from the peak rate would. Each part's
    moments follow one another in a fixed order from its own stream, however often the host
    asks, so booking them lazily gives the calendar an event per burst would.
    Its :class:`Host` books the bursts (:meth:`Host.add_background`).

    To give a process another kind of background, add a source with the same three members
    (:meth:`start`, :meth:`sync`, :meth:`collect`) and :attr:`next`."""

    __slots__ = (
        "_base_gap",
        "_base_uniform",
        "_jit_for",
        "_jit_mass",
        "_jit_scale",
        "_jit_total",
        "_jit_uniform",
        "base_ms",
        "base_next",
        "burst_ms",
        "jit_ms",
        "jit_next",
        "jit_rng",
        "jvm",
        "next",
        "rng",
        "running",
        "seconds",
    )

    def __init__(
        self,
        jvm: Jvm,
        base_ms: float,
        jit_ms: float,
        seconds: float,
        burst_ms: float,
        running: Callable[[], bool],
        rng: RandomStream,
        jit_rng: RandomStream,
    ) -> None:
        self.jvm = jvm
        self.base_ms = base_ms
        self.jit_ms = jit_ms
        self.seconds = seconds
        self.burst_ms = burst_ms
        self.running = running
        self.rng = rng
        self.jit_rng = jit_rng
        # The steady part: a mean gap in ms (none without a rate).
        self._base_gap = 1000.0 * burst_ms / base_ms if base_ms > 0 else math.inf
        # The JIT's part after a start: its cumulative rate, in bursts, to an age of a ms is
        # scale * (1 - exp(-a / (1000 * seconds))); it ends at 20 * seconds (total).
        self._jit_scale = jit_ms * seconds / burst_ms if jit_ms > 0 else 0.0
        self._jit_total = self._jit_scale * -math.expm1(-20.0)
        self._jit_mass = 0.0
        self._jit_for: float | None = None  # the start the JIT's moments belong to
        self.base_next = math.inf
        self.jit_next = math.inf
        self.next = math.inf  # the next drawn moment of either part, once started

    def start(self) -> float:
        """Draw the first moments (the run starts at 0); the earliest. Each part draws from
        its stream alone from here on, through the stream's uniforms' iterator
        (:meth:`RandomStream.uniforms`: the numbers :meth:`RandomStream.random` would give,
        without a call per draw)."""
        self._base_uniform = self.rng.uniforms().__next__
        self._jit_uniform = self.jit_rng.uniforms().__next__
        if self.base_ms > 0:
            self.base_next = -self._base_gap * math.log(1.0 - self._base_uniform())
        self.sync()
        return self.next

    def sync(self) -> None:
        """Start the JIT's moments afresh if the JVM has started since they were drawn (the
        old JVM's are void), and set :attr:`next`. The host calls it after a change to the
        process (:meth:`Host.before_change`)."""
        started = self.jvm.started
        if started != self._jit_for:
            self._jit_for = started
            self._jit_mass = 0.0
            self.jit_next = math.inf
            if self._jit_scale > 0 and started > -math.inf:
                self._jit_draw()
        self.next = min(self.base_next, self.jit_next)

    def _jit_draw(self) -> None:
        """The JIT's next moment past the last: its cumulative rate grows by an exponential
        draw; none once that passes the total."""
        mass = self._jit_mass - math.log(1.0 - self._jit_uniform())
        if mass >= self._jit_total:
            self.jit_next = math.inf
            return
        self._jit_mass = mass
        age = -1000.0 * self.seconds * math.log1p(-mass / self._jit_scale)
        self.jit_next = self._jit_for + age  # type: ignore[operator]

    def collect(self, bound: float, bursts: list[float]) -> None:
        """Add to ``bursts`` the moments of this source's bursts (each ``burst_ms`` long):
        the drawn moments of either part up to ``bound`` while the process runs; and draw on
        past it (:attr:`next`). Whether the process runs and when its JVM started cannot change
        within (:meth:`Host.add_background`), so they are read once (a restart's new JIT is
        drawn by :meth:`sync` before). The steady part's exponential draw is written out
        inline (this loop runs once per burst)."""
        running = self.running()
        moment = self.base_next
        if moment <= bound:
            uniform, log, gap = self._base_uniform, math.log, self._base_gap
            if running:
                append = bursts.append
                while moment <= bound:
                    append(moment)
                    moment -= gap * log(1.0 - uniform())
            else:
                while moment <= bound:
                    moment -= gap * log(1.0 - uniform())
            self.base_next = moment
        while self.jit_next <= bound:
            if running:
                bursts.append(self.jit_next)
            self._jit_draw()
        self.next = min(self.base_next, self.jit_next)


@dataclass(frozen=True, slots=True)
class GcSettings:
    """Young collections of a JVM: one every ``young_mb`` allocated, each stopping the
    process for a lognormal pause (median ``pause_ms``, log-sd ``pause_sigma``); ``young_mb``
    0: none."""

    young_mb: float = 0.0
    pause_ms: float = 0.0
    pause_sigma: float = 0.0


@dataclass(frozen=True, slots=True)
class WarmupSettings:
    """A fresh process's work costs ``1 + (factor - 1) * exp(-age / seconds)`` times its warm
    cost; ``factor`` 1: no warm-up."""

    factor: float = 1.0
    seconds: float = 1.0


@dataclass(frozen=True, slots=True)
class StartupSettings:
    """A broker process's start as CPU work on its host: ``cpu_ms`` from the process's start
    to its registration with the controller (the JVM, Kafka's start-up, the raft client) and
    ``publish_cpu_ms`` for its first metadata publish (loading its logs, starting its replicas),
    each spread over ``threads`` threads that take a core ``slice_ms`` at a time. ``cpu_ms`` 0:
    the start is the fixed ``cluster.broker_startup`` and the publish is free."""

    cpu_ms: float = 0.0
    publish_cpu_ms: float = 0.0
    threads: int = 2
    slice_ms: float = 4.0


class Jvm:
    """One process: where its work runs (``host``), its pauses and its warm-up (see the
    module docstring). ``rng`` draws its pauses."""

    __slots__ = (
        "_allocated",
        "_stops",
        "gc",
        "gc_pauses",
        "host",
        "name",
        "queued_ms",
        "requests",
        "rng",
        "started",
        "stopped_since",
        "waited_ms",
        "warmup",
        "worked_ms",
    )

    def __init__(
        self,
        name: str,
        host: Host,
        gc: GcSettings,
        warmup: WarmupSettings,
        rng: RandomStream,
        started: float = -math.inf,
    ) -> None:
        self.name = name
        self.host = host
        self.gc = gc
        self.warmup = warmup
        self.rng = rng
        # Warm at the run's start (the real side warms its cluster before each run).
        self.started = started
        # MB allocated since the last young collection: a process that has been running is at
        # some point of its cycle, drawn (processes' collections do not fall together).
        self._allocated = rng.uniform(0.0, gc.young_mb) if gc.young_mb > 0 else 0.0
        # Stop-the-world intervals still of use, (begin, end), in order; a SIGSTOP in force
        # has begun at ``stopped_since``.
        self._stops: deque[tuple[float, float]] = deque()
        self.stopped_since: float | None = None
        self.gc_pauses = 0
        # What its booked work spent waiting for a core and on one (ms): its run-queue wait.
        self.waited_ms = 0.0
        self.worked_ms = 0.0
        # The requests its network threads handed to its handler threads, and their time in
        # the request queue (ms; Kafka's RequestQueueTimeMs): from the read's end to the
        # handling's start, the woken handler's scheduler latency included.
        self.requests = 0
        self.queued_ms = 0.0

    # -- warm-up ---------------------------------------------------------------------------
    def restarted(self, now: float) -> None:
        """A new process: cold again, nothing allocated, no pause in force."""
        self.started = now
        self._allocated = 0.0
        self._stops.clear()
        self.stopped_since = None

    def slowdown(self, now: float) -> float:
        """How many times its warm cost the process's work costs now."""
        w = self.warmup
        if w.factor == 1.0:
            return 1.0
        age_s = (now - self.started) / 1000.0
        if age_s > 20 * w.seconds:
            return 1.0
        return 1.0 + (w.factor - 1.0) * math.exp(-age_s / w.seconds)

    # -- work ------------------------------------------------------------------------------
    def book(self, ready: float, cost: float, woken: bool = True) -> float:
        """Book ``cost`` warm ms of this process's work, ready at ``ready``, on its host; the
        moment it ends (before any pause stretches it). ``woken`` False: the thread goes on
        from work it was doing, without the scheduler's latency (:meth:`Host.book`)."""
        # :meth:`slowdown` and :meth:`_book_on_host` written out: every record a client sends
        # is booked here.
        if self.warmup.factor != 1.0:
            cost = cost * self.slowdown(ready)
        end = self.host.book(ready, cost, woken)
        self.waited_ms += end - cost - ready
        self.worked_ms += cost
        return end

    def record_booker(
        self, ms: float, mb: float, on_pause: Callable[[float], None]
    ) -> Callable[[float], None]:
        """What one record an application hands its producer costs this process: a function
        of the moment that books ``ms`` warm ms on the host as :meth:`book` does (a woken
        thread's work) and allocates ``mb`` as :meth:`allocate` does, calling ``on_pause``
        with the pauses a collection it sets off starts. The same arithmetic as those two,
        written out with the host's heap at hand: every record of every run comes here, and
        the calls the general path makes cost the standard benchmark a tenth of its time
        with the resource model on (docs/performance.md)."""
        host = self.host
        free, sources, replace = host._free, host._sources, heapq.heapreplace
        warmup, young = self.warmup, self.gc.young_mb
        mb = mb if young > 0 else 0.0

        def record(now: float) -> None:
            if ms:
                cost = ms if warmup.factor == 1.0 else ms * self.slowdown(now)
                if sources and host._next <= now:
                    host.catch_up(now)
                first = free[0]
                if first > now:
                    late = host.wakeup_ms
                    end = first + cost
                    replace(free, end)
                    host.busy_ms += cost
                    host.late_ms += late
                    end += late
                else:
                    end = now + cost
                    replace(free, end)
                    host.busy_ms += cost
                self.waited_ms += end - cost - now
                self.worked_ms += cost
            if mb:
                if self._allocated + mb < young:
                    self._allocated += mb
                elif (pause := self.allocate(now, mb)) > 0:
                    on_pause(pause)

        return record

    def _book_on_host(self, ready: float, work: float) -> float:
        """Book ``work`` ms as it is (no warm-up slowdown) on the host, counted in the
        process's run-queue wait and work; the moment it ends."""
        end = self.host.book(ready, work, True)
        self.waited_ms += end - work - ready
        self.worked_ms += work
        return end

    def allocate(self, now: float, megabytes: float) -> float:
        """The process allocated ``megabytes``; past ``young_mb`` a young collection stops it
        now for a drawn pause. How long the pauses it started now last (0: none)."""
        gc = self.gc
        if gc.young_mb <= 0:
            return 0.0
        self._allocated += megabytes
        stopped = 0.0
        while self._allocated >= gc.young_mb:
            self._allocated -= gc.young_mb
            pause = self.rng.lognormal(gc.pause_ms, gc.pause_sigma)
            self.gc_pauses += 1
            self._stop(now + stopped, now + stopped + pause)
            # The collector's one thread (SerialGC) works on a core for the whole pause.
            self.host.book(now + stopped, pause)
            stopped += pause
        return stopped

    def run(
        self,
        env: simpy.Environment,
        cpu_ms: float,
        threads: int,
        slice_ms: float,
        alive: Callable[[], bool],
    ) -> simpy.Event:
        """CPU-bound work of ``cpu_ms`` in all (a process's start) on ``threads`` threads,
        each taking a core ``slice_ms`` at a time and asking for the next slice when its last
        ended, as the operating system's scheduler hands out time slices: on a busy host each
        slice waits behind the work booked before it, so the work stretches with the load. An
        event that fires when every thread is done; the threads stop, and it never fires,
        once ``alive()`` is false (the process died)."""
        done = env.event()
        if cpu_ms <= 0.0:
            done.succeed()
            return done
        left = [threads]

        def thread(share: float) -> Generator[simpy.Event, Any, None]:
            while share > 0.0:
                if not alive():
                    return
                cost = slice_ms if share > slice_ms else share
                share -= cost
                start = env.now
                end = self.finish(start, self._book_on_host(start, cost) - start)
                yield env.timeout(end - start)
            left[0] -= 1
            if left[0] == 0 and alive():
                done.succeed()

        for _ in range(threads):
            env.process(thread(cpu_ms / threads))
        return done

    # -- pauses ----------------------------------------------------------------------------
    def _stop(self, begin: float, end: float) -> None:
        stops = self._stops
        if stops and begin <= stops[-1][1]:
            last = stops.pop()
            stops.append((last[0], max(last[1], end)))
        else:
            stops.append((begin, end))
        while len(stops) > 64:
            stops.popleft()

    def paused(self, now: float) -> None:
        """A SIGSTOP (a ``pause`` fault): every thread stops until :meth:`resumed`."""
        if self.stopped_since is None:
            self.stopped_since = now

    def resumed(self, now: float) -> None:
        if self.stopped_since is not None:
            self._stop(self.stopped_since, now)
            self.stopped_since = None

    def stopped_until(self, now: float) -> float | None:
        """When a collection in force now ends (None: the process runs, or a SIGSTOP holds it,
        which ends at :meth:`resumed`)."""
        for begin, end in reversed(self._stops):
            if begin <= now < end:
                return end
            if end <= now:
                break
        return None

    def finish(self, start: float, cost: float) -> float:
        """When work that began at ``start`` and needs ``cost`` ms of running time ends, the
        process's known pauses taken out (a stopped JVM makes no progress). Pauses begin when
        they are recorded, so once the returned moment has come every pause that could stretch
        the work is known: a caller that waits until then and asks again gets the final end."""
        t, left = start, cost
        for begin, end in self._stops:
            if end <= t:
                continue
            if begin >= t + left:
                break
            if begin > t:
                left -= begin - t
            t = end
        return t + left


@dataclass(frozen=True, slots=True)
class HostPlan:
    """Where each process runs: host name per process, and each host's cores."""

    cores: dict[str, int]
    placement: dict[str, str]
    wakeup_ms: float = 0.0

    def host_of(self, process: str) -> str | None:
        return self.placement.get(process)

    def hosts(self) -> dict[str, Host]:
        return {name: Host(name, cores, self.wakeup_ms) for name, cores in self.cores.items()}


class Spell:
    """A stretch of time a process, or one of its threads, is held by its own work (a
    collection, a request's CPU), which more such work lengthens: :meth:`hold` begins one
    (calling ``begin``) or, while one lasts, adds to its end; ``end`` is called once it is
    over. The holder decides what ending means (a pause fault may still hold the process)."""

    def __init__(
        self, env: simpy.Environment, begin: Callable[[], None], end: Callable[[], None]
    ) -> None:
        self.env = env
        self.begin = begin
        self.end = end
        self.until = -1.0

    @property
    def holding(self) -> bool:
        return self.env.now < self.until

    def hold(self, ms: float) -> None:
        now = self.env.now
        if now < self.until:
            self.until += ms
            return
        self.until = now + ms
        self.begin()
        self._end_at(self.until)

    def _end_at(self, at: float) -> None:
        timer = self.env.timeout(at - self.env.now)

        def over(_event: object) -> None:
            if self.env.now < self.until:
                self._end_at(self.until)  # lengthened meanwhile
            else:
                self.end()

        timer.callbacks.append(over)


__all__ = ["GcSettings", "Host", "HostPlan", "Jvm", "Spell", "StartupSettings", "WarmupSettings"]
