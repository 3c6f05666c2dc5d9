"""The multi-agent family: IPPO, MAPPO, DAPO-MA and MADDPG on PettingZoo (see :mod:`core.run.registry`)."""
from core.run.registry import Family
from dapo_ma.config import MA_ALGOS

FAMILY = Family(
    name="PettingZoo", algos=MA_ALGOS, config="dapo_ma.config:MAConfig",
    resolve="dapo_ma.config:resolve", complete="dapo_ma.config:complete", run="dapo_ma.runner:run_experiment",
    load_config="dapo_ma.runner:load_run_config", evaluate="dapo_ma.api:evaluate_run",
    load="dapo_ma.api:load", summary_line="dapo_ma.runner:summary_line", claims_env="dapo_ma.envs:claims_env",
    example="mappo", env_reference="dapo_ma.envs:env_reference", recipes="dapo_ma.config:RECIPES")
