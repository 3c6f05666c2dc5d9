"""The outer training loop and RNG bookkeeping shared by every trainer (single- and multi-agent).

A trainer provides ``cfg.checkpoint_every_s``, ``global_step`` (the x-axis of metrics.csv), ``elapsed``,
``batch_size`` (steps of ``global_step`` per iteration, for ``time/sps``), ``finished()``,
``iterate() -> metrics``, ``save()`` and ``recent_return()`` (the progress bar's return column).
"""
from __future__ import annotations

import random
import time
from typing import Optional

import numpy as np
import torch


def train_loop(trainer, logger, progress=None, max_iterations: Optional[int] = None) -> None:
    """Iterate until ``trainer.finished()`` (or after ``max_iterations`` iterations), logging every
    iteration and checkpointing every ``checkpoint_every_s`` seconds and on the way out."""
    last_ckpt, done = time.monotonic(), 0
    try:
        while not trainer.finished() and (max_iterations is None or done < max_iterations):
            tic = time.perf_counter()
            metrics = trainer.iterate()
            dt = time.perf_counter() - tic
            trainer.elapsed += dt
            metrics.setdefault("time/sps", trainer.batch_size / dt)
            logger.log(trainer.global_step, metrics)
            if progress is not None:
                progress.update(trainer.global_step, metrics["time/sps"], trainer.recent_return())
            if time.monotonic() - last_ckpt > trainer.cfg.checkpoint_every_s:
                trainer.save()
                last_ckpt = time.monotonic()
            done += 1
    finally:
        trainer.save()


def env_budget_spent(trainer) -> bool:
    """True when another iteration of ``batch_size`` env steps would exceed ``cfg.total_steps``."""
    return trainer.global_step + trainer.batch_size > trainer.cfg.total_steps


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
