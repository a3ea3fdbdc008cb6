"""The conformance files' list of Kafka test cases eosim leaves out on purpose, as skips."""

from __future__ import annotations

from collections.abc import Callable

import pytest


def not_modelled(kafka_class: str, cases: dict[str, str]) -> Callable[[str], None]:
    """A parametrized test that skips each case of ``kafka_class`` named in ``cases`` with its
    reason, so the suite's report lists every departure. Assign it to ``test_not_modelled``."""

    @pytest.mark.parametrize("kafka_test", sorted(cases))
    def test_not_modelled(kafka_test: str) -> None:
        pytest.skip(f"{kafka_class}.{kafka_test}: {cases[kafka_test]}")

    test_not_modelled.__doc__ = f"{kafka_class} cases for behaviour eosim leaves out on purpose."
    return test_not_modelled
