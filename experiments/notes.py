"""Hand-written notes in a generated ``results.md`` survive regeneration (e.g. ``--report-only``).

A report is generated text, then optionally a line ``NOTES_MARKER`` and the analyst's notes.  Rewriting
the report replaces everything above the marker and keeps everything from it on, so rebuilding the
tables after more runs finish never deletes the analysis written under them.
"""
from __future__ import annotations

from pathlib import Path

from core.training.checkpoint import atomic_write

NOTES_MARKER = "<!-- notes: written by hand, kept when the tables above are regenerated -->"


def write_results_md(path: Path, generated: str) -> None:
    """Write ``generated`` to ``path``, keeping the notes section (marker and below) of an existing file.

    The file is replaced atomically (written beside it, then renamed), so an interrupted report never
    leaves a half-written results.md behind."""
    path = Path(path)
    notes = ""
    if path.exists():
        old = path.read_text()
        at = old.find(NOTES_MARKER)
        if at >= 0:
            notes = old[at:]
    text = generated.rstrip("\n") + "\n" + ("\n" + notes if notes else "")
    atomic_write(path, lambda f: f.write(text))
