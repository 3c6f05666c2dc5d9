"""The sequence-generation family: GRPO-LM and DAPO-LM on locally generated tasks (see :mod:`core.run.registry`).
Each method imports the module it calls when called, so listing the algorithms imports no trainer."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from core.run.registry import Family
from dapo_lm import config


class SequenceGeneration(Family):
    """GRPO-LM and DAPO-LM: a small language model on verifiable generated tasks (:mod:`dapo_lm.runner`)."""

    name = "Sequence generation"
    algos = config.LM_ALGOS
    example = "dapo-lm"
    default_eval_episodes = None  # dapo eval: the run's held-out problems (--eval-problems) unless --episodes

    def config_class(self) -> type:
        return config.LMConfig

    def resolve(self, explicit: dict[str, Any], trust_env: bool = False):
        return config.resolve(explicit, trust_env=trust_env)

    def complete(self, cfg):
        return config.complete(cfg)

    def run(self, cfg, resume: bool):
        from dapo_lm.runner import run_experiment

        return run_experiment(cfg, resume)

    def load_config(self, run_dir: Path, trust_env: bool = False):
        from dapo_lm.runner import load_run_config

        return load_run_config(run_dir, trust_env=trust_env)

    def evaluate(self, run_dir: Path, episodes, seed: int, device: str, deterministic, trust_env: bool = False):
        from dapo_lm.runner import evaluate_run

        return evaluate_run(run_dir, episodes, seed, device, deterministic, trust_env=trust_env)

    def load(self, run_dir: Path, device: str = "cpu", env=None, trust_env: bool = False):
        from dapo_lm.api import load

        return load(run_dir, device=device, env=env, trust_env=trust_env)

    def summary_line(self, summary: dict) -> str:
        from dapo_lm.runner import summary_line

        return summary_line(summary)

    def eval_line(self, returns) -> str:
        from dapo_lm.runner import eval_line

        return eval_line(returns)

    def recipes_dir(self) -> Path:
        return config.RECIPES


FAMILY = SequenceGeneration()
