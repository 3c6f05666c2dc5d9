"""The outer training loop and RNG bookkeeping shared by every trainer (single- and multi-agent).

A trainer provides ``cfg.checkpoint_every_s``, ``global_step`` (the x-axis of metrics.csv), ``elapsed``,
``batch_size`` (steps of ``global_step`` per iteration, for ``time/sps``), ``finished()``,
``iterate() -> metrics``, ``save()`` and ``recent_return()`` (the progress bar's return column); optionally
``progress_note()``, a phase the progress display names (e.g. a warm start before ``global_step`` moves).
:func:`observe_iterations` lets a caller watch every iteration of the runs it starts (``dapo tune``'s pruning).
"""
from __future__ import annotations

import contextlib
import random
import time
from typing import Callable, Iterator, Optional

import numpy as np
import torch


_OBSERVERS: list[Callable[..., None]] = []  # observe_iterations' hooks, innermost last


@contextlib.contextmanager
def observe_iterations(hook: Callable[..., None]) -> Iterator[None]:
    """Call ``hook(trainer, metrics)`` after each iteration that :func:`train_loop` logs in this process, while the
    ``with`` block runs (e.g. around ``core.train``), without passing it through the runner.  An exception the hook
    raises ends the run as any error does: the iteration's checkpoint is written first (``dapo tune`` prunes a trial
    this way)."""
    _OBSERVERS.append(hook)
    try:
        yield
    finally:
        _OBSERVERS.remove(hook)


def train_loop(trainer, logger, progress=None, max_iterations: Optional[int] = None) -> None:
    """Iterate until ``trainer.finished()`` (or after ``max_iterations`` iterations), logging every iteration and
    checkpointing after the first, then every ``checkpoint_every_s`` seconds, and on the way out.  An iteration cut
    short (a second Ctrl-C, an error) leaves the trainer half-updated: then the last checkpoint stays as it is."""
    last_ckpt, done, consistent = time.monotonic(), 0, True
    try:
        while not trainer.finished() and (max_iterations is None or done < max_iterations):
            tic = time.perf_counter()
            consistent = False
            metrics = trainer.iterate()
            consistent = True
            dt = time.perf_counter() - tic
            trainer.elapsed += dt
            metrics.setdefault("time/sps", trainer.batch_size / dt)
            logger.log(trainer.global_step, metrics)
            if progress is not None:
                note = trainer.progress_note() if hasattr(trainer, "progress_note") else ""
                progress.update(trainer.global_step, metrics["time/sps"], trainer.recent_return(), note)
            done += 1
            for hook in tuple(_OBSERVERS):
                hook(trainer, metrics)
            if done == 1 or time.monotonic() - last_ckpt > trainer.cfg.checkpoint_every_s:
                trainer.save()
                last_ckpt = time.monotonic()
    finally:
        if consistent:
            trainer.save()


def env_budget_spent(trainer) -> bool:
    """True once ``cfg.total_steps`` env steps are done: a budget that is not a multiple of ``batch_size`` is rounded
    up to whole iterations (:func:`rounded_budget`; the run's start line says so)."""
    return trainer.global_step >= trainer.cfg.total_steps


def rounded_budget(total_steps: int, batch_size: int) -> int:
    """The env steps a run of ``total_steps`` takes in whole iterations of ``batch_size``."""
    return -(-total_steps // batch_size) * batch_size


def rng_state() -> dict:
    """Python, NumPy, torch (and CUDA) generator states, for exact resume."""
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_state(s: dict) -> None:
    torch.set_rng_state(s["torch"])
    np.random.set_state(s["numpy"])
    random.setstate(s["python"])
    if s["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
