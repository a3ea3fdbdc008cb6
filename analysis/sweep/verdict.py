"""A sweep's own expectations (``expect_sweep:`` and ``eosim sweep --expect``), judged per
variant on the aggregate: a rate per record on ``ppm_<name>`` and its run-clustered interval,
a share of runs on ``rate_<name>`` and its Wilson interval, a count on ``total_<name>``.

A rate is judged on its 95% interval ("met with confidence"):

- ``<`` / ``<=`` X: **met** when the interval's upper bound is below X (at most X), **not met**
  when its lower bound is already at or above X (above X), else **inconclusive**: the
  interval straddles X and more runs would narrow it.
- ``>`` / ``>=`` X: the mirror image, on the lower bound.

The point estimate is reported next to it (``point_met``) but does not decide. An
inconclusive rate also says how many runs would settle it (:func:`runs_to_settle`). A count is
exact: met or not met. A variant is not met when one of its expectations is not met, else
inconclusive when one is, else met; the sweep likewise over its variants. Only a sweep that
is met exits 0: inconclusive is not a pass.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eosim.analysis.stats import PER_MILLION, effective_trials, format_ppm, trials_to_settle
from eosim.simulation.conditions import COUNT, RECORD, Condition

MET, NOT_MET, INCONCLUSIVE = "met", "not met", "inconclusive"
# A verdict's rank: the worse one of two decides.
_RANK = {MET: 0, INCONCLUSIVE: 1, NOT_MET: 2}
FILE = "expect_sweep.json"


def interval_verdict(condition: Condition, low: float, high: float) -> str:
    """Met, not met or inconclusive: where the interval [low, high] lies against the
    condition's bound (a fraction: per record, or of runs)."""
    bound = float(condition.bound)
    if condition.op in ("<", "<="):
        inside = high < bound if condition.op == "<" else high <= bound
        outside = low >= bound if condition.op == "<" else low > bound
    else:
        inside = low > bound if condition.op == ">" else low >= bound
        outside = high <= bound if condition.op == ">" else high < bound
    return MET if inside else NOT_MET if outside else INCONCLUSIVE


@dataclass(frozen=True, slots=True)
class Check:
    """One expectation judged on one variant. ``estimate``, ``low`` and ``high`` are per
    record (``unit`` record), a share of runs (runs) or the total count (count, no
    interval)."""

    key: str
    expected: str
    unit: str
    estimate: float | None
    low: float | None
    high: float | None
    point_met: bool | None
    verdict: str
    text: str
    # For an inconclusive rate: the runs (in all) that would settle it at the observed rate
    # (:func:`runs_to_settle`); None when no number would, or for a verdict already settled.
    runs_to_settle: int | None = None

    def to_dict(self) -> dict[str, Any]:
        def finite(v: float | None) -> float | None:
            return None if v is None or math.isinf(v) else v

        return {
            "key": self.key,
            "expected": self.expected,
            "unit": self.unit,
            "estimate": self.estimate,
            "low": finite(self.low),
            "high": finite(self.high),
            "point_met": self.point_met,
            "verdict": self.verdict,
            "text": self.text,
            "runs_to_settle": self.runs_to_settle,
        }


@dataclass(slots=True)
class VariantVerdict:
    variant: int
    verdict: str
    checks: list[Check] = field(default_factory=list)

    @property
    def detail(self) -> str:
        return "; ".join(c.text for c in self.checks)


@dataclass(slots=True)
class SweepVerdict:
    expect: dict[str, str]
    verdict: str
    variants: list[VariantVerdict] = field(default_factory=list)

    @property
    def met(self) -> bool:
        return self.verdict == MET

    def to_dict(self) -> dict[str, Any]:
        return {
            "expect_sweep": self.expect,
            "verdict": self.verdict,
            "met": self.met,
            "rule": "a rate is met when its 95% interval lies on the right side of the bound, "
            "not met when it lies on the wrong side, inconclusive when it straddles it",
            "variants": [
                {
                    "variant": v.variant,
                    "verdict": v.verdict,
                    "checks": [c.to_dict() for c in v.checks],
                }
                for v in self.variants
            ],
        }

    def write(self, root: Path) -> Path:
        path = root / FILE
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path


def _worst(verdicts: Sequence[str]) -> str:
    return max(verdicts, key=_RANK.__getitem__, default=MET)


