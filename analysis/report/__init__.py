"""Reliability reports of a sweep: a self-contained HTML page, or Markdown with image files.

:mod:`~analysis.report.data` reads a sweep's results, :mod:`~analysis.report.plots` draws
them with matplotlib, and :mod:`~analysis.report.render` writes the page.
"""

from analysis.report.render import ReportError, write_report

__all__ = ["ReportError", "write_report"]
