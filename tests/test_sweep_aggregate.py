"""The sweep's partial aggregates: tasks' sums merge into the table the runs themselves give,
in any order, and the accounting catches a run missing, doubled or out of place."""

from __future__ import annotations

import random

import pytest
from test_sweep_spark import synthetic_run

from eosim.analysis.expect import Condition, evaluate
from eosim.analysis.stats import dump_sketch, load_sketch, sketch, sketch_quantile
from eosim.analysis.sweep.aggregate import AccountingError, Sums, aggregate, meets, table

EXPECT = {"duplicate": "<=1%/record", "lost_write": "0", "acked": ">=5"}


def runs() -> list[dict]:
    rng = random.Random(4)
    out = []
    for variant in range(3):
        for run in range(12):
            latencies = [rng.expovariate(0.05) for _ in range(rng.randint(0, 40))]
            out.append(
                synthetic_run(
                    variant,
                    run,
                    sent=rng.choice([0, 100, 300]),
                    acked=rng.randint(0, 9),
                    duplicate=rng.choice([0, 0, 1, 3]),
                    lost_write=rng.choice([0, 0, 0, 2]),
                    txns=rng.randint(0, 4),
                    ack_latency_sketch=sketch(latencies),
                    commit_latency_sketch=sketch(latencies[:5]),
                )
            )
    return out


def test_sums_merged_in_any_order_give_the_table_of_all_runs():
    rows = runs()
    whole = aggregate(rows, [{}, {}, {}], EXPECT, len(rows))
    for seed in range(3):
        chunks = [rows[i : i + 4] for i in range(0, len(rows), 4)]
        random.Random(seed).shuffle(chunks)
        tasks = [Sums(EXPECT) for _ in range(3)]
        for i, chunk in enumerate(chunks):
            first = chunk[0]
            tasks[i % 3].add(chunk, (first["variant"], first["run"], first["run"] + len(chunk)))
        merged = Sums(EXPECT)
        for part in reversed(tasks):  # what the driver gets: each task's sums, serialised
            merged.merge(Sums.from_bytes(part.to_bytes(), EXPECT))
        assert table(merged, [{}, {}, {}], len(rows)) == whole
    assert [r["runs"] for r in whole] == [12, 12, 12]
    assert whole[0]["expect_failures"]  # the random runs break some expectation


@pytest.mark.parametrize("fault", ["missing", "doubled", "out of place"])
def test_the_accounting_catches_a_run_missing_doubled_or_out_of_place(fault):
    rows = runs()[:12]  # variant 0, runs 0-11, as chunks of 4
    chunks = [(rows[i : i + 4], (0, i, i + 4)) for i in range(0, 12, 4)]
    if fault == "missing":
        chunks[1] = (chunks[1][0][:3], chunks[1][1])
    elif fault == "doubled":
        chunks[1] = (chunks[1][0][:3] + chunks[1][0][2:3], chunks[1][1])
    else:  # run 4 of chunk 1 written into chunk 2 instead of run 8
        chunks[2] = (chunks[1][0][:1] + chunks[2][0][1:], chunks[2][1])
    sums = Sums({})
    for part, bounds in chunks:
        sums.add(part, bounds)
    with pytest.raises(AccountingError, match="result accounting failed"):
        table(sums, [{}], 12)


@pytest.mark.parametrize("condition", ["<=1%/record", ">1%/record", "0", ">=2", "!=1", "<3"])
def test_a_run_meets_a_condition_in_the_sums_as_evaluate_judges_it(condition):
    for row in runs():
        assert meets(row, "duplicate", Condition.parse(condition)) == (
            evaluate({"duplicate": condition}, row).met
        ), row


def test_a_merged_sketch_is_serialised_the_same_whatever_the_order_of_merges():
    rng = random.Random(2)
    blobs = [sketch([rng.expovariate(0.1) for _ in range(30)]) for _ in range(20)]
    forward, backward = load_sketch(blobs[0]), load_sketch(blobs[-1])
    for blob in blobs[1:]:
        forward.merge(load_sketch(blob))
    for blob in reversed(blobs[:-1]):
        backward.merge(load_sketch(blob))
    assert dump_sketch(forward) == dump_sketch(backward)
    for q in (0.0, 0.5, 0.99, 1.0):
        assert sketch_quantile(dump_sketch(forward), q) == forward.get_quantile_value(q)
