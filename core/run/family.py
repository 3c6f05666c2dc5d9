"""The single-agent family: PPO, GRPO and DAPO on Gymnasium environments (see :mod:`core.run.registry`), and the
``dapo recipes`` and ``dapo bench`` commands.  Each method imports the module it calls when called, so listing the
algorithms imports no trainer."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from core.config.options import ALGOS
from core.run.bench import BENCHMARKS, bench
from core.run.registry import Family


class Gymnasium(Family):
    """PPO, GRPO and DAPO on Gymnasium environments (:mod:`core.run.runner`, :mod:`core.training.trainer`)."""

    name = "Gymnasium"
    algos = ALGOS
    example = "dapo"

    def config_class(self) -> type:
        from core.config.options import TrainConfig

        return TrainConfig

    def resolve(self, explicit: dict[str, Any], trust_env: bool = False):
        from core.run.runner import resolve_for_env

        return resolve_for_env(explicit, trust_env=trust_env)

    def complete(self, cfg):
        from core.run.presets import complete

        return complete(cfg)

    def run(self, cfg, resume: bool) -> Optional[dict]:
        from core.run.runner import run_experiment

        return run_experiment(cfg, resume)

    def load_config(self, run_dir: Path, trust_env: bool = False):
        from core.run.rundir import load_run_config

        return load_run_config(run_dir, trust_env=trust_env)

    def evaluate(self, run_dir: Path, episodes, seed: int, device: str, deterministic, trust_env: bool = False):
        from core.run.evaluation import evaluate_run

        return evaluate_run(run_dir, episodes, seed, device, deterministic, trust_env=trust_env)

    def load(self, run_dir: Path, device: str = "cpu", env=None, trust_env: bool = False):
        from core.run.api import load_agent

        return load_agent(run_dir, device=device, env=env, trust_env=trust_env)

    def summary_line(self, summary: dict) -> str:
        from core.run.runner import summary_line

        return summary_line(summary)

    def recipes_dir(self) -> Path:
        from core.run.recipes import HERE

        return HERE


class Recipes:
    """``dapo recipes [NAME]``: every family's shipped recipes, or one merged with its base recipes."""

    name = "recipes"
    help = "list the shipped recipes, or show one (dapo recipes NAME)"
    raw = False

    def add_arguments(self, parser) -> None:
        from core.run.cli import add_recipes_parser

        add_recipes_parser(parser)

    def run(self, args) -> int:
        from core.run.cli import recipes_command

        return recipes_command(args)


class Bench:
    """``dapo bench NAME ...``: run a benchmark script of a source checkout's experiments/ (:mod:`core.run.bench`)."""

    name = "bench"
    help = "reproduce a benchmark table: " + " | ".join(BENCHMARKS) + " (dapo bench NAME --help)"
    raw = True

    def add_arguments(self, parser) -> None:
        pass

    def run(self, argv: list[str]) -> int:
        return bench(argv)


FAMILY = Gymnasium()
COMMANDS = [Recipes(), Bench()]
