"""Presets that fill a :class:`~core.config.TrainConfig`'s unset (``None``) fields.

Three layers, the most specific first: env family x algorithm (``FAMILY_ALGO_PRESETS``: DAPO's MuJoCo settings,
chosen by the 1M-step benchmark), algorithm (``ALGO_PRESETS``) and env family (``ENV_PRESETS``), then the SPEC's
eps_V schedule.  :func:`resolve` applies them and validates the result.
"""
from __future__ import annotations

import dataclasses
import math

from core.config import ALGOS, ConfigError, TrainConfig, joint_grad_clip, validate

# Env-family presets: "classic" follows the RL-Zoo CartPole tuning, "continuous" CleanRL's MuJoCo PPO,
# "atari" CleanRL's ppo_atari (rewards sign-clipped by the env, so no reward scaling).
_KL_RULE_OFF = dict(target_kl=0.0, kl_lr_max_scale=10.0)
_FLOOR_SHAPE_OFF = dict(log_std_min_anneal=False, log_std_min_anneal_start=0.0, log_std_min_anneal_end=1.0,
                        log_std_min_relative=False)
_COMMON = dict(backend="sync", clip_eps=0.2, ent_coef=0.0, eval_deterministic=True, precision="fp32",
               log_std_init=0.0, **_KL_RULE_OFF, **_FLOOR_SHAPE_OFF)
ENV_PRESETS = {
    "classic": dict(_COMMON, num_envs=8, num_steps=32, norm_obs=False, norm_reward=False, gamma=0.98,
                    gae_lambda=0.8, num_epochs=20, num_minibatches=1, lr=1e-3),
    "continuous": dict(_COMMON, num_envs=1, num_steps=2048, norm_obs=True, norm_reward=True, gamma=0.99,
                       gae_lambda=0.95, num_epochs=10, num_minibatches=32, lr=3e-4),
    "atari": dict(_KL_RULE_OFF, **_FLOOR_SHAPE_OFF, backend="auto", precision="auto", clip_eps=0.1, ent_coef=0.01,
                  eval_deterministic=False, log_std_init=0.0, num_envs=8, num_steps=128, norm_obs=False,
                  norm_reward=False, gamma=0.99, gae_lambda=0.95, num_epochs=4, num_minibatches=4, lr=2.5e-4),
}
ALGO_PRESETS = {
    "ppo": dict(auto_lambda=False, separate_optimizers=False, clip_value=False, dynamic_sampling=False,
                health_monitors=False, collapse_confirm=0),
    "grpo": dict(auto_lambda=True, separate_optimizers=False, clip_value=True, dynamic_sampling=False,
                 health_monitors=False, collapse_confirm=0),
    "dapo": dict(auto_lambda=False, separate_optimizers=True, clip_value=True, dynamic_sampling=True,
                 health_monitors=True, collapse_confirm=0),
}
# DAPO on continuous control (MuJoCo), chosen by the 1M-step benchmark (issue #4; P = share of run pairs won on
# HalfCheetah / Walker2d / Humanoid / Ant; runs and reasons: README "Why each MuJoCo default", experiments/results/MUJOCO.md):
# 1. GRPO's explained-variance lambda rule and a constant eps_V of 0.2 (vs the SPEC's fixed lambda, eps_V 0.5 -> 0.3):
#    P 0.56 / 0.40 / 0.84 / 0.84.
# 2. Uniform minibatches (vs the advantage-weighted draws, which raise the per-update KL): P 0.64 / 0.72 / 0.56 / 0.40;
#    on the later defaults the draws lost again (P 0.24 / 0.40 / 0.56 / 0.28). `--dynamic-sampling` restores them.
# 3. Initial action std e^-1 (vs CleanRL's 1): with std 1 most HalfCheetah runs learned to run on their back; GRPO and
#    PPO gain as much, so the baselines keep std 1 to stay comparable with published numbers.
# 4. One gradient-norm clip over both networks, as PPO and GRPO have (vs one per network): P 0.45 / 0.77 / 0.34 / 0.70.
#    With 1-4, DAPO trains exactly as GRPO with std e^-1 until a health monitor fires, the brake (6) acts or the
#    floor (7) binds (tests/test_trainer.py).
# 5. A collapse remedy that waits for a second window of fresh episodes: falls filled the 10-episode window on
#    their own and fired the remedy in 11 of 20 Walker2d / Ant runs; waiting, it fired once; returns level.
# 6. A KL brake on the policy rate (/1.5 after an update whose approx KL exceeds 0.1, never above the annealed rate):
#    Humanoid took KL steps of 0.17-0.25; braked 1938 vs 1036 (10 seeds, P 0.75), Ant 1961 vs 1849 (P 0.54); idle
#    on HalfCheetah / Walker2d, where an idle brake leaves a run identical to the last digit.
# 7. A floor on the action std, e^-1.2 = 0.30 of each action's half-range, held for the first half of training and
#    then falling to zero: DAPO's walkers narrowed to std ~0.15 while GRPO's, from std 1, end at ~0.31 and walk
#    faster. Walker2d 4039 vs 3385 (P 0.69), HalfCheetah 5812 vs 5728 (P 0.48), Ant 1619 vs 1961 (P 0.36, the price);
#    Humanoid's +-0.4 actions put its floor at std 0.12, below where DAPO narrows it: its runs are unchanged. The
#    one setting measured whose mean beats GRPO's and PPO's on all four envs (10 seeds each).
# Other env families keep the SPEC's settings.
FAMILY_ALGO_PRESETS = {("continuous", "dapo"): dict(auto_lambda=True, eps_v_start=0.2, eps_v_schedule="constant",
                                                    dynamic_sampling=False, log_std_init=-1.0, joint_grad_clip=True,
                                                    collapse_confirm=1, target_kl=0.05, kl_lr_max_scale=1.0,
                                                    log_std_min=-1.2, log_std_min_relative=True,
                                                    log_std_min_anneal=True, log_std_min_anneal_start=0.5)}
