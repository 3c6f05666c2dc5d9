"""The single-agent family: PPO, GRPO and DAPO on Gymnasium environments (see :mod:`core.run.registry`), and the
``dapo recipes``, ``dapo bench``, ``dapo compare`` and ``dapo export`` commands.  Only :meth:`Gymnasium.run_side`
imports the runner, so listing the algorithms imports no trainer."""
from __future__ import annotations

from core.config.options import ALGOS, TrainConfig
from core.run.bench import BENCHMARKS, bench
from core.run.cli import Export, Recipes
from core.run.compare import Compare
from core.run.recipes import HERE
from core.run.registry import Family, RunSide


class Gymnasium(Family):
    """PPO, GRPO and DAPO on Gymnasium environments (:mod:`core.run.runner`, :mod:`core.training.trainer`)."""

    name = "Gymnasium"
    algos = ALGOS
    example = "dapo"
    config_class = TrainConfig
    recipes_dir = HERE

    def run_side(self) -> RunSide:
        from core.run import api, evaluation, presets, rundir, runner

        return RunSide(resolve=runner.resolve_for_env, complete=presets.complete, run=runner.run_experiment,
                       load_config=rundir.load_run_config, evaluate=evaluation.evaluate_run, load=api.load_agent,
                       summary_line=runner.summary_line, export=api.export_run, video=True)


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
COMMANDS = [Recipes(), Bench(), Compare(), Export()]
