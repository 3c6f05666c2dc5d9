"""DAPO toolkit core: PPO, GRPO and DAPO for Gymnasium, and the building blocks every family shares.

Python API (``docs`` in README): :func:`train` a run, :func:`load` its agent (``predict``, ``evaluate``),
:func:`compare` runs, :func:`tune` run options with Optuna.
Building blocks, each usable on its own: the losses, GAE and GRPO's lambda rule, DAPO's dynamic sampler and its
temperature rules, the health monitors, the schedules, and the extension interface.  Algorithm definitions:
``docs/algorithms.md``.

The package is layered; each folder imports only the ones before it (tests/test_layers.py checks):
``config`` (options, parsing, trust) < ``algo`` (pure parts) < ``envs`` (the Gymnasium family's envs) <
``extensions`` < ``training`` (trainer, update, loop, checkpoints) < ``run`` (recipes, runner, API, CLI).
The names below are imported on first use (PEP 562), so ``import core.algo.losses`` does not load the run layer.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from core.config.lazy import lazy_exports

__version__ = "0.2.0"

# public name -> the module that defines it (under its own name unless given as "module:attribute")
_EXPORTS = {
    "train": "core.run.api", "load": "core.run.api", "Agent": "core.run.api", "EvalResult": "core.run.api",
    "RunResult": "core.run.api", "compare": "core.run.compare", "Comparison": "core.run.compare",
    "tune": "core.run.tune", "TuneResult": "core.run.tune",
    "TrainConfig": "core.config.options", "ConfigError": "core.config.errors", "RunInterrupted": "core.config.errors",
    "policy_loss": "core.algo.losses", "value_loss": "core.algo.losses", "entropy_bonus": "core.algo.losses",
    "combined_objective": "core.algo.losses", "explained_variance": "core.algo.losses",
    "gae": "core.algo.advantages", "next_state_values": "core.algo.advantages", "AutoLambda": "core.algo.advantages",
    "DynamicSampler": "core.algo.sampler", "Temperature": "core.algo.sampler", "Transitions": "core.algo.sampler",
    "sampling_probs": "core.algo.sampler", "effective_sample_size": "core.algo.sampler",
    "systematic_draws": "core.algo.sampler", "draws_without_replacement": "core.algo.sampler",
    "PolicyCollapseMonitor": "core.algo.health", "ValueDivergenceMonitor": "core.algo.health",
    "NonFiniteGuard": "core.algo.health",
    "linear": "core.algo.schedules", "eps_v": "core.algo.schedules", "annealed_lr": "core.algo.schedules",
    "policy_lr": "core.algo.schedules",
    "ppo_update": "core.training.update", "UpdateSettings": "core.training.update",
    "Extension": "core.extensions", "register_extension": "core.extensions:register",
}
__all__ = [  # the same names as _EXPORTS (tests/test_layers.py checks)
    "train", "load", "Agent", "EvalResult", "RunResult", "compare", "Comparison", "tune", "TuneResult", "TrainConfig", "ConfigError", "RunInterrupted",
    "policy_loss", "value_loss", "entropy_bonus", "combined_objective", "explained_variance",
    "gae", "next_state_values", "AutoLambda",
    "DynamicSampler", "Temperature", "Transitions", "sampling_probs", "effective_sample_size", "systematic_draws",
    "draws_without_replacement",
    "PolicyCollapseMonitor", "ValueDivergenceMonitor", "NonFiniteGuard",
    "linear", "eps_v", "annealed_lr", "policy_lr",
    "ppo_update", "UpdateSettings", "Extension", "register_extension",
]

if TYPE_CHECKING:  # the same names for type checkers and editors ("go to definition")
    from core.algo.advantages import AutoLambda, explained_variance, gae, next_state_values
    from core.algo.health import NonFiniteGuard, PolicyCollapseMonitor, ValueDivergenceMonitor
    from core.algo.losses import combined_objective, entropy_bonus, policy_loss, value_loss
    from core.algo.sampler import (DynamicSampler, Temperature, Transitions, draws_without_replacement,
                                   effective_sample_size, sampling_probs, systematic_draws)
    from core.algo.schedules import annealed_lr, eps_v, linear, policy_lr
    from core.config.errors import ConfigError, RunInterrupted
    from core.config.options import TrainConfig
    from core.extensions import Extension, register as register_extension
    from core.run.api import Agent, EvalResult, RunResult, load, train
    from core.run.compare import Comparison, compare
    from core.run.tune import TuneResult, tune
    from core.training.update import UpdateSettings, ppo_update


__getattr__ = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
