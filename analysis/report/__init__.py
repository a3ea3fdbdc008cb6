"""Reliability reports of a sweep: a self-contained HTML page, or Markdown with image files.

:mod:`~eosim.analysis.report.data` reads a sweep's results,
:mod:`~eosim.analysis.report.plots` draws them with matplotlib, and
:mod:`~eosim.analysis.report.render` writes the page.
"""

from eosim.analysis.report.render import ReportError, write_report

__all__ = ["ReportError", "write_report"]
