"""Network faults on real processes: one Linux network namespace per node, nftables to cut.

Each node (the controller, the brokers, and each client the runner asks for) runs in its own
namespace ``<prefix>-<node>`` with one veth pair into a bridge (``<prefix>-br``). Addresses, in
``<subnet>.0/24``: ``broker-i`` is ``.i+1``, the controller ``.100``, clients from ``.101`` in
the order they are first asked for, and the host side of the bridge ``.254`` (this process,
which probes the brokers; no fault cuts it).

A fault is one nftables table (``inet eosim_<handle>``) in each namespace it touches, so
:meth:`Network.heal` deletes exactly that fault's rules and nothing else. Each table is read
back after it is loaded (its input and output drop rules counted, ``nft -j list table``) and
checked gone after a heal; either failing raises :class:`NetnsError`, which the real run's
referee turns into an invalid run (:mod:`eosim.real.referee`):

- ``partition(groups)``: in every node of a group, drop input from and output to the other
  groups' addresses (one group: cut it off from every other node the network knows);
- ``loss(nodes, links, p)``: drop with probability ``p`` (nft ``numgen random``) every packet a
  listed node sends, and every packet it receives from a node not listed (so a packet crosses
  one lossy filter, not two); a directed link ``(a, b)`` drops ``a``'s packets to ``b``.

A delay is not an nft table: this kernel has no ``sch_netem`` (``tc qdisc ... netem`` fails)
and nft's own ``queue`` statement is not built, so

- ``delay(nodes, links, extra_ms)``: the packets ``loss`` would select (host traffic aside)
  are held ``extra_ms`` longer by a small process per delayed node
  (:mod:`eosim.real.delayer`), to which two ``iptables-nft ... -j NFQUEUE`` rules in the
  node's namespace hand them (xtables through nftables' compat layer), without
  ``--queue-bypass``: a delayer that dies does not let packets through undelayed, and a
  watcher notes the death (:meth:`Network.take_deaths`), which makes the run invalid. The
  delayer knows each fault by its handle: faults that touch one packet add up, and a pair's
  packets keep their order. After a node's last delay fault is healed, the rules go once the
  packets held have left (a timer: the longest delay it gave plus ``RETIRE_MARGIN_S``); the
  delayer stays, idle, until :meth:`Network.teardown`. ``prepare_delays`` starts delayers
  ahead of their faults (a Python process takes a few hundred ms to start on a busy machine).

Checked on this machine (kernel 6.18, root): ``ip netns``, veth pairs, a bridge, TCP between
namespaces through the bridge and from the host, nft tables inside a namespace (drop and
``numgen random mod`` drop) all work; so does an xtables ``NFQUEUE`` rule through nftables'
compat layer, with verdicts given late (``delay_unavailable_reason`` probes it).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eosim.real import RealError
from eosim.real.delayer import DelayRule, delay_rules

CONTROLLER = "controller"
# After a node's last delay fault heals, its queue rules stay this much longer than the longest
# delay it gave, so the packets it still holds leave before the ones that follow them.
RETIRE_MARGIN_S = 0.25
DELAYER_START_S = 20.0

_probe: str | bool | None = False  # False: not probed yet; None: available; str: why not
_delay_probe: str | bool | None = False


class NetnsError(RealError):
    """A namespace, link or nft command failed, or another cluster holds the namespaces; the
    message is one line (a :class:`RealError`, which the CLI prints as such)."""


def _run(cmd: Sequence[str], stdin: str | None = None) -> str:
    done = subprocess.run(list(cmd), input=stdin, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        err = (done.stderr or done.stdout).strip().splitlines()
        raise NetnsError(f"{' '.join(cmd)}: {err[-1] if err else f'exit {done.returncode}'}")
    return done.stdout


def unavailable_reason() -> str | None:
    """Why namespaces cannot be used here (None: they can). Probed once: root, ``ip`` and
    ``nft`` on the PATH, and a scratch namespace that takes an nft table."""
    global _probe
    if _probe is False:
        _probe = _check()
    return _probe if isinstance(_probe, str) else None


def available() -> bool:
    return unavailable_reason() is None


def iptables() -> str | None:
    """The nftables flavour of iptables (``iptables-nft``, or ``iptables`` when that is it)."""
    found = shutil.which("iptables-nft")
    if found is None and (plain := shutil.which("iptables")) is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run([plain, "-V"], capture_output=True, text=True, timeout=10)
            if "nf_tables" in done.stdout:
                found = plain
    return found


def delay_unavailable_reason() -> str | None:
    """Why delay faults cannot run here (None: they can). Probed once: namespaces, an
    ``iptables-nft`` command, and in a scratch namespace an NFQUEUE rule and a delayer that
    binds its queue."""
    global _delay_probe
    if _delay_probe is False:
        _delay_probe = unavailable_reason() or _check_delay()
    return _delay_probe if isinstance(_delay_probe, str) else None


def _check_delay() -> str | None:
    tool = iptables()
    if tool is None:
        return "no 'iptables-nft' command on the PATH (Debian's iptables package)"
    return _probe_scratch_namespace(
        [_queue_rule(tool, "-A", "OUTPUT", 1, None), [*_delayer_command(1), "--probe"]]
    )


def _queue_rule(tool: str, op: str, chain: str, queue: int, host: str | None) -> list[str]:
    """The iptables command that adds (``-A``/``-I``) or deletes (``-D``) the rule handing
    eth0's packets, those to or from ``host`` excepted, to ``queue``."""
    way, peer = ("-o", "-d") if chain == "OUTPUT" else ("-i", "-s")
    skip = ["!", peer, host] if host else []
    return [
        tool, "-w", op, chain, way, "eth0", *skip,
        "-j", "NFQUEUE", "--queue-num", str(queue),
    ]  # fmt: skip


