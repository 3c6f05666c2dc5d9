"""Multi-agent training configuration: one dataclass for IPPO, MAPPO, DAPO-MA and MADDPG (docs/algorithms.md).

Like :mod:`core.config.options`, an algorithm is a config: fields left at ``None`` are filled by
:func:`resolve` from ``ALGO_PRESETS``.  Every field's docstring becomes its ``--help`` text.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from core.run import recipes
from core.config.parsing import parse_kwargs_text
from core.config.groups import (HEALTH_FIELDS, DivergenceOptions, HealthOptions, ProgressOptions, RunOptions,
                                SamplerOptions, WandbOptions)
from core.config.errors import ConfigError
from core.config.limits import check_env_sizes, check_memory
from core.config.options import check_inactive, check_minibatches, check_numbers, check_shared

MA_ALGOS = ("ippo", "mappo", "dapo-ma", "maddpg", "dapo-maddpg")
OFF_POLICY_ALGOS = ("maddpg", "dapo-maddpg")
ON_POLICY_ALGOS = ("ippo", "mappo", "dapo-ma")


@dataclass
class MAConfig(RunOptions, SamplerOptions, HealthOptions, DivergenceOptions, ProgressOptions, WandbOptions):
    """Train IPPO, MAPPO, DAPO-MA or MADDPG on a PettingZoo parallel environment."""

    # --- experiment
    env: str = "simple_spread_v3"
    """PettingZoo parallel env: an mpe2 task, a module with parallel_env(), or 'module:make_env'. E.g.
    simple_spread_v3, pettingzoo.butterfly.pistonball_v6, or a function returning a ParallelEnv. Other than mpe2 tasks,
    eval and --resume import the module only with --trust-env (config.yaml names it)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Env constructor arguments, e.g. 'N=3 max_cycles=25 continuous_actions=True'. Values are Python literals
    (numbers, quoted strings, lists, tuples, dicts) or YAML flow lists and maps, else strings."""
    algo: str = "dapo-ma"
    """Algorithm (all are listed above). In short, ippo: local critics; mappo: a centralised critic, one clip;
    dapo-ma: per-agent eps_pi/eps_V over a shared dynamic-sampling buffer; maddpg: off-policy CTDE; dapo-maddpg:
    MADDPG with shared replay priorities and per-agent clips (docs/algorithms.md)."""
    total_steps: int = 200_000
    """Total environment steps: joint steps of one env copy (all agents act once), summed over copies."""
    # +RunOptions

    # --- rollout
    num_envs: Optional[int] = None
    """Env copies stepped in a batch (preset: 16 on-policy, 8 maddpg)."""
    num_steps: int = 25
    """Steps per env copy per rollout (on-policy algorithms; 25 = one MPE episode)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    norm_reward: bool = True
    """Scale rewards by the running std of each agent's discounted return (on-policy algorithms), so
    that the value clip ranges act on O(1) values."""

    # --- optimisation
    parameter_sharing: bool = True
    """One actor and one critic for all agents, with a one-hot agent-id input; off: one network per agent."""
    centralised_critic: Optional[bool] = None
    """Critic sees the joint observation of all agents (preset: on, except ippo)."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the actor and critic MLPs."""
    num_epochs: int = 10
    """Update epochs per rollout (on-policy)."""
    num_minibatches: int = 1
    """Minibatches per epoch (on-policy); the rollout holds num_envs*num_steps*n_agents transitions."""
    lr: float = 7e-4
    """Policy learning rate (also the critic's when optimisers are not separate)."""
    critic_lr: float = 1e-3
    """Critic learning rate when actor and critic have separate optimisers (dapo-ma, maddpg)."""
    anneal_lr: bool = True
    """Linearly anneal the on-policy learning rates to zero over training."""
    separate_optimizers: Optional[bool] = None
    """Separate actor/critic learning rates and gradient clipping (preset: on for dapo-ma only)."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip (per network when optimisers are separate)."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient c_H."""
    vf_coef: float = 0.5
    """Value-loss coefficient c_V (the policy-value balance lam for dapo-ma)."""

    # --- clipping
    clip_eps: float = 0.2
    """Policy clip eps; the initial eps_pi[i] of every agent for dapo-ma."""
    clip_eps_high: Optional[float] = None
    """Upper policy clip for clip-higher (ratio <= 1+eps_high; default: --clip-eps)."""
    clip_value: bool = True
    """Clip the value prediction around V_old (with clip_eps, or with the eps_V schedule when optimisers are separate)."""
    per_agent_clips: Optional[bool] = None
    """Per-agent eps_pi[i] and eps_V[i], adapted by per-agent monitors (preset: dapo-ma, dapo-maddpg). For
    dapo-maddpg they clip each agent's Q and action around the networks as they were at the start of the iteration."""
    eps_v_start: float = 0.5
    """Value clip eps_V[i] at the start of training (separate optimisers)."""
    eps_v_end: float = 0.3
    """Value clip eps_V[i] at the end of training."""
    eps_v_schedule: Literal["linear", "constant"] = "linear"
    """How eps_V moves from eps_v_start to eps_v_end."""

    # --- sampler
    dynamic_sampling: Optional[bool] = None
    """Draw minibatches with p = softmax(w/max w / T) (preset: dapo-ma, dapo-maddpg). For dapo-ma w = |A| of every
    agent's transitions; for dapo-maddpg w = the agents' mean |TD error| of each joint transition in the replay
    buffer."""
    window: Optional[int] = None
    """Shared buffer capacity in agent transitions (default: one rollout of all agents)."""
    # +SamplerOptions

    # --- health
    # +HealthOptions
    collapse_window: int = 100  # the multi-agent default (HealthOptions): MPE returns are noisy
    collapse_min_gain: float = 0.2
    """Warm-up: a collapse counts only once the best mean has gained this fraction of |first mean|."""
    # +DivergenceOptions

    # --- maddpg
    buffer_size: int = 200_000
    """MADDPG replay capacity in joint transitions."""
    batch_size: int = 1024
    """MADDPG minibatch size (joint transitions)."""
    tau: float = 0.01
    """MADDPG Polyak factor: target <- tau * online + (1 - tau) * target."""
    learning_starts: int = 5_000
    """MADDPG env steps of random-policy warm-up before the first update."""
    train_every: int = 4
    """MADDPG: one gradient step per this many batched env steps (4 x 8 copies: one per 32 joint steps)."""
    gumbel_temperature: float = 1.0
    """MADDPG Gumbel-softmax temperature for discrete actions."""
    exploration_noise: float = 0.1
    """MADDPG Gaussian action noise (fraction of the action range) for continuous actions."""

    # --- runtime
    eval_episodes: int = 10
    """Evaluation episodes at the end of training (deterministic policy)."""
    # +ProgressOptions
    tensorboard: bool = True
    """Write TensorBoard event files to the run directory."""
    # +WandbOptions