def judge_row(row: Mapping[str, Any], key: str, condition: Condition) -> Check:
    """``condition`` on anomaly ``key`` of one aggregate row."""
    runs = int(row["runs"])
    if condition.unit == COUNT:
        total = int(row[f"total_{key}"])
        ok = condition.holds(total)
        verdict = MET if ok else NOT_MET
        text = f"{key} {condition}: {verdict}: {total} across {runs} runs"
        return Check(key, str(condition), COUNT, total, None, None, ok, verdict, text)
    if condition.unit == RECORD:
        ppm = row.get(f"ppm_{key}")
        if ppm is None:
            text = f"{key} {condition}: {INCONCLUSIVE}: no record sent"
            return Check(key, str(condition), RECORD, None, None, None, None, INCONCLUSIVE, text)
        estimate = ppm / PER_MILLION
        low, high = row[f"ppm_{key}_low"] / PER_MILLION, row[f"ppm_{key}_high"] / PER_MILLION
        threshold = format_ppm(PER_MILLION * float(condition.bound))
        shown = (
            f"{format_ppm(ppm)} ppm [{format_ppm(row[f'ppm_{key}_low'])}-"
            f"{format_ppm(row[f'ppm_{key}_high'])}] vs {threshold} ppm"
        )
    else:
        estimate = float(row[f"rate_{key}"])
        low, high = float(row[f"ci_low_{key}"]), float(row[f"ci_high_{key}"])
        shown = (
            f"{row[f'runs_{key}']} of {runs} runs, {100 * estimate:.1f}% "
            f"[{100 * low:.1f}-{100 * high:.1f}] vs {100 * float(condition.bound):.3g}%"
        )
    verdict = interval_verdict(condition, low, high)
    point = condition.holds(estimate)
    settle = None
    tail = ""
    if verdict == INCONCLUSIVE:
        settle = runs_to_settle(condition, estimate, low, high, runs)
        how = settle_text(settle) if math.isfinite(high) else "one run bounds no rate"
        tail = f" (point estimate {'meets' if point else 'misses'} it; {how})"
    text = f"{key} {condition}: {verdict}: {shown}{tail}"
    return Check(
        key, str(condition), condition.unit, estimate, low, high, point, verdict, text, settle
    )


def runs_to_settle(
    condition: Condition, estimate: float, low: float, high: float, runs: int
) -> int | None:
    """How many runs in all (the ``runs`` done included) would take an inconclusive rate's
    interval off its bound, if the observed rate held: None when no number would (the rate
    is the bound itself) or when the interval is unbounded (one run).

    A share of runs is judged on its Wilson interval over the runs, so this is the smallest
    number of runs whose Wilson interval at the observed share no longer straddles the bound
    (:func:`eosim.analysis.stats.trials_to_settle`). A rate per record is judged on its
    run-clustered interval; that interval is matched to the Wilson interval of as many
    independent records as would make it as wide (its effective sample size,
    :func:`eosim.analysis.stats.effective_trials`), which grows in proportion to the runs, and
    the effective records needed are scaled back to runs."""
    bound = float(condition.bound)
    trials = float(runs) if condition.unit != RECORD else effective_trials(estimate, low, high)
    if trials is None:
        return None
    needed = trials_to_settle(estimate, trials, condition.op, bound)
    if needed is None:
        return None
    return max(runs + 1, math.ceil(runs * needed / trials - 1e-9))


def settle_text(runs: int | None) -> str:
    if runs is None:
        return "no number of runs would settle it at this rate"
    return f"about {runs:,} runs in all would settle it at this rate"


def judge(table: Sequence[Mapping[str, Any]], expect: Mapping[str, str]) -> SweepVerdict:
    """Every expectation on every variant of the aggregate ``table``."""
    conditions = {key: Condition.parse(value) for key, value in expect.items()}
    variants = []
    for row in table:
        checks = [judge_row(row, key, c) for key, c in conditions.items()]
        variants.append(
            VariantVerdict(int(row["variant"]), _worst([c.verdict for c in checks]), checks)
        )
    return SweepVerdict(dict(expect), _worst([v.verdict for v in variants]), variants)


def verdict_columns(verdict: SweepVerdict) -> dict[int, dict[str, str]]:
    """Per variant, the aggregate's ``expect_sweep`` (met, not met, inconclusive) and
    ``expect_sweep_detail`` (every check, ``; ``-separated) columns."""
    return {
        v.variant: {"expect_sweep": v.verdict, "expect_sweep_detail": v.detail}
        for v in verdict.variants
    }


def verdict_lines(verdict: SweepVerdict) -> list[str]:
    """One line per variant, then the sweep's, for the CLI."""
    lines = [f"variant {v.variant}: {v.verdict.upper()}: {v.detail}" for v in verdict.variants]
    counts = {
        name: [v.variant for v in verdict.variants if v.verdict == name]
        for name in (NOT_MET, INCONCLUSIVE)
    }
    parts = [
        f"{name} in variant{'s' if len(vs) > 1 else ''} {', '.join(map(str, vs))}"
        for name, vs in counts.items()
        if vs
    ]
    overall = verdict.verdict.upper() + (": " + "; ".join(parts) if parts else "")
    lines.append(f"sweep: {overall}")
    return lines
