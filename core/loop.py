"""The outer training loop and RNG bookkeeping shared by every trainer (single- and multi-agent).

A trainer provides ``cfg.total_steps``, ``cfg.checkpoint_every_s``, ``global_step``, ``iteration``,
``elapsed``, ``batch_size`` (env steps per iteration), ``iterate() -> metrics``, ``should_stop()``,
``save()`` and ``recent_return()``.
"""
from __future__ import annotations

import random
import time
from typing import Optional

import numpy as np
import torch


def train_loop(trainer, logger, progress=None, max_iterations: Optional[int] = None) -> None:
    """Iterate until ``total_steps`` (or ``max_iterations`` more iterations, or a stop request), logging
    every iteration and checkpointing every ``checkpoint_every_s`` seconds and on the way out."""
    last_ckpt, start_iter = time.monotonic(), trainer.iteration
    try:
        while trainer.global_step + trainer.batch_size <= trainer.cfg.total_steps and not trainer.should_stop():
            if max_iterations is not None and trainer.iteration - start_iter >= max_iterations:
                break
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
    finally:
        trainer.save()


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
