"""The JSON Schema of a scenario file, generated from the pydantic models of
:mod:`eosim.simulation.scenario` and shipped as ``eosim/scenario.schema.json`` (``eosim schema``
prints it). Editors that speak the YAML language server complete and check a scenario with
``# yaml-language-server: $schema=PATH/eosim/scenario.schema.json`` as its first line.

What the models say only in their validators is added here: durations also take text
(``500ms``, ``2s``), and the free-form mappings (Kafka configs, protocol rules, ``expect:``)
list the keys the loader accepts, so that an editor can offer them.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.expect import EXPECTABLE, SWEEP_EXPECTABLE
from eosim.simulation.conditions import PATTERN_COUNT, PATTERN_RECORD, PATTERN_RUNS, pattern
from eosim.simulation.config import BROKER_KEYS, PRODUCER_KEYS, TOPIC_KEYS
from eosim.simulation.rules import DEFAULT_VERSION, VERSIONS, ProtocolRules
from eosim.simulation.scenario import (
    _DURATION,
    _RULE_CHOICES,
    _RULE_RANGES,
    Scenario,
    parse_duration_ms,
)

SCHEMA_PATH = Path(__file__).with_name("scenario.schema.json")
DIALECT = "https://json-schema.org/draft/2020-12/schema"
DURATION_TEXT = {
    "type": "string",
    "pattern": _DURATION.pattern,
    "description": "a duration with its unit: 500ms, 2s, 1m, 1.5h, 7d",
}


class _ScenarioSchema(GenerateJsonSchema):
    def function_before_schema(
        self, schema: core_schema.BeforeValidatorFunctionSchema
    ) -> JsonSchemaValue:
        # A Duration: milliseconds as a number, or text with a unit.
        if schema["function"].get("function") is parse_duration_ms:
            number = self.generate_inner(schema["schema"])
            return {"anyOf": [number, DURATION_TEXT], "description": "milliseconds, or a duration"}
        return super().function_before_schema(schema)


def _keys(names: list[str], values: dict[str, Any] | None = None) -> dict[str, Any]:
    """A mapping whose keys are ``names`` (in order), each value as in ``values``."""
    values = values or {}
    return {
        "type": "object",
        "propertyNames": {"enum": names},
        "properties": {name: values.get(name, {}) for name in names},
    }


def _rules() -> dict[str, Any]:
    preset = VERSIONS[DEFAULT_VERSION]
    values: dict[str, Any] = {}
    for f in fields(ProtocolRules):
        if isinstance(getattr(preset, f.name), bool):
            values[f.name] = {"type": "boolean"}
        elif f.name in _RULE_CHOICES:
            values[f.name] = {"enum": list(_RULE_CHOICES[f.name])}
        else:
            low, high = _RULE_RANGES.get(f.name, (0, 2**31 - 1))
            values[f.name] = {"type": "integer", "minimum": low, "maximum": high}
    return _keys(ProtocolRules.names(), values)


def scenario_schema() -> dict[str, Any]:
    """The schema, freshly generated (what ``eosim/scenario.schema.json`` must hold)."""
    schema = Scenario.model_json_schema(schema_generator=_ScenarioSchema)
    defs = schema["$defs"]
    producer_config = _keys(list(PRODUCER_KEYS))
    for name in ("Producer", "TransactionalProducer", "Processor"):
        defs[name]["properties"]["config"] |= producer_config
    defs["Topic"]["properties"]["config"] |= _keys(list(TOPIC_KEYS))
    defs["Cluster"]["properties"]["config"] |= _keys(list(BROKER_KEYS))
    defs["Kafka"]["properties"]["rules"] |= _rules()
    count = {
        "anyOf": [
            {"type": "integer", "minimum": 0},
            {"type": "string", "pattern": pattern(PATTERN_COUNT)},
        ],
        "description": "a count (exactly), or a condition: '>0', '>=N', '<N', '<=N', '!=N'",
    }
    rate = {
        "anyOf": [
            {"type": "integer", "minimum": 0},
            {"type": "string", "pattern": pattern(PATTERN_COUNT, PATTERN_RECORD)},
        ],
        "description": "a count (exactly), a condition: '>0', '>=N', '<N', '<=N', '!=N', or "
        "a rate per record sent: '<1e-4/record', '<0.01%/record', '<100ppm'",
    }
    shares = {
        "anyOf": [
            {"type": "integer", "minimum": 0},
            {"type": "string", "pattern": pattern(PATTERN_COUNT, PATTERN_RECORD, PATTERN_RUNS)},
        ],
        "description": "judged across a sweep's runs: a total count ('0', '<=3'), a rate per "
        "record sent ('<1e-4/record', '<100ppm') or a share of runs with at least one "
        "('<1%/runs', '<=0.01/runs')",
    }
    values = {k: rate if k in ALL_ANOMALIES else count for k in EXPECTABLE}
    schema["properties"]["expect"] |= _keys(list(EXPECTABLE), values)
    schema["properties"]["expect"].pop("additionalProperties", None)
    sweep_values = dict.fromkeys(SWEEP_EXPECTABLE, shares)
    schema["properties"]["expect_sweep"] |= _keys(list(SWEEP_EXPECTABLE), sweep_values)
    schema["properties"]["expect_sweep"].pop("additionalProperties", None)
    return {
        "$schema": DIALECT,
        "title": "eosim scenario",
        **schema,
    }


def schema_text() -> str:
    """The schema as the shipped file holds it."""
    return json.dumps(scenario_schema(), indent=2, sort_keys=False) + "\n"


__all__ = ["SCHEMA_PATH", "scenario_schema", "schema_text"]
