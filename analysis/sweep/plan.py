"""Sweep plans: variants from a parameter grid, runs with derived seeds and drawn parameters.

A variant is one point of the cartesian product of ``--grid`` axes (in the order given, the
last axis varying fastest). A run is one seed of one variant. Run ``r`` of variant ``v`` gets
the seed ``SeedSequence(S, spawn_key=(v, r))``, and its ``--vary`` parameters are drawn from
a sibling stream ``spawn_key=(v, r, 1)``. A run is therefore the same whatever else the sweep
contains and wherever it executes, and ``eosim run ... --seed N --set ...`` replays it alone.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml


class PlanError(ValueError):
    """A bad grid or vary specification (one line, for the user)."""


@dataclass(frozen=True, slots=True)
class GridAxis:
    path: str
    values: tuple[Any, ...]

    @classmethod
    def parse(cls, text: str) -> GridAxis:
        if "=" not in text:
            raise PlanError(f"--grid {text}: expected path=v1,v2,...")
        path, values_text = (part.strip() for part in text.split("=", 1))
        if not path:
            raise PlanError(f"--grid {text}: empty path")
        raw = [v.strip() for v in values_text.split(",")] if values_text.strip() else []
        if not raw or any(v == "" for v in raw):
            raise PlanError(f"--grid {text}: empty value list; give values as path=v1,v2,...")
        return cls(path, tuple(_scalar(v) for v in raw))


_DIST = re.compile(r"^\s*(uniform|loguniform|normal|randint|choice)\s*\((.*)\)\s*$")


@dataclass(frozen=True, slots=True)
class VarySpec:
    path: str
    distribution: str
    args: tuple[Any, ...]

    @classmethod
    def parse(cls, text: str) -> VarySpec:
        if "=" not in text:
            raise PlanError(f"--vary {text}: expected path=DISTRIBUTION")
        path, dist = (part.strip() for part in text.split("=", 1))
        m = _DIST.match(dist)
        if not path or m is None:
            raise PlanError(
                f"--vary {text}: expected path=uniform(a,b), loguniform(a,b), normal(mu,sigma), "
                "randint(a,b) or choice(v1,v2,...)"
            )
        name = m.group(1)
        args = tuple(_scalar(a.strip()) for a in m.group(2).split(",") if a.strip())
        numeric = all(isinstance(a, int | float) and not isinstance(a, bool) for a in args)
        if name == "choice":
            if not args:
                raise PlanError(f"--vary {text}: choice needs at least one value")
        elif len(args) != 2 or not numeric:
            raise PlanError(f"--vary {text}: {name} takes two numbers")
        elif not all(_finite(a) for a in args):
            raise PlanError(f"--vary {text}: {name} takes finite numbers")
        elif name in ("uniform", "loguniform", "randint") and args[0] > args[1]:
            raise PlanError(f"--vary {text}: the low bound is above the high bound")
        elif name == "loguniform" and args[0] <= 0:
            raise PlanError(f"--vary {text}: loguniform needs positive bounds")
        elif name == "normal" and args[1] < 0:
            raise PlanError(f"--vary {text}: normal needs a sigma of at least 0")
        elif name == "randint" and not -(2**63) <= int(args[0]) <= int(args[1]) < 2**63:
            raise PlanError(f"--vary {text}: randint bounds must be 64-bit integers")
        elif name != "randint" and not math.isfinite(float(args[1]) - float(args[0])):
            raise PlanError(f"--vary {text}: the range is too wide")
        return cls(path, name, args)

    def draw(self, rng: np.random.Generator) -> Any:
        a = self.args
        if self.distribution == "uniform":
            return float(rng.uniform(a[0], a[1]))
        if self.distribution == "loguniform":
            # exp(log(x)) may round past a bound; a draw stays within [a, b].
            drawn = float(math.exp(rng.uniform(math.log(a[0]), math.log(a[1]))))
            return min(max(drawn, float(a[0])), float(a[1]))
        if self.distribution == "normal":
            return float(rng.normal(a[0], a[1]))
        if self.distribution == "randint":
            return int(rng.integers(int(a[0]), int(a[1]), endpoint=True))
        return a[int(rng.integers(len(a)))]

    def sample(self) -> Any:
        """A representative value, used to validate the path before running."""
        return self.samples()[0][0]

    def samples(self) -> list[tuple[Any, str]]:
        """(value, note) pairs that stand for every draw, to validate before running: for a
        continuous distribution its bounds and an inner point, as floats like its draws; for
        randint both bounds; every choice; for normal the mean, mean - 6 sd and mean + 6 sd
        (a draw further out has odds of about 1 in 500 million) and an inner point."""
        a = self.args
        if self.distribution == "choice":
            return [(v, "") for v in a]
        if self.distribution == "randint":
            return [(int(a[0]), "the low bound"), (int(a[1]), "the high bound")]
        low, high = float(a[0]), float(a[1])
        if self.distribution == "normal":
            mean, sd = low, high
            return [
                (mean, "the mean"),
                (mean - 6 * sd, "mean - 6 sd"),
                (mean + 6 * sd, "mean + 6 sd"),
                (mean + _INNER * sd, ""),
            ]
        return [(low, "the low bound"), (high, "the high bound"), (_inner(low, high), "")]

    def __str__(self) -> str:
        return f"{self.path}={self.distribution}({','.join(map(str, self.args))})"


# An inner point of a range, as a fraction of its width; not a round number, so that a
# float draw on an integer setting is caught (1 - 1/golden ratio).
_INNER = 0.3819660112501051


def _inner(low: float, high: float) -> float:
    return low + (high - low) * _INNER


def _finite(number: float) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an integer too large for a float
        return False


def _scalar(text: str) -> Any:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if isinstance(value, str | int | float | bool) or value is None else text


def render(value: Any) -> str:
    """A value as it is written after ``--set path=``."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, float):
        return repr(value)
    return str(value)


