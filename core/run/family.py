"""The single-agent family: PPO, GRPO and DAPO on Gymnasium environments (see :mod:`core.run.registry`)."""
from core.config.options import ALGOS
from core.run.registry import Command, Family

FAMILY = Family(
    name="Gymnasium", algos=ALGOS, config="core.config.options:TrainConfig", resolve="core.run.runner:resolve_for_env",
    complete="core.run.presets:complete", run="core.run.runner:run_experiment", load_config="core.run.rundir:load_run_config",
    evaluate="core.run.evaluation:evaluate_run", load="core.run.api:load_agent", summary_line="core.run.runner:summary_line",
    example="dapo", recipes="core.run.recipes:HERE")
COMMANDS = [Command("recipes", "list the shipped recipes, or show one (dapo recipes NAME)",
                    add_parser="core.run.cli:add_recipes_parser", handler="core.run.cli:recipes_command")]
