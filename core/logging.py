"""Metric logging to CSV and TensorBoard under fixed namespaces, plus the live progress line.

Namespaces: ``rollout/`` (episodes), ``train/`` (losses, clip stats, lr, eps), ``sampler/``,
``health/`` (cumulative event counts), ``time/`` (SPS, per-phase seconds), ``eval/``.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Optional

from core.checkpoint import atomic_write


class MetricLogger:
    """Appends one row per update to ``metrics.csv`` (and TensorBoard scalars).

    On resume from ``resume_step``, rows logged after that step (by a run that crashed after its
    last checkpoint) are dropped, so the curve continues exactly where the checkpoint left off.
    """

    def __init__(self, run_dir: Path, resume_step: Optional[int] = None, tensorboard: bool = True):
        self.path = Path(run_dir) / "metrics.csv"
        self.columns: list[str] = []
        if resume_step is not None and self.path.exists():
            with open(self.path, newline="") as f:
                rows = list(csv.DictReader(f))
            if rows:
                self.columns = list(rows[0].keys())
            self._rewrite([r for r in rows if float(r["global_step"]) <= resume_step])
        elif self.path.exists():
            self.path.unlink()
        self.tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            purge = None if resume_step is None else resume_step + 1
            self.tb = SummaryWriter(str(Path(run_dir) / "tb"), purge_step=purge)

    def _rewrite(self, rows: list[dict]) -> None:
        def write(f):
            w = csv.DictWriter(f, fieldnames=self.columns, restval="")
            w.writeheader()
            w.writerows(rows)
        atomic_write(self.path, write)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        row = {"global_step": step, **metrics}
        if not self.columns or any(k not in self.columns for k in row):
            rows = []
            if self.path.exists():
                with open(self.path, newline="") as f:
                    rows = list(csv.DictReader(f))
            self.columns = self.columns or ["global_step"]
            self.columns += [k for k in row if k not in self.columns]
            self._rewrite(rows)
        with open(self.path, "a", newline="") as f:
            csv.DictWriter(f, fieldnames=self.columns, restval="").writerow(row)
        if self.tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and not math.isnan(v):
                    self.tb.add_scalar(k, v, step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


def read_metrics(path: Path) -> dict[str, list[float]]:
    """``metrics.csv`` as columns of floats (empty cells -> NaN)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    cols = rows[0].keys() if rows else []
    return {c: [float(r[c]) if r[c] not in ("", None) else math.nan for r in rows] for c in cols}


class Progress:
    """A rich progress bar with step, SPS, recent return and ETA (silent when disabled)."""

    def __init__(self, total: int, start: int, description: str, enabled: bool = True):
        self.bar = None
        if enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                    TextColumn("SPS {task.fields[sps]:>6.0f}  return {task.fields[ret]}"),
                                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
            self.task = self.bar.add_task(description, total=total, completed=start, sps=0.0, ret="n/a")
            self.bar.start()

    def update(self, step: int, sps: float, recent_return: float) -> None:
        if self.bar is not None:
            ret = "n/a" if math.isnan(recent_return) else f"{recent_return:8.1f}"
            self.bar.update(self.task, completed=step, sps=sps, ret=ret)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
