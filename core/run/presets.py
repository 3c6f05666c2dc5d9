"""Resolve a single-agent run's options into a complete :class:`~core.config.options.TrainConfig`.

Layers, each winning over the ones before (:mod:`core.run.recipes`): the dataclass defaults, the env family's recipe
(every algorithm gets it alike), the algorithm's (the same on every env), the user's ``--recipe`` files in order, then
the options given explicitly.  No recipe is attached to a pair of family and algorithm: an algorithm name means one
thing on every env, and env-specific tuning of one algorithm (``dapo-mujoco``) is a recipe the user names.  Derived values (window, critic lr, the
proximal clip under ``--overlap``, CNN precision) are filled next, and the result is validated; explicit options
the resolved algorithm or the env family would ignore are refused.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from core import extensions
from core.run import recipes
from core.config.options import ALGOS, INACTIVE_WHEN, TrainConfig, check_inactive, flag, joint_grad_clip, validate
from core.config.errors import ConfigError

# Options that act only on some env families: given explicitly elsewhere they are refused, as INACTIVE_WHEN's are.
# name -> (the families it acts on, why)
ACTS_ON_FAMILIES = {
    "log_std_init": (("continuous",), "it is the initial log-std of Gaussian policies, which Box-action envs get; "
                                      "this env has Discrete actions"),
    "precision": (("atari",), "it sets the arithmetic of the Atari CNN; MLPs always run fp32"),
}


def layers(algo: str, env_family: str) -> list[str]:
    """Names of the shipped recipes applied, in order, for ``algo`` on an env of ``env_family``: the family's recipe,
    then the algorithm's; the user's ``--recipe`` files follow them."""
    return [env_family, algo]


def resolve(explicit: dict[str, Any], env_family: str) -> TrainConfig:
    """The complete config for options ``explicit`` (field name -> value, as given by the user) on an env of
    ``env_family``; ``explicit["recipe"]`` names the user's recipes."""
    explicit = recipes.given(explicit, TrainConfig)
    values, algo, user = recipes.layered(explicit, TrainConfig, ALGOS, lambda a: layers(a, env_family))
    specs = dict(values.get("extensions", {}))
    if values.get("overlap") and "proximal_clip" not in specs:  # stale data: re-anchor unless turned off
        specs["proximal_clip"] = {}
    values["extensions"] = extensions.resolve(specs)
    cfg = TrainConfig(**{**values, "recipe": user})
    if cfg.window is None:
        cfg.window = cfg.num_envs * cfg.num_steps
    if cfg.critic_lr is None:
        cfg.critic_lr = cfg.lr
    cfg.hidden_sizes = tuple(cfg.hidden_sizes)
    cfg.joint_grad_clip = joint_grad_clip(cfg)
    from core.algo.networks import resolve_precision

    cfg.precision = resolve_precision(cfg.precision)
    if env_family == "atari" and cfg.norm_obs:
        raise ConfigError("--norm-obs does not apply to Atari frames (the CNN scales pixels by 1/255); use --no-norm-obs")
    validate(cfg)
    check_inactive(cfg, explicit, INACTIVE_WHEN)
    for name, (families, why) in ACTS_ON_FAMILIES.items():
        if name in explicit and env_family not in families:
            raise ConfigError(f"{flag(name)} has no effect on {cfg.env} ({env_family} family): {why}; drop it")
    return cfg


def complete(cfg: TrainConfig) -> TrainConfig:
    """A saved (already resolved) config, validated as it stands: resume and eval must not re-apply presets."""
    cfg = dataclasses.replace(cfg, hidden_sizes=tuple(cfg.hidden_sizes), recipe=tuple(cfg.recipe),
                              extensions=extensions.resolve(cfg.extensions))
    validate(cfg)
    return cfg
