"""Monte Carlo sweeps: many runs of one scenario, farmed out as Spark tasks.

The pieces, each in its own module:

* :mod:`~eosim.analysis.sweep.plan` expands a scenario, a grid and per-run random parameters into
  variants and runs, and derives every run's seed from (sweep seed, variant, run).
* :mod:`~eosim.analysis.sweep.task` is what a Spark task executes: chunks of runs, one result
  row per run written as Parquet, and one partial aggregate returned. It
  knows only :mod:`eosim.analysis.outcome` (the model's entry point and the checks), never the
  model's internals.
* :mod:`~eosim.analysis.sweep.store` owns the results directory: manifest, atomic chunk commits,
  resume.
* :mod:`~eosim.analysis.sweep.engine` starts Spark (embedded, or a real cluster) and runs chunks.
* :mod:`~eosim.analysis.sweep.aggregate` sums runs into mergeable partial aggregates (the tasks
  return them) and turns the merged sums into the per-variant reliability table.
* :mod:`~eosim.analysis.sweep.verdict` judges the sweep's own expectations (``expect_sweep:``,
  ``--expect``) on that table: met, not met or inconclusive.
* :mod:`~eosim.analysis.sweep.runner` ties them together behind :func:`run_sweep`.
"""

from typing import Any

__all__ = ["SweepError", "SweepResult", "run_sweep"]


def __getattr__(name: str) -> Any:
    # Lazy, so that Spark workers importing eosim.analysis.sweep.task do not load the driver's
    # dependencies (pandas, the Spark session code).
    if name in __all__:
        from eosim.analysis.sweep import runner

        return getattr(runner, name)
    raise AttributeError(name)