RECIPES = Path(__file__).parent / "recipes"  # one per algorithm, plus any shipped variants
MADDPG_ONLY = ("buffer_size", "batch_size", "tau", "learning_starts", "train_every", "gumbel_temperature",
               "exploration_noise")
ON_POLICY_ONLY = ("gae_lambda", "norm_reward", "num_epochs", "num_minibatches", "anneal_lr", "separate_optimizers",
                  "norm_adv", "ent_coef", "vf_coef", "clip_value", "window")
DAPO_OPTIONS = ("clip_eps", "clip_eps_high", "per_agent_clips", "eps_v_start", "eps_v_end", "eps_v_schedule",
                "dynamic_sampling", "temperature_mode", "temperature_init", "temperature_decay", "temperature_min",
                "ess_target", "temperature_lr", "importance_correction", "health_monitors", "collapse_window",
                "collapse_drop", "collapse_min_gain", "divergence_window", "divergence_factor")
# Options given explicitly that the resolved algorithm would ignore are refused (core.config.options.check_inactive).
INACTIVE_WHEN = {
    **{k: (lambda c: c.algo in ON_POLICY_ALGOS, "it is an option of maddpg and dapo-maddpg") for k in MADDPG_ONLY},
    **{k: (lambda c: c.algo in OFF_POLICY_ALGOS, f"{k} belongs to the on-policy algorithms") for k in ON_POLICY_ONLY},
    **{k: (lambda c: c.algo == "maddpg", "plain maddpg has no clips, prioritized sampling or monitors (dapo-maddpg has)")
       for k in DAPO_OPTIONS},
    "centralised_critic": (lambda c: c.algo in OFF_POLICY_ALGOS, "MADDPG's critic is always centralised"),
    "critic_lr": (lambda c: c.algo in ON_POLICY_ALGOS and not c.separate_optimizers, "it needs separate optimisers"),
    **{k: (lambda c: not c.dynamic_sampling, "it needs --dynamic-sampling")
       for k in ("temperature_mode", "temperature_init", "importance_correction")},
    **{k: (lambda c: c.algo == "maddpg" or (c.algo == "dapo-maddpg" and not c.per_agent_clips),
           "it needs dapo-maddpg's --per-agent-clips") for k in ("clip_eps", "clip_eps_high", "eps_v_start", "eps_v_end",
                                                                 "eps_v_schedule")},
    **{k: (lambda c: not c.health_monitors, "it needs --health-monitors") for k in (*HEALTH_FIELDS, "collapse_min_gain")},
}


