"""The sequence-generation family: GRPO-LM and DAPO-LM on locally generated tasks (see :mod:`core.run.registry`)."""
from core.run.registry import Family
from dapo_lm.config import LM_ALGOS

FAMILY = Family(
    name="Sequence generation", algos=LM_ALGOS, config="dapo_lm.config:LMConfig", resolve="dapo_lm.config:resolve",
    complete="dapo_lm.config:complete", run="dapo_lm.runner:run_experiment",
    load_config="dapo_lm.runner:load_run_config",
    evaluate="dapo_lm.runner:evaluate_run", load="dapo_lm.api:load", summary_line="dapo_lm.runner:summary_line",
    example="dapo-lm", eval_line="dapo_lm.runner:eval_line", recipes="dapo_lm.config:RECIPES")
