"""The ``expect:`` block: what a scenario says must hold, or must be shown, after a run.

Each key names an anomaly (``duplicate``, or a transactional one such as ``torn_transaction``)
or an operation count (``acked``). Each value is a
count (``0`` means "exactly 0"), a condition (``">0"``, ``"<=3"``, ``"!=0"``) or, for an
anomaly, a rate per record sent (``"<1e-4/record"``, ``"<100ppm"``). The ``expect_sweep:``
block (judged by a sweep, :mod:`eosim.analysis.sweep.verdict`) also takes a share of runs
(``"<1%/runs"``). The grammar is :mod:`eosim.simulation.conditions`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from eosim.analysis.checks import ALL_ANOMALIES
from eosim.simulation.conditions import COUNT, RECORD, RUNS, Condition

__all__ = [
    "COUNTS",
    "EXPECTABLE",
    "SWEEP_EXPECTABLE",
    "Condition",
    "ExpectResult",
    "always_holding",
    "evaluate",
    "parse_expectation",
    "unknown_expect_key",
]

COUNTS = ("sent", "acked", "failed", "indeterminate", "errored")
EXPECTABLE = (*ALL_ANOMALIES, *COUNTS)
# The keys a sweep can judge across runs (``expect_sweep:``, ``eosim sweep --expect``): the
# anomalies, whose totals, runs and per-record rates the aggregate has.
SWEEP_EXPECTABLE = ALL_ANOMALIES
SINGLE_RUN_RUNS = (
    "a share of runs needs a sweep: put it under expect_sweep: or pass it to eosim sweep --expect"
)


@dataclass(slots=True)
class ExpectResult:
    """``met`` is False when any expectation fails, and when the history had nothing to
    check (``unknown`` says why): expectations judged on no evidence are not met."""

    met: bool
    checked: list[dict[str, object]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    unknown: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"met": self.met, "failures": self.failures, "checked": self.checked}


def unknown_expect_key(key: str, valid: tuple[str, ...] = EXPECTABLE) -> str | None:
    """A message for a key that cannot be expected (not in ``valid``), or None if the key is
    fine."""
    if key in valid:
        return None
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown key {key!r}{hint} (valid: {', '.join(valid)})"


def rate_key_problem(key: str, condition: Condition) -> str | None:
    """Why ``key`` cannot take ``condition`` (a rate on an operation count), or None."""
    if condition.is_rate and key not in ALL_ANOMALIES:
        return (
            f"{condition}: a rate is for an anomaly (its count per record sent or its share "
            f"of runs); {key} takes a count such as '>0'"
        )
    return None


def parse_expectation(
    text: str, unavailable: Mapping[str, str] | None = None, *, sweep: bool = False
) -> tuple[str, str]:
    """``name=value`` from the command line (``--expect duplicate=0``, ``--expect 'acked=>0'``,
    ``--expect 'duplicate=<1e-4/record'``) as the key and condition of an ``expect:`` block
    (``sweep``: of an ``expect_sweep:`` block); ValueError with a one-line reason if the name
    is not expectable (or is in ``unavailable``, name -> why) or the value not a condition.
    The grammar is a scenario's (:mod:`eosim.simulation.conditions`): a count or ``==N``, ``!=N``,
    ``>N``, ``>=N``, ``<N``, ``<=N``, a rate per record sent (``<1e-4/record``,
    ``<100ppm``) or, for a sweep only, a share of runs (``<1%/runs``)."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"{text!r}: expected name=value, such as duplicate=0 or 'acked=>0'")
    problem = unknown_expect_key(name, SWEEP_EXPECTABLE if sweep else EXPECTABLE)
    if problem is not None:
        raise ValueError(problem)
    if unavailable and name in unavailable:
        raise ValueError(f"{name}: {unavailable[name]}")
    # `duplicate==0` splits into `duplicate` and `=0`: the second `=` belongs to the value.
    given = "=" + value if value.startswith("=") and not value.startswith("==") else value
    try:
        condition = Condition.parse(given)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    problem = rate_key_problem(name, condition)
    if problem is None and condition.unit == RUNS and not sweep:
        problem = f"{condition}: {SINGLE_RUN_RUNS}"
    if problem is not None:
        raise ValueError(f"{name}: {problem}")
    return name, str(condition)


def always_holding(expect: Mapping[str, int | str], block: str = "expect") -> list[str]:
    """A warning for each expectation of ``expect`` (a scenario's ``block``) that every count
    or rate satisfies (:attr:`Condition.always_holds`): it can never fail, so it shows
    nothing."""
    return [
        f"{block}.{key}: '{Condition.parse(value)}' holds for every possible count or rate, so "
        "it can never fail; expect what the scenario shows, such as 0 or '>0', or remove it"
        for key, value in expect.items()
        if Condition.parse(value).always_holds
    ]


def format_rate(value: float | Fraction | None) -> str:
    """A rate per record with three significant digits (``1.5e-04``, ``0.0312``), ``-`` for
    none."""
    if value is None:
        return "-"
    v = float(value)
    return "0" if v == 0 else (f"{v:.3g}" if v >= 1e-3 else f"{v:.2e}")


def evaluate(
    expect: Mapping[str, int | str], observed: Mapping[str, int], unknown: str | None = None
) -> ExpectResult:
    """Judge ``expect`` on one run or history: a count on the observed count, a rate per
    record (``/record``, ``ppm``) on the count divided by ``observed["sent"]``, the records
    the run's applications sent or processed (as a sweep's ``sent``). With no record sent a
    rate is undefined and the expectation is not met. A share of runs cannot be judged on
    one run: ValueError (the scenario loader and ``--expect`` refuse it before). ``unknown``
    (why the history had nothing to check: :func:`eosim.analysis.checks.nothing_to_check`)
    makes the whole not met, whatever each item says, with that reason first among the
    failures."""
    result = ExpectResult(met=unknown is None, unknown=unknown)
    if unknown is not None:
        result.failures.append(f"nothing to check: {unknown}")
    for key, raw in expect.items():
        condition = Condition.parse(raw)
        actual = observed[key]
        item: dict[str, object] = {"key": key, "expected": str(condition), "actual": actual}
        if condition.unit == COUNT:
            ok = condition.holds(actual)
            got = str(actual)
        elif condition.unit == RECORD:
            sent = observed["sent"]
            rate = Fraction(actual, sent) if sent > 0 else None
            ok = rate is not None and condition.holds(rate)
            item["records"] = sent
            item["per_record"] = None if rate is None else float(rate)
            got = (
                f"{actual} in {sent} records sent ({format_rate(rate)}/record)"
                if rate is not None
                else f"{actual} with no record sent (no rate)"
            )
        else:
            raise ValueError(f"{key}: {condition}: {SINGLE_RUN_RUNS}")
        item["met"] = ok
        item["got"] = got
        result.checked.append(item)
        if not ok:
            result.met = False
            result.failures.append(f"{key}: expected {condition}, got {got}")
    return result
