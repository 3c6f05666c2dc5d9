"""The multi-agent family: IPPO, MAPPO, DAPO-MA and MADDPG on PettingZoo (see :mod:`core.run.registry`).  Only
:meth:`PettingZoo.run_side` imports the runner (and the env helpers only when called), so listing the algorithms
imports no trainer."""
from __future__ import annotations

from core.run.registry import Family, RunSide
from dapo_ma import config


class PettingZoo(Family):
    """IPPO, MAPPO, DAPO-MA and MADDPG on PettingZoo parallel envs (:mod:`dapo_ma.runner`)."""

    name = "PettingZoo"
    algos = config.MA_ALGOS
    example = "mappo"
    config_class = config.MAConfig
    recipes_dir = config.RECIPES

    def run_side(self) -> RunSide:
        from dapo_ma import api, runner

        return RunSide(resolve=config.resolve, complete=config.complete, run=runner.run_experiment,
                       load_config=runner.load_run_config, evaluate=api.evaluate_run, load=api.load,
                       summary_line=runner.summary_line, video=True)

    def claims_env(self, env: str) -> bool:
        from dapo_ma.envs import claims_env

        return claims_env(env)

    def env_reference(self, factory) -> str:
        from dapo_ma.envs import env_reference

        return env_reference(factory)


FAMILY = PettingZoo()
