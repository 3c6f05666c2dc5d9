"""The multi-agent family: IPPO, MAPPO, DAPO-MA and MADDPG on PettingZoo (see :mod:`core.run.registry`).  Each
method imports the module it calls when called, so listing the algorithms imports no trainer."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from core.run.registry import Family
from dapo_ma import config


class PettingZoo(Family):
    """IPPO, MAPPO, DAPO-MA and MADDPG on PettingZoo parallel envs (:mod:`dapo_ma.runner`)."""

    name = "PettingZoo"
    algos = config.MA_ALGOS
    example = "mappo"

    def config_class(self) -> type:
        return config.MAConfig

    def resolve(self, explicit: dict[str, Any], trust_env: bool = False):
        return config.resolve(explicit, trust_env=trust_env)

    def complete(self, cfg):
        return config.complete(cfg)

    def run(self, cfg, resume: bool):
        from dapo_ma.runner import run_experiment

        return run_experiment(cfg, resume)

    def load_config(self, run_dir: Path, trust_env: bool = False):
        from dapo_ma.runner import load_run_config

        return load_run_config(run_dir, trust_env=trust_env)

    def evaluate(self, run_dir: Path, episodes, seed: int, device: str, deterministic, trust_env: bool = False):
        from dapo_ma.api import evaluate_run

        return evaluate_run(run_dir, episodes, seed, device, deterministic, trust_env=trust_env)

    def load(self, run_dir: Path, device: str = "cpu", env=None, trust_env: bool = False):
        from dapo_ma.api import load

        return load(run_dir, device=device, env=env, trust_env=trust_env)

    def summary_line(self, summary: dict) -> str:
        from dapo_ma.runner import summary_line

        return summary_line(summary)

    def claims_env(self, env: str) -> bool:
        from dapo_ma.envs import claims_env

        return claims_env(env)

    def env_reference(self, factory) -> str:
        from dapo_ma.envs import env_reference

        return env_reference(factory)

    def recipes_dir(self) -> Path:
        return config.RECIPES


FAMILY = PettingZoo()
