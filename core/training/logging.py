"""Metric logging to CSV, TensorBoard and (``--wandb``) Weights & Biases under fixed namespaces, plus the live progress
line.

Namespaces: ``rollout/`` (episodes), ``train/`` (losses, clip stats, lr, eps), ``sampler/``,
``health/`` (cumulative event counts), ``time/`` (SPS, per-phase seconds), ``eval/``.
"""
from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from core.config.groups import WandbOptions
from core.config.errors import ConfigError
from core.config.parsing import read_yaml
from core.training.checkpoint import DISK_FULL, DiskFull, atomic_write


class MetricLogger:
    """Appends one row per update to ``metrics.csv`` (and TensorBoard scalars; with ``wandb``, the options of a config
    whose ``wandb`` is on, the same scalars to a W&B run: :class:`WandbSink`).

    On resume from ``resume_step``, rows logged after that step (by a run that crashed after its
    last checkpoint) are dropped, so the curve continues exactly where the checkpoint left off.
    """

    def __init__(self, run_dir: Path, resume_step: Optional[int] = None, tensorboard: bool = True,
                 wandb: Optional[WandbOptions] = None):
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
            with self._tb_errors():
                self.tb = SummaryWriter(str(Path(run_dir) / "tb"), purge_step=purge)
            _quiet_writer_threads()
        self.wandb = WandbSink(Path(run_dir), wandb) if wandb and wandb.wandb else None

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
        line = io.StringIO()
        csv.DictWriter(line, fieldnames=self.columns, restval="").writerow(row)
        with open(self.path, "a", newline="") as f:
            size = f.tell()
            try:  # one write per row; on a full disk, cut back any partial row so the file stays a table
                f.write(line.getvalue())
                f.flush()
            except OSError:
                f.truncate(size)
                raise
        scalars = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not math.isnan(v)}
        if self.tb is not None:
            with self._tb_errors():
                for k, v in scalars.items():
                    self.tb.add_scalar(k, v, step)
        if self.wandb is not None:
            self.wandb.log(step, scalars)

    @contextlib.contextmanager
    def _tb_errors(self):
        """TensorBoard's writes (done by its own thread, whose failure the next call re-raises) failing for lack of
        space: :class:`DiskFull`, as a run file's would."""
        try:
            yield
        except OSError as e:
            if e.errno in DISK_FULL:
                raise DiskFull(e.errno, f"no space left to write {self.path.parent / 'tb'}") from e
            raise

    def close(self, quiet: bool = False) -> None:
        """Flush and close TensorBoard's file; ``quiet``: a failure to do so is dropped (closing after another error,
        which is the one to report)."""
        sink, self.wandb = self.wandb, None
        if sink is not None:
            sink.close(failed=quiet)
        tb, self.tb = self.tb, None
        if tb is None:
            return
        try:
            with self._tb_errors():
                tb.close()
        except Exception:
            if not quiet:
                raise


class WandbSink:
    """One Weights & Biases run beside metrics.csv: the scalars TensorBoard gets, against ``global_step`` (a metric of
    its own, so that rows a resumed run logs again do not fall behind W&B's step counter), and the run's config.yaml as
    its config.  Named after the run directory; its files go to ``WANDB_DIR`` if set, else into the run directory.  A
    resumed run continues the same W&B run (its id is derived from the run directory's path) where W&B can
    (online)."""

    def __init__(self, run_dir: Path, options: WandbOptions):
        import wandb

        config_path = run_dir / "config.yaml"
        config = read_yaml(config_path) if config_path.is_file() else {}
        online = options.wandb_mode == "online"
        run_id = hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:16]
        try:
            self.run = wandb.init(project=options.wandb_project, group=options.wandb_group, mode=options.wandb_mode,
                                  dir=os.environ.get("WANDB_DIR") or str(run_dir), name=run_dir.name,
                                  id=run_id if online else None, resume="allow" if online else None,
                                  config=config if isinstance(config, dict) else {},
                                  settings=wandb.Settings(console="off"))
        except Exception as e:  # not logged in, no network, a bad project name: one line, not wandb's traceback
            hint = "; log in with 'wandb login' or use --wandb-mode offline" if online else ""
            first = (str(e).strip().splitlines() or [""])[0][:200]  # W&B's messages run over many lines
            raise ConfigError(f"--wandb: W&B could not start a run: {type(e).__name__}: {first}{hint}") from None
        self.run.define_metric("global_step")
        self.run.define_metric("*", step_metric="global_step")

    def log(self, step: int, scalars: dict[str, float]) -> None:
        self.run.log({"global_step": step, **scalars})

    def close(self, failed: bool = False) -> None:
        self.run.finish(exit_code=1 if failed else 0)


