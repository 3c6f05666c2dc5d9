"""Committed result rows survive a report rebuilt on a fresh machine.

Run directories (``runs/``) are not committed and vanish with the machine; ``results.csv`` (one row per
run) and ``curves.csv`` (one row per run and step) in ``experiments/results/`` are.  A report rebuilt from
the run directories present here is merged with the committed rows: a local run replaces the committed
row with the same key, every other committed row is kept.  So adding seeds to a table on a fresh clone
adds rows instead of silently dropping the committed ones.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Iterable, Sequence

from core.training.checkpoint import atomic_write


def _parse(text: str):
    """CSV cell -> int, float (``nan`` included) or the string itself."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_rows(path: Path) -> list[dict]:
    """The rows of a results CSV with numbers parsed; ``[]`` when the file does not exist."""
    path = Path(path)
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [{k: _parse(v) for k, v in row.items()} for row in csv.DictReader(f)]


def merge_rows(committed: Iterable[dict], local: Iterable[dict], key: Sequence[str]) -> list[dict]:
    """Committed rows in their order, each replaced by the local row with the same ``key`` values if there
    is one, then the local rows that are new."""
    merged = {tuple(r[k] for k in key): r for r in committed}
    merged.update({tuple(r[k] for k in key): r for r in local})
    return list(merged.values())


def write_rows(path: Path, rows: list[dict]) -> None:
    """Write ``rows`` (the union of their fields as columns, missing ones empty) atomically, so a crash
    leaves the old table or the new one, never a torn one."""
    fields = list(dict.fromkeys(k for r in rows for k in r))

    def dump(f) -> None:
        w = csv.DictWriter(f, fieldnames=fields, restval="", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)

    atomic_write(Path(path), dump)


def check_budget(rows: Iterable[dict], total_steps: int, out: Path, tolerance: float = 0.05) -> None:
    """Refuse to mix budgets in one table: every row's ``total_steps`` must lie within ``tolerance`` of the
    sweep's (runs stop at a whole number of rollouts, so a 1M run records e.g. 999424 steps)."""
    other = sorted({int(r["total_steps"]) for r in rows
                    if not math.isclose(float(r["total_steps"]), total_steps, rel_tol=tolerance)})
    if other:
        raise SystemExit(f"error: {out} holds runs of {other} env steps, this report is for {total_steps}; "
                         "pass the same --total-steps or write to another --out")
