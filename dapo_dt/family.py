"""The Decision Transformer family: DT, DAPO-DT and the BC baselines on Minari datasets (see
:mod:`core.run.registry`), and the ``dapo dataset`` command that makes (Atari) or inspects them.  Only
:meth:`DecisionTransformer.run_side` imports the runner, so listing the algorithms imports no trainer."""
from __future__ import annotations

from core.run.registry import Family, RunSide
from dapo_dt import config
from dapo_dt.cli import Dataset


class DecisionTransformer(Family):
    """DT, DAPO-DT, bc and pct-bc, offline on Minari datasets (Atari frames or flat states) then, for DT and DAPO-DT,
    online (:mod:`dapo_dt.runner`)."""

    name = "Decision Transformer"
    algos = config.DT_ALGOS
    example = "dapo-dt"
    config_class = config.DTConfig
    recipes_dir = config.RECIPES

    def run_side(self) -> RunSide:
        from dapo_dt import api, runner

        return RunSide(resolve=config.resolve, complete=config.complete, run=runner.run_experiment,
                       load_config=runner.load_run_config, evaluate=runner.evaluate_run, load=api.load,
                       summary_line=runner.summary_line, eval_line=runner.eval_line)


FAMILY = DecisionTransformer()
COMMANDS = [Dataset()]
