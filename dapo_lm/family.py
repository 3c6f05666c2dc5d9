"""The sequence-generation family: GRPO-LM and DAPO-LM on locally generated tasks (see :mod:`core.run.registry`).
Only :meth:`SequenceGeneration.run_side` imports the runner, so listing the algorithms imports no trainer."""
from __future__ import annotations

from core.run.registry import Family, RunSide
from dapo_lm import config


class SequenceGeneration(Family):
    """GRPO-LM and DAPO-LM: a small language model on verifiable generated tasks (:mod:`dapo_lm.runner`)."""

    name = "Sequence generation"
    algos = config.LM_ALGOS
    example = "dapo-lm"
    config_class = config.LMConfig
    recipes_dir = config.RECIPES
    default_eval_episodes = None  # dapo eval: the run's held-out problems (--eval-problems) unless --episodes

    def run_side(self) -> RunSide:
        from dapo_lm import api, runner

        return RunSide(resolve=config.resolve, complete=config.complete, run=runner.run_experiment,
                       load_config=runner.load_run_config, evaluate=runner.evaluate_run, load=api.load,
                       summary_line=runner.summary_line, eval_line=runner.eval_line)


FAMILY = SequenceGeneration()
