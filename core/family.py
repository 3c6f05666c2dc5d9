"""The single-agent family: PPO, GRPO and DAPO on Gymnasium environments (see :mod:`core.registry`)."""
from core.config import ALGOS
from core.registry import Command, Family

FAMILY = Family(
    name="Gymnasium", algos=ALGOS, config="core.config:TrainConfig", resolve="core.runner:resolve_for_env",
    complete="core.presets:complete", run="core.runner:run_experiment", load_config="core.runner:load_run_config",
    evaluate="core.evaluation:evaluate_run", load="core.api:load_agent", summary_line="core.runner:summary_line",
    example="dapo", recipes="core.recipes:HERE")
COMMANDS = [Command("recipes", "list the shipped recipes, or show one (dapo recipes NAME)",
                    add_parser="core.cli:add_recipes_parser", handler="core.cli:recipes_command")]