def parse_env_kwargs(value) -> dict[str, Any]:
    """Env kwargs as a dict, from ``"N=3 max_cycles=25"`` text (older run directories) or a dict."""
    return dict(value) if isinstance(value, dict) else parse_kwargs_text(value)


def resolve(explicit, trust_env: bool = False) -> MAConfig:
    """The complete config for the options given (a dict of field -> value, or an MAConfig whose non-default fields
    count as given): the algorithm's recipe, then the user's ``--recipe`` files, then the options; validated.  An env
    a recipe file names is imported only when trusted (core/config/trust.py)."""
    from core.config.trust import check_env
    from dapo_ma.envs import check_env_name, env_spec, imports_code

    explicit = recipes.given(explicit, MAConfig)  # a dict, or (older callers) a config object
    top, source = recipes.user_layer(explicit, MAConfig, [RECIPES])
    check_env(top.get("env", MAConfig.env), f"recipe {source}", trust_env or source is None, imports_code)
    values, algo, user = recipes.layered(explicit, MAConfig, MA_ALGOS, lambda a: [a], [RECIPES])
    values["recipe"] = user
    out = MAConfig(**values)
    out.hidden_sizes, out.env_kwargs = tuple(out.hidden_sizes), parse_env_kwargs(out.env_kwargs)
    check_env_name(out.env)
    check_env_sizes(out.env_kwargs)  # 0 would make degenerate episodes (or none) that still "train"; huge ones hang
    validate(out)
    check_inactive(out, explicit, INACTIVE_WHEN)
    validate_for_env(out, env_spec(out.env, out.env_kwargs))
    return out


def complete(cfg: MAConfig) -> MAConfig:
    """A saved (resolved) config, validated as it stands (resume and eval)."""
    cfg = dataclasses.replace(cfg, hidden_sizes=tuple(cfg.hidden_sizes), env_kwargs=parse_env_kwargs(cfg.env_kwargs),
                              recipe=tuple(cfg.recipe))
    validate(cfg)
    return cfg


def validate_for_env(c: MAConfig, spec) -> None:
    """Checks that need the env's sizes (``spec``: dapo_ma.envs.EnvSpec): the rollout of all agents must split into
    minibatches; MADDPG's replay buffer must fit in memory (estimated before it is allocated)."""
    n_agents = spec.n_agents
    if c.algo in ON_POLICY_ALGOS:
        check_minibatches(c.num_envs * c.num_steps * n_agents, "num_envs*num_steps*n_agents", c.num_minibatches,
                          c.window)
    else:  # obs, next_obs, actions, rewards (float32), terminated (bool), a priority per joint transition
        per_transition = n_agents * (4 * (2 * spec.obs_dim + spec.layout.size + 1) + 1) + 4
        check_memory(c.buffer_size * per_transition, f"--buffer-size {c.buffer_size} ({per_transition} bytes per joint "
                     "transition)", "give a smaller --buffer-size", c.device)


def validate(c: MAConfig) -> None:
    """Reject impossible hyper-parameters with a one-line message that names the fix."""
    check_shared(c, MA_ALGOS)
    check_numbers(c, at_least_one=("num_envs", "num_steps", "num_epochs", "num_minibatches", "collapse_window",
                                   "divergence_window", "torch_threads", "buffer_size", "batch_size", "train_every",
                                   "window"),
                  positive=("clip_eps", "clip_eps_high", "eps_v_start", "eps_v_end", "lr", "critic_lr",
                            "temperature_init", "temperature_min", "temperature_lr", "max_grad_norm",
                            "gumbel_temperature", "progress_every_s"),
                  non_negative=("learning_starts", "collapse_min_gain", "exploration_noise"),
                  below_one=("clip_eps",), unit_interval=("gamma", "gae_lambda", "ess_target", "collapse_drop", "tau"),
                  at_most={"num_envs": 4096, "num_steps": 100_000, "buffer_size": 100_000_000, "batch_size": 10_000_000,
                           "num_epochs": 10_000, "torch_threads": 1024, "window": 100_000_000})
    if c.algo in OFF_POLICY_ALGOS:  # settings under which MADDPG would collect and never update
        if c.batch_size > c.buffer_size:
            raise ConfigError(f"--batch-size {c.batch_size} is larger than the replay buffer (--buffer-size "
                              f"{c.buffer_size}); give a batch of at most the buffer's size")
        if c.learning_starts >= c.total_steps:
            raise ConfigError(f"--learning-starts {c.learning_starts} is not below --total-steps {c.total_steps}: the run "
                              "would never update; give more steps or a shorter warm-up")
        if c.batch_size > c.total_steps:
            raise ConfigError(f"--batch-size {c.batch_size} is larger than --total-steps {c.total_steps}: the replay "
                              "buffer would never hold a batch, and the run would never update; give a smaller batch")
