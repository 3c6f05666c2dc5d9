"""The Decision Transformer family: DT and DAPO-DT on Atari datasets (see :mod:`core.run.registry`), and the
``dapo dataset`` command that makes those datasets."""
from core.run.registry import Command, Family
from dapo_dt.config import DT_ALGOS

FAMILY = Family(
    name="Decision Transformer", algos=DT_ALGOS, config="dapo_dt.config:DTConfig", resolve="dapo_dt.config:resolve",
    complete="dapo_dt.config:complete", run="dapo_dt.runner:run_experiment", load_config="dapo_dt.runner:load_run_config",
    evaluate="dapo_dt.runner:evaluate_run", load="dapo_dt.api:load", summary_line="dapo_dt.runner:summary_line",
    example="dapo-dt", recipes="dapo_dt.config:RECIPES")
COMMANDS = [Command("dataset", "make or inspect offline Atari datasets (Minari) for dt / dapo-dt",
                    add_parser="dapo_dt.cli:add_dataset_parser", handler="dapo_dt.cli:dataset_command")]