def _delayer_command(queue: int) -> list[str]:
    """The delayer run as a script (``-I -S``: the standard library only, all it needs), so
    it starts in a fraction of the time importing eosim would take."""
    script = Path(__file__).with_name("delayer.py")
    return [sys.executable, "-I", "-S", str(script), "--queue", str(queue)]


@dataclass
class _Delayer:
    """A node's delayer process, its queue number and the delay faults it holds."""

    node: str
    queue: int
    process: subprocess.Popen[bytes]
    rules: dict[str, DelayRule] = field(default_factory=dict)  # by fault handle
    longest_ms: float = 0.0  # the longest total delay it has given
    queued: bool = False  # whether the rules that hand it the node's packets are in
    retire: threading.Timer | None = None

    def send(self, message: dict[str, object]) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except OSError as exc:
            raise NetnsError(f"the delayer of {self.node} is gone ({exc})") from None


def _check() -> str | None:
    if os.geteuid() != 0:
        return "not running as root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"no {tool!r} command on the PATH"
    return _probe_scratch_namespace([["nft", "add", "table", "inet", "eosim_probe"]])


def _probe_scratch_namespace(commands: Sequence[Sequence[str]]) -> str | None:
    """Run ``commands`` in turn inside a scratch namespace, deleted afterwards: None when all
    succeed, else the first line of the first failure."""
    name = f"eosim-probe-{os.getpid()}"
    try:
        _run(["ip", "netns", "add", name])
        try:
            for command in commands:
                _run(["ip", "netns", "exec", name, *command])
        finally:
            with contextlib.suppress(NetnsError):
                _run(["ip", "netns", "del", name])
    except (NetnsError, OSError, subprocess.TimeoutExpired) as exc:
        return str(exc).splitlines()[0]
    return None


def lock_path(prefix: str) -> Path:
    """The machine-wide lock file of the namespaces ``<prefix>-*`` (see :meth:`Network.setup`)."""
    return Path(tempfile.gettempdir()) / f"eosim-netns-{prefix}.lock"