SPEC_EPS_V = dict(eps_v_start=0.5, eps_v_schedule="linear")  # SPEC 2.3's value-clip schedule


def resolve(cfg: TrainConfig, env_family: str) -> TrainConfig:
    """Fill ``None`` fields from the presets (env family x algorithm, algorithm, env family, the SPEC's
    eps_V schedule), then validate."""
    if cfg.algo not in ALGOS:
        raise ConfigError(f"unknown --algo '{cfg.algo}'; choose one of: {', '.join(ALGOS)}")
    if cfg.log_std_min is not None:  # a given floor replaces the preset floor whole: its shape flags off unless given
        cfg = dataclasses.replace(cfg, **{k: v for k, v in _FLOOR_SHAPE_OFF.items() if getattr(cfg, k) is None})
    filled = {}
    for preset in (FAMILY_ALGO_PRESETS.get((env_family, cfg.algo), {}), ALGO_PRESETS[cfg.algo],
                   ENV_PRESETS[env_family], SPEC_EPS_V):  # the most specific preset first: first one wins
        filled.update({k: v for k, v in preset.items() if getattr(cfg, k) is None and k not in filled})
    out = dataclasses.replace(cfg, **filled)
    if out.window is None:
        out.window = out.num_envs * out.num_steps
    if out.critic_lr is None:
        out.critic_lr = out.lr
    out.hidden_sizes = tuple(out.hidden_sizes)  # argparse gives lists
    out.critic_hidden_sizes = tuple(out.hidden_sizes if out.critic_hidden_sizes is None else out.critic_hidden_sizes)
    if out.log_std_min == -math.inf:  # "no floor", spelled so that it overrides the preset's
        out.log_std_min = None
    if out.proximal_clip is None:
        out.proximal_clip = out.overlap
    out.joint_grad_clip = joint_grad_clip(out)
    from core.networks import resolve_precision

    out.precision = resolve_precision(out.precision)
    if env_family == "atari" and out.norm_obs:
        raise ConfigError("--norm-obs does not apply to Atari frames (the CNN scales pixels by 1/255); "
                          "use --no-norm-obs")
    validate(out)
    return out
