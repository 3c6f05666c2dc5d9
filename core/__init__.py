"""DAPO toolkit core: PPO, GRPO and DAPO for Gymnasium, and the building blocks every family shares.

Python API (``docs`` in README): :func:`train` a run, :func:`load` its agent (``predict``, ``evaluate``).
Building blocks, each usable on its own: the losses, GAE and GRPO's lambda rule, DAPO's dynamic sampler and its
temperature rules, the health monitors, the schedules, and the extension interface.  Algorithm definitions:
``docs/algorithms.md``.
"""
from core.algo.advantages import AutoLambda, gae, next_state_values
from core.run.api import Agent, EvalResult, RunResult, load, train
from core.config.options import ConfigError, RunInterrupted, TrainConfig
from core.extensions import Extension, register as register_extension
from core.algo.health import NonFiniteGuard, PolicyCollapseMonitor, ValueDivergenceMonitor
from core.algo.losses import (
    combined_objective,
    entropy_bonus,
    explained_variance,
    policy_loss,
    value_loss,
)
from core.algo.sampler import (
    DynamicSampler,
    Temperature,
    Transitions,
    draws_without_replacement,
    effective_sample_size,
    sampling_probs,
    systematic_draws,
)
from core.algo.schedules import annealed_lr, eps_v, linear, policy_lr
from core.training.update import UpdateSettings, ppo_update

__version__ = "0.2.0"
__all__ = [
    "train", "load", "Agent", "EvalResult", "RunResult", "TrainConfig", "ConfigError", "RunInterrupted",
    "policy_loss", "value_loss", "entropy_bonus", "combined_objective", "explained_variance",
    "gae", "next_state_values", "AutoLambda",
    "DynamicSampler", "Temperature", "Transitions", "sampling_probs", "effective_sample_size", "systematic_draws",
    "draws_without_replacement",
    "PolicyCollapseMonitor", "ValueDivergenceMonitor", "NonFiniteGuard",
    "linear", "eps_v", "annealed_lr", "policy_lr",
    "ppo_update", "UpdateSettings", "Extension", "register_extension",
]