# Kafka keys whose last word says nothing: shown by a shorter name of their own.
SHORT_ALIASES = {"max.in.flight.requests.per.connection": "max.in.flight"}


def short_names(paths: Sequence[str]) -> dict[str, str]:
    """A short title for each swept parameter path, for table headers and legends: its last
    word (``producers.0.config.enable.idempotence`` -> ``idempotence``), lengthened word by
    word only where two paths would share a title (``0.config.acks``, ``1.config.acks``)."""

    def words(path: str) -> list[str]:
        for long, alias in SHORT_ALIASES.items():
            if path == long or path.endswith("." + long):
                head = path[: -len(long)].rstrip(".")
                return [*(head.split(".") if head else []), alias]
        return path.split(".")

    split = {p: words(p) for p in paths}
    take = dict.fromkeys(paths, 1)
    while True:
        names = {p: ".".join(split[p][-take[p] :]) for p in paths}
        seen: dict[str, list[str]] = {}
        for p in paths:
            seen.setdefault(names[p], []).append(p)
        clashes = [p for group in seen.values() if len(group) > 1 for p in group]
        longer = [p for p in clashes if take[p] < len(split[p])]
        if not longer:  # a clash left only between identical word lists: full paths
            return {p: names[p] if len(seen[names[p]]) == 1 else p for p in paths}
        for p in longer:
            take[p] += 1


# Typed columns: every swept parameter gets a column of its own in the run table (grid and
# --vary) and in the aggregate (grid), typed from its values. These are the names of the types
# in Arrow terms.
COLUMN_TYPES = ("bool", "int64", "double", "string")


def param_column(path: str) -> str:
    """The typed column of a swept parameter: ``p_`` and the path, every character other than
    a letter, digit or underscore replaced by ``_`` (``network.response_loss`` ->
    ``p_network_response_loss``), so that SQL needs no quoting."""
    return "p_" + re.sub(r"[^A-Za-z0-9_]", "_", path)


def column_type(values: Sequence[Any]) -> str:
    """The column type that holds every value: ``bool`` when all are booleans, ``int64`` when
    all are integers, ``double`` when all are numbers, else ``string`` (each value as written
    after ``--set``). A null (``~``) fits any type; all nulls make a string column."""
    present = [v for v in values if v is not None]
    if not present:
        return "string"
    if all(isinstance(v, bool) for v in present):
        return "bool"
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in present):
        return "string"
    if all(isinstance(v, int) and -(2**63) <= v < 2**63 for v in present):
        return "int64"
    return "double"


def typed(value: Any, kind: str) -> Any:
    """``value`` as a cell of a column of type ``kind`` (see :func:`column_type`)."""
    if value is None:
        return None
    if kind == "bool":
        return bool(value)
    if kind == "int64":
        return int(value)
    if kind == "double":
        return float(value)
    return render(value)


def run_seed(sweep_seed: int, variant: int, run: int) -> int:
    seq = np.random.SeedSequence(sweep_seed, spawn_key=(variant, run))
    return int(seq.generate_state(1, np.uint64)[0] >> np.uint64(1))


