"""A run's files, written the one way ``replay``, ``generate`` and ``eval`` write them:
results.json, summary.csv and (when asked) report.html with its PNGs. A full disk or an
unwritable folder is one ``--out`` line."""

from __future__ import annotations

from pathlib import Path

from agentload.measure.results import ResultsDocument, write_results
from agentload.measure.summary import write_summary
from agentload.outfile import write_errors

__all__ = ["write_run"]


def write_run(doc: ResultsDocument, out: Path, report: bool = True) -> list[Path]:
    """Write the run's files into ``out``; returns their paths (results.json first)."""
    with write_errors(out, option="--out"):
        paths = [write_results(doc, out), write_summary(doc, out)]
        if report:
            from agentload.measure.report import write_report  # matplotlib: seconds to import

            paths += write_report([doc], out)
    return paths
