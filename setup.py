"""Builds eosim's one optional C extension; everything else is declared in pyproject.toml.

``eosim.analysis._jsonl_scan`` speeds up reading JSON Lines histories
(``eosim.analysis.jsonl_reader``). It is optional: where no C compiler is at hand the build
goes on without it, and the reader works the same, more slowly (docs/performance.md).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "eosim.analysis._jsonl_scan",
            sources=["analysis/_jsonl_scan.c"],
            optional=True,
        )
    ]
)