@dataclass
class Network:
    """The namespaces, veths and bridge of one cluster, and the faults active on them."""

    prefix: str = "eosim"
    subnet: str = "10.77.0"
    addresses: dict[str, str] = field(default_factory=dict)
    faults: dict[str, list[str]] = field(default_factory=dict)  # handle -> namespaces
    delays: dict[str, list[str]] = field(default_factory=dict)  # handle -> delayed nodes
    _next_client: int = 101
    _next_handle: int = 1
    _delayers: dict[str, _Delayer] = field(default_factory=dict)
    _queues: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.RLock = field(default_factory=threading.RLock)
    # Delayers found dead while holding a delay fault, one line each (take_deaths()).
    _deaths: list[str] = field(default_factory=list)
    _watch: threading.Thread | None = None
    _closed: threading.Event = field(default_factory=threading.Event)
    # The open lock file while this network is set up (claim()).
    _claim_fd: int | None = None

    @property
    def bridge(self) -> str:
        return f"{self.prefix[:10]}-br"

    def namespace(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def address(self, node: str) -> str:
        """The node's address; a client's is given out when first asked for."""
        if node not in self.addresses:
            if node == CONTROLLER:
                octet = 100
            elif node.startswith("broker-") and node[7:].isdigit() and int(node[7:]) < 99:
                octet = int(node[7:]) + 1
            else:
                if self._next_client > 250:
                    raise NetnsError(f"no address left for {node!r} in {self.subnet}.0/24")
                octet = self._next_client
                self._next_client += 1
            self.addresses[node] = f"{self.subnet}.{octet}"
        return self.addresses[node]

    def prefix_cmd(self, node: str) -> list[str]:
        return ["ip", "netns", "exec", self.namespace(node)]

    def command_prefix(self, node: str) -> list[str]:
        """The command prefix that runs a process inside ``node``'s namespace (made now)."""
        self.ensure(node)
        return self.prefix_cmd(node)

    # --- set up and tear down -----------------------------------------------------------------

    def claim(self) -> None:
        """Take the machine's lock on the namespaces ``<prefix>-*`` (a file lock, held until
        :meth:`teardown`; the kernel lets go of it when the process dies). Two clusters of one
        prefix share names, addresses and the bridge, and :meth:`setup` deletes what it finds:
        a second one would tear the first down under its run. NetnsError names the holder."""
        if self._claim_fd is not None:
            return
        path = lock_path(self.prefix)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise NetnsError(
                f"another eosim real cluster (pid {holder}) uses the network namespaces "
                f"{self.prefix}-* on this machine: run one at a time (lock {path})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._claim_fd = fd

    def _release(self) -> None:
        fd, self._claim_fd = self._claim_fd, None
        if fd is not None:
            os.close(fd)

    def setup(self, nodes: Sequence[str]) -> None:
        """Take the machine's lock (:meth:`claim`), remove a previous run's namespaces and
        bridge, make the bridge and ``nodes``."""
        self.claim()
        self._remove_all()
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        _run(["ip", "addr", "add", f"{self.subnet}.254/24", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        for node in nodes:
            self.ensure(node)

    def ensure(self, node: str) -> None:
        """``node``'s namespace with its veth on the bridge, if it is not there yet."""
        ns = self.namespace(node)
        if ns in self._existing():
            return
        ip = self.address(node)
        octet = ip.rsplit(".", 1)[1]
        host, peer = f"{self.prefix[:8]}{octet}h", f"{self.prefix[:8]}{octet}n"
        _run(["ip", "netns", "add", ns])
        # A host end left by a namespace deleted by name while a process still held it.
        with contextlib.suppress(NetnsError):
            _run(["ip", "link", "del", host])
        _run(["ip", "link", "add", host, "type", "veth", "peer", "name", peer])
        _run(["ip", "link", "set", peer, "netns", ns])
        _run(["ip", "link", "set", host, "master", self.bridge])
        _run(["ip", "link", "set", host, "up"])
        _run(["ip", "-n", ns, "link", "set", peer, "name", "eth0"])
        _run(["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0"])
        _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        # The delayer holds a node's outgoing packets in the node's own stack, where TCP counts
        # them as not yet sent; with autocorking a second small write waits for the first
        # packet's release and is then held in turn, so an answer written in two pieces (a
        # Kafka fetch answer: header, then the records) would be delayed twice, where a slow
        # link delays it once. Off in every node's namespace (docs/real-cluster.md).
        _run(["ip", "netns", "exec", ns, "sh", "-c", "echo 0 > /proc/sys/net/ipv4/tcp_autocorking"])

    def _existing(self) -> list[str]:
        out = _run(["ip", "netns", "list"])
        names = [line.split()[0] for line in out.splitlines() if line.strip()]
        return [n for n in names if n.startswith(f"{self.prefix}-")]

    @property
    def host(self) -> str:
        """The host's address on the bridge (never cut, never delayed)."""
        return f"{self.subnet}.254"

    def teardown(self) -> None:
        """Stop the delayers, delete every namespace of this prefix (their veths go with them)
        and the bridge, and let go of the machine's lock."""
        try:
            self._remove_all()
        finally:
            self._release()

    def _remove_all(self) -> None:
        self._closed.set()
        with self._lock:
            for delayer in self._delayers.values():
                if delayer.retire is not None:
                    delayer.retire.cancel()
                # Its namespace goes next: what it holds goes with it, no need to let it go.
                with contextlib.suppress(OSError):
                    delayer.process.kill()
                _stop(delayer)
            self._delayers.clear()
            self.delays.clear()
        for ns in self._existing():
            with contextlib.suppress(NetnsError):
                _run(["ip", "netns", "del", ns])
        with contextlib.suppress(NetnsError):
            _run(["ip", "link", "del", self.bridge])
        self.faults.clear()

    # --- faults -------------------------------------------------------------------------------

    def _apply(self, rules: dict[str, tuple[list[str], list[str]]]) -> str:
        """One table per namespace: ``rules[node] = (input rules, output rules)``."""
        handle = f"f{self._next_handle}"
        self._next_handle += 1
        touched: list[str] = []
        try:
            for node, (inp, out) in rules.items():
                if not inp and not out:
                    continue
                self.ensure(node)
                script = (
                    f"table inet eosim_{handle} {{\n"
                    "  chain in { type filter hook input priority 0; policy accept;\n"
                    + "".join(f"    {r}\n" for r in inp)
                    + "  }\n"
                    "  chain out { type filter hook output priority 0; policy accept;\n"
                    + "".join(f"    {r}\n" for r in out)
                    + "  }\n}\n"
                )
                touched.append(self.namespace(node))
                _run([*self.prefix_cmd(node), "nft", "-f", "-"], stdin=script)
                self._read_back(node, handle, len(inp), len(out))
        except BaseException:
            with contextlib.suppress(NetnsError):
                self._remove(handle, touched)
            raise
        self.faults[handle] = touched
        return handle

    def _read_back(self, node: str, handle: str, inp: int, out: int) -> None:
        """Check that ``node``'s namespace holds the fault's table with ``inp`` input and
        ``out`` output rules, each ending in a drop (``nft -j list table``): a rule the kernel
        did not take would leave the fault not in effect."""
        listing = _run(
            [*self.prefix_cmd(node), "nft", "-j", "list", "table", "inet", f"eosim_{handle}"]
        )
        counts = {"in": 0, "out": 0}
        try:
            for item in json.loads(listing).get("nftables", []):
                rule = item.get("rule")
                if rule is None:
                    continue
                drops = any("drop" in expr for expr in rule.get("expr", []))
                if drops and rule.get("chain") in counts:
                    counts[rule["chain"]] += 1
        except (ValueError, AttributeError) as exc:
            raise NetnsError(f"{node}: cannot read back table eosim_{handle} ({exc})") from None
        if counts != {"in": inp, "out": out}:
            raise NetnsError(
                f"{node}: table eosim_{handle} holds {counts['in']} input and {counts['out']} "
                f"output drop rules, not {inp} and {out}"
            )

    def partition(self, groups: Sequence[Sequence[str]]) -> str:
        """Cut every link between two groups; one group is cut off from every other node."""
        parts = [list(g) for g in groups]
        for group in parts:
            for node in group:
                self.address(node)
        if len(parts) == 1:
            parts.append([n for n in self.addresses if n not in parts[0]])
        rules: dict[str, tuple[list[str], list[str]]] = {}
        for i, group in enumerate(parts):
            others = sorted({self.address(n) for j, g in enumerate(parts) if j != i for n in g})
            if not others:
                continue
            addrs = "{ " + ", ".join(others) + " }"
            for node in group:
                inp, out = rules.setdefault(node, ([], []))
                inp.append(f"ip saddr {addrs} drop")
                out.append(f"ip daddr {addrs} drop")
        return self._apply(rules)

    def loss(
        self, nodes: Sequence[str], links: Sequence[tuple[str, str]], probability: float
    ) -> str:
        """Drop packets of ``nodes`` and of the directed ``links`` with ``probability``."""
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"a loss probability is in [0, 1], not {probability}")
        scale = 1_000_000
        cut = min(scale, round(probability * scale))
        drop = "drop" if cut >= scale else f"numgen random mod {scale} < {cut} drop"
        lossy = sorted({self.address(n) for n in nodes})
        rules: dict[str, tuple[list[str], list[str]]] = {}
        for node in nodes:
            inp, out = rules.setdefault(node, ([], []))
            out.append(f'oifname "eth0" {drop}')
            inp.append(f'iifname "eth0" ip saddr != {{ {", ".join(lossy)} }} {drop}')
        for src, dst in links:
            _, out = rules.setdefault(src, ([], []))
            out.append(f"ip daddr {self.address(dst)} {drop}")
        return self._apply(rules)

    def delay(self, nodes: Sequence[str], links: Sequence[tuple[str, str]], extra_ms: float) -> str:
        """Hold the packets of ``nodes`` and of the directed ``links`` ``extra_ms`` longer
        (neither: every node's, as the model's delay without targets)."""
        if not extra_ms > 0:
            raise ValueError(f"a delay is a positive number of ms, not {extra_ms}")
        targets = list(nodes) if nodes or links else list(self.addresses)
        rules = delay_rules(targets, list(links), float(extra_ms), self.address)
        with self._lock:
            handle = f"f{self._next_handle}"
            self._next_handle += 1
            self.delays[handle] = []
            try:
                for node, rule in rules.items():
                    delayer = self._delayer(node)
                    delayer.send(rule.message(handle))
                    delayer.rules[handle] = rule
                    self.delays[handle].append(node)
                    total = sum(r.extra_ms for r in delayer.rules.values())
                    delayer.longest_ms = max(delayer.longest_ms, total)
                    self._queue(delayer)
            except BaseException:
                self.heal(handle)
                raise
            return handle

    def take_deaths(self) -> list[str]:
        """The delayers found dead while they held a delay fault since the last call."""
        with self._lock:
            deaths, self._deaths = self._deaths, []
        return deaths

    def _note_death(self, delayer: _Delayer) -> None:
        """Record that ``delayer`` died holding faults (once)."""
        line = (
            f"the delayer of {delayer.node} (pid {delayer.process.pid}) died, exit "
            f"{delayer.process.returncode}, holding {', '.join(sorted(delayer.rules))}"
        )
        if line not in self._deaths:
            self._deaths.append(line)

    def _watch_delayers(self) -> None:
        """Every 50 ms while the network is up: a delayer that holds a fault must be alive
        (its rules hand every packet of the node to its queue; with nobody reading it they
        are dropped)."""
        while not self._closed.wait(0.05):
            with self._lock:
                for delayer in self._delayers.values():
                    if delayer.rules and delayer.process.poll() is not None:
                        self._note_death(delayer)

    def _start_watch(self) -> None:
        if self._watch is None or not self._watch.is_alive():
            self._closed.clear()
            self._watch = threading.Thread(
                target=self._watch_delayers, name="eosim-delayer-watch", daemon=True
            )
            self._watch.start()

    def prepare_delays(self, nodes: Sequence[str]) -> None:
        """Start the delayers of ``nodes`` now (one takes a few hundred ms to start on a busy
        machine), so that delay faults on them start on time. Idle, a delayer holds nothing:
        no rule hands it packets until a fault does."""
        with self._lock:
            for node in nodes:
                self._delayer(node)

    def _delayer(self, node: str) -> _Delayer:
        """``node``'s delayer, started if it has none (or the one it had died)."""
        old = self._delayers.get(node)
        if old is not None:
            if old.retire is not None:
                old.retire.cancel()
                old.retire = None
            if old.process.poll() is None:
                return old
            # It died (killed by hand?): its rules go, a new one takes its faults over, and a
            # run in which it held a fault is told (the fault was not in effect throughout).
            if old.rules:
                self._note_death(old)
            del self._delayers[node]
            self._unqueue(old)
            _close(old.process)
        self.ensure(node)
        queue = next(self._queues)
        process = subprocess.Popen(
            [*self.prefix_cmd(node), *_delayer_command(queue)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        delayer = _Delayer(node, queue, process)
        _await_ready(delayer)
        self._delayers[node] = delayer
        if old is not None and old.rules:
            for handle, rule in old.rules.items():
                delayer.send(rule.message(handle))
            delayer.rules = dict(old.rules)
            delayer.longest_ms = old.longest_ms
            self._queue(delayer)
        return delayer

    def _queue(self, delayer: _Delayer) -> None:
        """Put in the rules that hand the node's packets to its delayer, if they are not in."""
        if delayer.queued:
            return
        tool = iptables()
        if tool is None:
            raise NetnsError("no 'iptables-nft' command on the PATH (Debian's iptables package)")
        prefix = self.prefix_cmd(delayer.node)
        delayer.queued = True
        for chain in ("OUTPUT", "INPUT"):
            _run([*prefix, *_queue_rule(tool, "-I", chain, delayer.queue, self.host)])
        # Read back: both rules in, handing packets to this delayer's queue, and no bypass.
        rules = _run([*prefix, tool, "-w", "-S"]).splitlines()
        mine = [r for r in rules if "NFQUEUE" in r and f"--queue-num {delayer.queue}" in r]
        if len(mine) != 2 or any("bypass" in r for r in mine):
            raise NetnsError(
                f"{delayer.node}: the queue rules of its delayer did not read back "
                f"({len(mine)} of 2: {mine})"
            )
        self._start_watch()

    def _unqueue(self, delayer: _Delayer) -> None:
        """Take the queue rules out (and iptables' table, when nothing else is in it)."""
        if not delayer.queued:
            return
        delayer.queued = False
        tool = iptables() or "iptables-nft"
        prefix = self.prefix_cmd(delayer.node)
        with contextlib.suppress(NetnsError):
            for chain in ("OUTPUT", "INPUT"):
                _run([*prefix, *_queue_rule(tool, "-D", chain, delayer.queue, self.host)])
            if not any(line.startswith("-A") for line in _run([*prefix, tool, "-S"]).splitlines()):
                _run([*prefix, "nft", "delete", "table", "ip", "filter"])

    def _retire(self, node: str) -> None:
        """The timer after a node's last delay fault healed: its queue rules go (the delayer
        stays, idle), unless a delay fault came back meanwhile."""
        with self._lock:
            delayer = self._delayers.get(node)
            if delayer is not None and not delayer.rules:
                delayer.retire = None
                self._unqueue(delayer)

    def heal(self, handle: str) -> None:
        """Remove exactly the rules of ``handle`` (a handle healed twice does nothing)."""
        with self._lock:
            for node in self.delays.pop(handle, []):
                delayer = self._delayers.get(node)
                if delayer is None or handle not in delayer.rules:
                    continue
                if delayer.process.poll() is not None:
                    self._note_death(delayer)
                del delayer.rules[handle]
                with contextlib.suppress(NetnsError):
                    delayer.send({"remove": handle})
                if not delayer.rules:
                    wait = delayer.longest_ms / 1000.0 + RETIRE_MARGIN_S
                    delayer.retire = threading.Timer(wait, self._retire, (node,))
                    delayer.retire.daemon = True
                    delayer.retire.start()
            self._remove(handle, self.faults.pop(handle, []))

    def delayed(self) -> dict[str, list[str]]:
        """The nodes with a delayer now, and the delay faults each holds."""
        with self._lock:
            return {node: sorted(d.rules) for node, d in self._delayers.items()}

    def _remove(self, handle: str, namespaces: Sequence[str]) -> None:
        """Delete the fault's table from each namespace and check that it is gone; a table
        left behind (its rules still cutting) raises :class:`NetnsError` once every namespace
        was tried."""
        failed: list[str] = []
        table = "eosim_" + handle
        for ns in namespaces:
            with contextlib.suppress(NetnsError):
                _run(["ip", "netns", "exec", ns, "nft", "delete", "table", "inet", table])
            try:
                listed = _run(["ip", "netns", "exec", ns, "nft", "list", "tables"])
            except NetnsError as exc:
                failed.append(f"{ns} ({exc})")
                continue
            if any(line.strip() == f"table inet {table}" for line in listed.splitlines()):
                failed.append(f"{ns} still has table {table}")
        if failed:
            raise NetnsError(f"heal {handle}: {'; '.join(failed)}")


def _await_ready(delayer: _Delayer) -> None:
    """Wait for the delayer's ``ready`` line (its queue is bound); one line if it fails."""
    out = delayer.process.stdout
    assert out is not None
    ready, _, _ = select.select([out], [], [], DELAYER_START_S)
    line = out.readline() if ready else b""
    if line.strip() == b"ready":
        return
    _stop(delayer)
    err = delayer.process.stderr.read().decode(errors="replace") if delayer.process.stderr else ""
    last = err.strip().splitlines()[-1] if err.strip() else "no ready line"
    if not ready:
        last = f"not ready within {DELAYER_START_S:.0f} s"
    raise NetnsError(f"the delayer of {delayer.node} did not start: {last}")


def _stop(delayer: _Delayer) -> None:
    """Close the delayer's input (it lets go of every packet it holds, then exits) and wait."""
    process = delayer.process
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)
    _close(process)


def _close(process: subprocess.Popen[bytes]) -> None:
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
