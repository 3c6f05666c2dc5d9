"""Where an RL run's time goes, for both peers of experiments/lm_generic_benchmark.py, measured the same way: wall
clock around the functions that do each phase, held-out evaluation excluded.

- ``generation``: sampling the answers (this toolkit: :func:`dapo_lm.model.sample` as the rollout calls it; TRL:
  ``GRPOTrainer._generate``, ``model.generate`` plus decoding the completions to text);
- ``reward``: calling the reward functions (this toolkit: :func:`dapo_lm.rollout.score`, decoding included; TRL:
  ``_calculate_rewards``);
- ``scoring``: the no-gradient pass that scores pi_old (TRL: ``_get_per_token_logps_and_entropies`` called without
  gradients; this toolkit has none, its sampler keeps the log-probs it drew with: 0 s);
- the rest of the clock (the peers' own: ``rl_time_s``, and TRL's ``trainer.train()``) is the update: the loss's
  forward and backward passes, the optimiser, batching and bookkeeping.

Wrapping adds two ``perf_counter`` calls per call (microseconds against calls of milliseconds or more).

``python -m experiments.lm_phases OUT.json ARGS...``: ``dapo ARGS...`` with this toolkit's phases timed, written to
OUT.json as the run ends.
"""
from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path


class Phases:
    """Seconds per phase, summed over calls; nothing is counted while a paused function (evaluation) runs."""

    def __init__(self):
        self.seconds = {"generation": 0.0, "reward": 0.0, "scoring": 0.0}
        self.paused = False

    def timed(self, fn, phase: str, when=None):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if self.paused or (when is not None and not when()):
                return fn(*args, **kwargs)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - t0
        return wrapper

    def pausing(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            self.paused = True
            try:
                return fn(*args, **kwargs)
            finally:
                self.paused = False
        return wrapper


def time_dapo(phases: Phases) -> None:
    """Wrap this toolkit's phase functions (module and class attributes: every later call goes through them)."""
    import dapo_lm.rollout as rollout
    from dapo_lm.trainer import LMTrainer

    rollout.sample = phases.timed(rollout.sample, "generation")
    rollout.score = phases.timed(rollout.score, "reward")
    LMTrainer.evaluate = phases.pausing(LMTrainer.evaluate)


def time_trl(phases: Phases, trainer) -> None:
    """Wrap a ``GRPOTrainer``'s phase methods on the instance (trl 1.16 calls them through ``self``)."""
    import torch

    trainer._generate = phases.timed(trainer._generate, "generation")
    trainer._calculate_rewards = phases.timed(trainer._calculate_rewards, "reward")
    trainer._get_per_token_logps_and_entropies = phases.timed(
        trainer._get_per_token_logps_and_entropies, "scoring", when=lambda: not torch.is_grad_enabled())


if __name__ == "__main__":
    from core.run.cli import main

    out, phases = Path(sys.argv[1]), Phases()
    time_dapo(phases)
    try:
        code = main(sys.argv[2:])
    finally:
        out.write_text(json.dumps(phases.seconds))
    sys.exit(code)
