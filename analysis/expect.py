"""The ``expect:`` block: what a scenario says must hold, or must be shown, after a run.

Each key names an anomaly (``duplicate``, or a transactional one such as ``torn_transaction``)
or an operation count (``acked``). Each value is a
count (``0`` means "exactly 0") or a condition (``">0"``, ``"<=3"``, ``"!=0"``).
"""

from __future__ import annotations

import difflib
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from eosim.analysis.checks import ALL_ANOMALIES

COUNTS = ("sent", "acked", "failed", "indeterminate", "errored")
EXPECTABLE = (*ALL_ANOMALIES, *COUNTS)

_OPS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
_CONDITION = re.compile(r"^\s*(==|!=|>=|<=|>|<)?\s*(\d+)\s*$")


@dataclass(frozen=True, slots=True)
class Condition:
    op: str
    bound: int

    @classmethod
    def parse(cls, value: int | str) -> Condition:
        if isinstance(value, int) and not isinstance(value, bool):
            return cls("==", value)
        m = _CONDITION.match(str(value))
        if m is None:
            raise ValueError(
                f"{value!r} is not a condition; use N, '>N', '>=N', '<N', '<=N', '!=N'"
            )
        return cls(m.group(1) or "==", int(m.group(2)))

    def holds(self, actual: int) -> bool:
        return _OPS[self.op](actual, self.bound)

    def __str__(self) -> str:
        return str(self.bound) if self.op == "==" else f"{self.op}{self.bound}"


@dataclass(slots=True)
class ExpectResult:
    met: bool
    checked: list[dict[str, object]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"met": self.met, "failures": self.failures, "checked": self.checked}


def unknown_expect_key(key: str) -> str | None:
    """A message for a key that cannot be expected, or None if the key is fine."""
    if key in EXPECTABLE:
        return None
    close = difflib.get_close_matches(key, EXPECTABLE, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown key {key!r}{hint} (valid: {', '.join(EXPECTABLE)})"


def parse_expectation(text: str, unavailable: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``name=value`` from the command line (``--expect duplicate=0``, ``--expect 'acked=>0'``)
    as the key and condition of an ``expect:`` block; ValueError with a one-line reason if the
    name is not expectable (or is in ``unavailable``, name -> why) or the value not a
    condition. The grammar is a scenario's: a count or ``==N``, ``!=N``, ``>N``, ``>=N``,
    ``<N``, ``<=N``."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"{text!r}: expected name=value, such as duplicate=0 or 'acked=>0'")
    problem = unknown_expect_key(name)
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
    return name, str(condition)


def evaluate(expect: Mapping[str, int | str], observed: Mapping[str, int]) -> ExpectResult:
    result = ExpectResult(met=True)
    for key, raw in expect.items():
        condition = Condition.parse(raw)
        actual = observed[key]
        ok = condition.holds(actual)
        result.checked.append({"key": key, "expected": str(condition), "actual": actual, "met": ok})
        if not ok:
            result.met = False
            result.failures.append(f"{key}: expected {condition}, got {actual}")
    return result