@dataclass(frozen=True)
class SweepPlan:
    scenario_text: str
    scenario_source: str
    runs: int
    seed: int
    grid: tuple[GridAxis, ...] = ()
    vary: tuple[VarySpec, ...] = ()
    base_overrides: tuple[str, ...] = ()
    # Where the runs go: "model", or "kafka" (a real cluster, :mod:`eosim.real.target`).
    target: str = "model"
    variants: tuple[dict[str, Any], ...] = field(init=False)

    def __post_init__(self) -> None:
        if self.runs <= 0:
            raise PlanError(f"--runs must be at least 1, got {self.runs}")
        paths = [a.path for a in self.grid] + [v.path for v in self.vary]
        for p in paths:
            if paths.count(p) > 1:
                raise PlanError(f"parameter {p} is swept twice")
        combos = itertools.product(*(a.values for a in self.grid)) if self.grid else [()]
        variants = tuple(
            {a.path: v for a, v in zip(self.grid, combo, strict=True)} for combo in combos
        )
        object.__setattr__(self, "variants", variants)
        columns: dict[str, str] = {}
        for p in paths:
            # Spark resolves column names case-insensitively.
            other = columns.setdefault(param_column(p).lower(), p)
            if other != p:
                raise PlanError(
                    f"parameters {other} and {p} would share the column {param_column(p)}"
                )

    def column_types(self) -> dict[str, str]:
        """The type of every swept parameter's column, by path: a grid axis from its values,
        a --vary parameter from its distribution (``randint``: int64; ``uniform``,
        ``loguniform``, ``normal``: double; ``choice``: from its values)."""
        types = {a.path: column_type(a.values) for a in self.grid}
        for spec in self.vary:
            if spec.distribution == "choice":
                types[spec.path] = column_type(spec.args)
            else:
                types[spec.path] = "int64" if spec.distribution == "randint" else "double"
        return types

    def typed_columns(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` (path -> value) as typed columns (column name -> cell)."""
        types = self.column_types()
        return {param_column(p): typed(v, types[p]) for p, v in params.items()}

    @property
    def total_runs(self) -> int:
        return len(self.variants) * self.runs

    def locate(self, run_id: int) -> tuple[int, int]:
        """(variant, run index) of a global run id."""
        return divmod(run_id, self.runs)

    def run_parameters(self, variant: int, run: int) -> dict[str, Any]:
        params = dict(self.variants[variant])
        if self.vary:
            rng = np.random.default_rng(
                np.random.SeedSequence(self.seed, spawn_key=(variant, run, 1))
            )
            for spec in self.vary:
                params[spec.path] = spec.draw(rng)
        return params

    def overrides(self, params: dict[str, Any]) -> list[str]:
        return [*self.base_overrides, *(f"{p}={render(v)}" for p, v in params.items())]

    def validation_overrides(self) -> list[tuple[str, list[str]]]:
        """(what, overrides) that a sweep validates before it runs: every variant with each
        --vary parameter at each of its :meth:`VarySpec.samples` (the others at their first),
        so a parameter no run could use is refused before any run starts. ``what`` names
        the --vary value, or is empty."""
        out: list[tuple[str, list[str]]] = []
        first = {spec.path: spec.sample() for spec in self.vary}
        for variant in self.variants:
            out.append(("", self.overrides({**variant, **first})))
            for spec in self.vary:
                for value, note in spec.samples():
                    label = f"--vary {spec}: a draw of {render(value)}"
                    label += f" ({note}) is invalid" if note else " is invalid"
                    out.append((label, self.overrides({**variant, **first, spec.path: value})))
        return out

    def sweep_id(self) -> str:
        """Identifies the sweep's results: same inputs, same id."""
        ident = {
            "scenario_sha256": hashlib.sha256(self.scenario_text.encode("utf-8")).hexdigest(),
            "runs": self.runs,
            "seed": self.seed,
            "grid": [[a.path, list(a.values)] for a in self.grid],
            "vary": [str(v) for v in self.vary],
            "set": list(self.base_overrides),
        }
        if self.target != "model":  # the model's sweeps keep the ids they always had
            ident["target"] = self.target
        text = json.dumps(ident, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def describe(self) -> list[dict[str, Any]]:
        return [{"variant": i, "params": v} for i, v in enumerate(self.variants)]


def chunk_bounds(
    total: int, chunk_runs: int, runs_per_variant: int | None = None
) -> list[tuple[int, int]]:
    """[start, end) run ids of each chunk: ``chunk_runs`` consecutive runs, and, given
    ``runs_per_variant``, never across a variant's boundary (a chunk is then one Parquet file
    of one variant, see :mod:`eosim.analysis.sweep.store`)."""
    if runs_per_variant is None:
        return [(start, min(start + chunk_runs, total)) for start in range(0, total, chunk_runs)]
    bounds = []
    for first in range(0, total, runs_per_variant):
        last = min(first + runs_per_variant, total)
        bounds += [(s, min(s + chunk_runs, last)) for s in range(first, last, chunk_runs)]
    return bounds


# A chunk is the unit a sweep commits, and so what an interruption can lose: at most one
# chunk per running Spark task. Each costs one small Parquet file and a rename.
MIN_CHUNK_RUNS = 10
MAX_CHUNK_RUNS = 1_000
CHUNKS_PER_SWEEP = 200


def default_chunk_runs(total: int) -> int:
    """Runs per chunk: a sweep in about :data:`CHUNKS_PER_SWEEP` chunks, of 10 to 1,000 runs
    each (a 2,000-run sweep in chunks of 10, a 1,000,000-run one in chunks of 1,000).

    Chunks are committed one by one by the Spark tasks that run them, so their number costs
    no Spark job and no barrier; small chunks lose little to an interruption, and the bound
    keeps a large sweep from writing hundreds of thousands of files.
    """
    return max(MIN_CHUNK_RUNS, min(MAX_CHUNK_RUNS, math.ceil(total / CHUNKS_PER_SWEEP)))
