"""Network faults on real processes: one Linux network namespace per node, nftables to cut.

Each node (the controller, the brokers, and each client the runner asks for) runs in its own
namespace ``<prefix>-<node>`` with one veth pair into a bridge (``<prefix>-br``). Addresses, in
``<subnet>.0/24``: ``broker-i`` is ``.i+1``, the controller ``.100``, clients from ``.101`` in
the order they are first asked for, and the host side of the bridge ``.254`` (this process,
which probes the brokers; no fault cuts it).

A fault is one nftables table (``inet eosim_<handle>``) in each namespace it touches, so
:meth:`Network.heal` deletes exactly that fault's rules and nothing else:

- ``partition(groups)``: in every node of a group, drop input from and output to the other
  groups' addresses (one group: cut it off from every other node the network knows);
- ``loss(nodes, links, p)``: drop with probability ``p`` (nft ``numgen random``) every packet a
  listed node sends, and every packet it receives from a node not listed (so a packet crosses
  one lossy filter, not two); a directed link ``(a, b)`` drops ``a``'s packets to ``b``.

Delay needs sch_netem, which this kernel lacks (``tc qdisc ... netem`` fails); it is refused.

Checked on this machine (kernel 6.18, root): ``ip netns``, veth pairs, a bridge, TCP between
namespaces through the bridge and from the host, nft tables inside a namespace (drop and
``numgen random mod`` drop) all work.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

CONTROLLER = "controller"

_probe: str | bool | None = False  # False: not probed yet; None: available; str: why not


class NetnsError(RuntimeError):
    """A namespace, link or nft command failed; the message is one line."""


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


def _check() -> str | None:
    if os.geteuid() != 0:
        return "not running as root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"no {tool!r} command on the PATH"
    name = f"eosim-probe-{os.getpid()}"
    try:
        _run(["ip", "netns", "add", name])
        try:
            _run(["ip", "netns", "exec", name, "nft", "add", "table", "inet", "eosim_probe"])
        finally:
            with contextlib.suppress(NetnsError):
                _run(["ip", "netns", "del", name])
    except (NetnsError, OSError, subprocess.TimeoutExpired) as exc:
        return str(exc).splitlines()[0]
    return None


@dataclass
class Network:
    """The namespaces, veths and bridge of one cluster, and the faults active on them."""

    prefix: str = "eosim"
    subnet: str = "10.77.0"
    addresses: dict[str, str] = field(default_factory=dict)
    faults: dict[str, list[str]] = field(default_factory=dict)  # handle -> namespaces
    _next_client: int = 101
    _next_handle: int = 1

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

    def setup(self, nodes: Sequence[str]) -> None:
        """Remove a previous run's namespaces and bridge, make the bridge and ``nodes``."""
        self.teardown()
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
        _run(["ip", "link", "add", host, "type", "veth", "peer", "name", peer])
        _run(["ip", "link", "set", peer, "netns", ns])
        _run(["ip", "link", "set", host, "master", self.bridge])
        _run(["ip", "link", "set", host, "up"])
        _run(["ip", "-n", ns, "link", "set", peer, "name", "eth0"])
        _run(["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0"])
        _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def _existing(self) -> list[str]:
        out = _run(["ip", "netns", "list"])
        names = [line.split()[0] for line in out.splitlines() if line.strip()]
        return [n for n in names if n.startswith(f"{self.prefix}-")]

    def teardown(self) -> None:
        """Delete every namespace of this prefix (their veths go with them) and the bridge."""
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
                _run([*self.prefix_cmd(node), "nft", "-f", "-"], stdin=script)
                touched.append(self.namespace(node))
        except BaseException:
            self._remove(handle, touched)
            raise
        self.faults[handle] = touched
        return handle

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

    def heal(self, handle: str) -> None:
        """Remove exactly the rules of ``handle`` (a handle healed twice does nothing)."""
        self._remove(handle, self.faults.pop(handle, []))

    def _remove(self, handle: str, namespaces: Sequence[str]) -> None:
        for ns in namespaces:
            with contextlib.suppress(NetnsError):
                _run(
                    ["ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "eosim_" + handle]
                )