def _quiet_writer_threads() -> None:
    """Keep TensorBoard's writer thread from printing a traceback when its write fails for lack of space: the main
    thread gets the error at its next TensorBoard call (:meth:`MetricLogger._tb_errors`) and reports it in one line."""
    if getattr(threading.excepthook, "quiet_disk_full", False):
        return
    previous = threading.excepthook

    def hook(args):
        if not (isinstance(args.exc_value, OSError) and args.exc_value.errno in DISK_FULL):
            previous(args)
    hook.quiet_disk_full = True
    threading.excepthook = hook


def read_metrics(path: Path) -> dict[str, list[float]]:
    """``metrics.csv`` as columns of floats (empty cells -> NaN)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    cols = rows[0].keys() if rows else []
    return {c: [float(r[c]) if r[c] not in ("", None) else math.nan for r in rows] for c in cols}


def bar_columns() -> list:
    """The live bar's columns: on a narrow terminal the description and the bar give way (ellipsis), never the step
    counts, SPS, return, elapsed time or ETA."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.table import Column

    def kept():
        return Column(no_wrap=True)
    return [TextColumn("{task.description}", table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis")),
            BarColumn(bar_width=None, table_column=Column(ratio=1)), MofNCompleteColumn(table_column=kept()),
            TextColumn("SPS {task.fields[sps]:>4.0f} return {task.fields[ret]}", table_column=kept()),
            TimeElapsedColumn(table_column=kept()), TextColumn("ETA", table_column=kept()),
            TimeRemainingColumn(table_column=kept())]


class Progress:
    """Progress of a run: a live bar (step, SPS, recent return, ETA) on a terminal; elsewhere (logs of batch jobs,
    pipes) a plain line every ``every_s`` seconds.  Silent when disabled."""

    def __init__(self, total: int, start: int, description: str, enabled: bool = True, every_s: float = 10.0,
                 stream=None):
        self.total, self.description, self.every_s = total, description, every_s
        self.stream = stream or sys.stdout
        self.bar, self.plain = None, False
        self.t0, self.start, self.last_print, self.printed_step = time.monotonic(), start, -math.inf, None
        self.state, self.note = (start, 0.0, math.nan), ""
        if not enabled:
            return
        if not self.stream.isatty():
            self.plain = True
            return
        from rich.progress import Progress as RichProgress

        self.bar = RichProgress(*bar_columns(), expand=True)
        self.task = self.bar.add_task(description, total=total, completed=start, sps=0.0, ret="n/a")
        self.bar.start()

    def update(self, step: int, sps: float, recent_return: float, note: str = "") -> None:
        """``note``: a phase to name beside the steps (e.g. "warm start 120/400"), empty once it is over."""
        self.state, self.note = (step, sps, recent_return), note
        if self.bar is not None:
            ret = "n/a" if math.isnan(recent_return) else f"{recent_return:8.1f}"
            description = f"{self.description} ({note})" if note else self.description
            self.bar.update(self.task, completed=step, sps=sps, ret=ret, description=description)
        elif self.plain and time.monotonic() - self.last_print >= self.every_s:
            self._line()

    def _line(self) -> None:
        step, sps, ret = self.state
        elapsed = time.monotonic() - self.t0
        rate = (step - self.start) / elapsed if elapsed > 0 else 0.0
        eta = f"{(self.total - step) / rate:.0f}s" if rate > 0 and step < self.total else "-"
        ret_text = "n/a" if math.isnan(ret) else f"{ret:.1f}"
        # a last iteration may overshoot the budget (a dynamic sampler's extra rounds): never more than 100%
        where = (f"step {step}/{self.total} ({100 * step / max(self.total, 1):.0f}%)" if step <= self.total
                 else f"step {step} (budget {self.total} reached)")
        note = f" [{self.note}]" if self.note else ""
        print(f"{self.description}: {where}{note} SPS {sps:.0f} return {ret_text} elapsed {elapsed:.0f}s ETA {eta}",
              file=self.stream, flush=True)
        self.last_print, self.printed_step = time.monotonic(), step

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
        elif self.plain and self.state[0] not in (self.start, self.printed_step):  # the final line, once
            self._line()
