"""The Decision Transformer family: DT and DAPO-DT on Atari datasets (see :mod:`core.run.registry`), and the
``dapo dataset`` command that makes those datasets.  Each method imports the module it calls when called, so listing
the algorithms imports no trainer."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from core.run.registry import Family
from dapo_dt import config


class DecisionTransformer(Family):
    """DT and DAPO-DT, offline on Minari Atari datasets then online (:mod:`dapo_dt.runner`)."""

    name = "Decision Transformer"
    algos = config.DT_ALGOS
    example = "dapo-dt"

    def config_class(self) -> type:
        return config.DTConfig

    def resolve(self, explicit: dict[str, Any], trust_env: bool = False):
        return config.resolve(explicit, trust_env=trust_env)

    def complete(self, cfg):
        return config.complete(cfg)

    def run(self, cfg, resume: bool):
        from dapo_dt.runner import run_experiment

        return run_experiment(cfg, resume)

    def load_config(self, run_dir: Path, trust_env: bool = False):
        from dapo_dt.runner import load_run_config

        return load_run_config(run_dir, trust_env=trust_env)

    def evaluate(self, run_dir: Path, episodes, seed: int, device: str, deterministic, trust_env: bool = False):
        from dapo_dt.runner import evaluate_run

        return evaluate_run(run_dir, episodes, seed, device, deterministic, trust_env=trust_env)

    def load(self, run_dir: Path, device: str = "cpu", env=None, trust_env: bool = False):
        from dapo_dt.api import load

        return load(run_dir, device=device, env=env, trust_env=trust_env)

    def summary_line(self, summary: dict) -> str:
        from dapo_dt.runner import summary_line

        return summary_line(summary)

    def recipes_dir(self) -> Path:
        return config.RECIPES


class Dataset:
    """``dapo dataset collect|info``: make or inspect the offline Atari datasets (:mod:`dapo_dt.cli`)."""

    name = "dataset"
    help = "make or inspect offline Atari datasets (Minari) for dt / dapo-dt"
    raw = False

    def add_arguments(self, parser) -> None:
        from dapo_dt.cli import add_dataset_parser

        add_dataset_parser(parser)

    def run(self, args) -> int:
        from dapo_dt.cli import dataset_command

        return dataset_command(args)


FAMILY = DecisionTransformer()
COMMANDS = [Dataset()]
