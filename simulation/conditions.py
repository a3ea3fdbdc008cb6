"""The grammar of an expectation's value, in a scenario's ``expect:`` and ``expect_sweep:``
blocks and after ``--expect``. It belongs to the scenario format, so the scenario loader
checks it; :mod:`eosim.analysis.expect` and the sweep's aggregation judge it.

    VALUE := N | OP N                 a count (N alone means == N); OP: == != > >= < <=
           | ROP X/record             anomalies per record sent: <1e-4/record, <0.01%/record
           | ROP Xppm                 anomalies per million records sent: <100ppm
           | ROP X/runs               share of runs with at least one: <1%/runs, <=0.01/runs

ROP is one of ``<``, ``<=``, ``>``, ``>=`` (a rate has no useful ``==``). X is a non-negative
decimal number (``0.0001``, ``1e-4``), optionally followed by ``%`` (hundredths) before
``/record`` or ``/runs``. A share of runs must lie in [0, 1] (0% to 100%). ``ppm`` is the
unit of the sweep's ``ppm_<name>`` columns: per million records sent, never per million runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

COUNT, RECORD, RUNS = "count", "record", "runs"
RATE_OPS = ("<", "<=", ">", ">=")

_COUNT = re.compile(r"^\s*(==|!=|>=|<=|>|<)?\s*(\d+)\s*$")
_NUMBER = r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
_RATE = re.compile(
    r"^\s*(==|!=|>=|<=|>|<)?\s*" + _NUMBER + r"\s*(%|ppm)?\s*(?:/\s*([A-Za-z]+))?\s*$"
)
FORMS = (
    "use a count N, '>N', '>=N', '<N', '<=N', '!=N', a rate per record sent such as "
    "'<1e-4/record' or '<100ppm', or a share of runs such as '<1%/runs'"
)


@dataclass(frozen=True, slots=True)
class Condition:
    """A parsed expectation value. ``bound`` is an int for a count; for a rate it is the
    exact fraction per record (``RECORD``) or share of runs (``RUNS``): ``<100ppm`` and
    ``<1e-4/record`` both have bound 1/10000. ``text`` is the form as written, spaces
    removed."""

    op: str
    bound: int | Fraction
    unit: str = COUNT
    text: str = ""

    @classmethod
    def parse(cls, value: int | str) -> Condition:
        """The condition ``value`` states; ValueError with a one-line reason if none."""
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not a condition; {FORMS}")
        if isinstance(value, int):
            if value < 0:
                raise ValueError(f"{value!r} is not a condition; {FORMS}")
            return cls("==", value, COUNT, str(value))
        text = str(value)
        m = _COUNT.match(text)
        if m is not None:
            op, bound = m.group(1) or "==", int(m.group(2))
            return cls(op, bound, COUNT, str(bound) if op == "==" else f"{op}{bound}")
        m = _RATE.match(text)
        if m is None:
            raise ValueError(f"{text!r} is not a condition; {FORMS}")
        op, number, scale, unit = m.group(1), m.group(2), m.group(3), m.group(4)
        form = "".join(text.split())
        if unit is None and scale != "ppm":
            raise ValueError(
                f"{text!r} is not a condition: say what the number is per, "
                "'/record' (records sent) or '/runs' (share of runs), or use 'ppm'"
            )
        if scale == "ppm" and unit is not None:
            raise ValueError(
                f"{text!r}: 'ppm' already means per million records sent; drop /{unit}"
            )
        unit = unit or RECORD
        if unit not in (RECORD, RUNS):
            raise ValueError(f"{text!r}: unknown unit /{unit}; use /record or /runs")
        if op not in RATE_OPS:
            raise ValueError(f"{text!r}: a rate needs <, <=, > or >= before it")
        bound = Fraction(number)
        if scale == "%":
            bound /= 100
        elif scale == "ppm":
            bound /= 1_000_000
        if unit == RUNS and bound > 1:
            raise ValueError(f"{text!r}: a share of runs lies between 0 and 1 (0% and 100%)")
        return cls(op, bound, unit, form)

    @property
    def is_rate(self) -> bool:
        return self.unit != COUNT

    @property
    def always_holds(self) -> bool:
        """Whether every count or rate satisfies the condition, so that it can never fail:
        ``>=0`` in any unit (nothing is counted below 0) and, for a share of runs, ``<=1`` or
        ``<=100%`` (no share exceeds all runs). A count or a rate per record has no upper
        bound (an anomaly may be counted more than once per record), so no ``<=N`` of theirs
        always holds; nor does any ``==``, ``!=``, ``>`` or ``<``."""
        if self.op == ">=" and self.bound == 0:
            return True
        return self.unit == RUNS and self.op == "<=" and self.bound >= 1

    def holds(self, actual: int | float | Fraction) -> bool:
        ops = {
            "==": actual == self.bound,
            "!=": actual != self.bound,
            ">=": actual >= self.bound,
            "<=": actual <= self.bound,
            ">": actual > self.bound,
            "<": actual < self.bound,
        }
        return ops[self.op]

    def __str__(self) -> str:
        return self.text


def condition_error(value: object) -> str | None:
    """Why ``value`` is not a condition (one line), or None if it is one."""
    if not isinstance(value, int | str):
        return f"{value!r} is not a condition; {FORMS}"
    try:
        Condition.parse(value)
    except ValueError as exc:
        return str(exc)
    return None


# The same grammar as JSON Schema patterns (ECMA-262), for eosim/scenario.schema.json; a
# share of runs above 1 passes the pattern but not the loader.
_ROP = r"\s*(<=|>=|<|>)\s*" + _NUMBER + r"\s*"
PATTERN_COUNT = r"\s*(==|!=|>=|<=|>|<)?\s*\d+\s*"
PATTERN_RECORD = _ROP + r"(%?\s*/\s*record|ppm)\s*"
PATTERN_RUNS = _ROP + r"%?\s*/\s*runs\s*"


def pattern(*alternatives: str) -> str:
    """One anchored pattern matching any of ``alternatives``."""
    return "^(" + "|".join(f"({a})" for a in alternatives) + ")$"
