"""Training configuration: one dataclass for PPO, GRPO and DAPO (an algorithm is a config).

Fields left at ``None`` are filled from recipe files (:mod:`core.run.recipes`: the env family's, the algorithm's,
and any ``--recipe`` given) when a run is resolved; :func:`validate` checks the result.  The ``# --- name``
comments group the fields into the sections of ``dapo run --help``; each field's docstring is its help: the
first sentence in ``--help``, all of it in ``docs/options.md``.  Algorithm definitions: ``docs/algorithms.md``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from core.config.errors import ConfigError, require as _require
from core.config.groups import HEALTH_FIELDS, DivergenceOptions, HealthOptions, SamplerOptions, WandbOptions
from core.config.limits import check_device, check_wandb

ALGOS = ("ppo", "grpo", "dapo")
TEMPERATURE_MODES = ("fixed", "ema", "decay", "learnable")
MAX_SEED = 2**32 - 1  # NumPy and Gymnasium seeds are 32-bit


@dataclass
class TrainConfig(SamplerOptions, HealthOptions, DivergenceOptions, WandbOptions):
    """Train PPO, GRPO or DAPO on a Gymnasium environment."""

    # --- experiment
    env: str = "CartPole-v1"
    """Gymnasium env: an id, 'module:Env-id' or 'module:make_env'. 'module:Env-id' imports the module, which
    registers the id; 'module:make_env' names a function or class returning a gymnasium.Env. The module must stay
    importable (on PYTHONPATH) for eval and --resume, which import it only with --trust-env: config.yaml names it."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the env, e.g. 'size=5 max_steps=100'. Values are Python literals (numbers, quoted
    strings, lists, tuples, dicts) or YAML flow lists and maps, else strings: 'sizes=[64,64] name="a b"'."""
    algo: str = "dapo"
    """Algorithm (all are listed above). GRPO here is PPO with one clip range for policy and value plus automatic
    GAE lambda, not DeepSeek's critic-free method (docs/algorithms.md)."""
    total_steps: int = 100_000
    """Env steps to train for, rounded up to whole rollouts. Summed over envs; the start line says the rounded
    budget."""
    seed: int = 1
    """Seed of torch, NumPy, the envs and the sampler (0 .. 2**32-1)."""
    recipe: tuple[str, ...] = ()
    """Recipes applied on top of the presets, in order. Names of shipped recipes (dapo recipes) or YAML paths."""

    # --- rollout
    num_envs: Optional[int] = None
    """Parallel envs (preset: 8 classic, 1 MuJoCo, 8 Atari)."""
    num_steps: Optional[int] = None
    """Steps per env per rollout (preset: 32, 2048 MuJoCo, 128 Atari)."""
    backend: Optional[Literal["auto", "sync", "async", "envpool"]] = None
    """Vector-env backend (preset: sync; auto for Atari). The async backend runs envs in subprocesses (no exact
    resume); auto takes EnvPool where it has the env, else sync; Atari without EnvPool runs on ale-py with the same
    preprocessing."""
    norm_obs: Optional[bool] = None
    """Normalise observations by running mean/std (preset: MuJoCo only)."""
    norm_reward: Optional[bool] = None
    """Scale rewards by the running std of returns (preset: MuJoCo only)."""
    gamma: Optional[float] = None
    """Discount factor (preset: 0.98 classic, else 0.99)."""
    gae_lambda: Optional[float] = None
    """GAE lambda, the start value under --auto-lambda (preset: 0.8, 0.95)."""
    auto_lambda: Optional[bool] = None
    """GRPO's lambda rule: lambda from the critic's explained variance. Preset: on for grpo and in the
    dapo-mujoco recipe."""
    lambda_min: float = 0.9
    """Lowest automatic lambda (at explained variance 1)."""
    lambda_max: float = 0.99
    """Highest automatic lambda (at explained variance <= 0)."""

    # --- optimisation
    num_epochs: Optional[int] = None
    """Passes over each rollout (preset: 20 classic, 10 MuJoCo, 4 Atari)."""
    num_minibatches: Optional[int] = None
    """Minibatches per epoch (preset: 1 classic, 32 MuJoCo, 4 Atari)."""
    lr: Optional[float] = None
    """Policy learning rate, the only one for ppo and grpo. Preset: 1e-3 classic, 3e-4 MuJoCo, 2.5e-4 Atari."""
    critic_lr: Optional[float] = None
    """Critic learning rate with separate optimisers (default: --lr). With lr 3e-4 the source's 1e-3 lost on
    Walker2d at 300k steps (936 vs 1253, experiments/results/mujoco/ablation)."""
    anneal_lr: bool = True
    """Anneal the learning rates linearly to zero."""
    policy_lr_drop_step: Optional[int] = None
    """Env step from which the policy lr is multiplied by the drop factor. The source's remedy for late
    oscillation; off by default."""
    policy_lr_drop_factor: float = 0.1
    """Factor on the policy lr from --policy-lr-drop-step on."""
    separate_optimizers: Optional[bool] = None
    """DAPO's decoupled optimisers and eps_V value clip (preset: dapo). Actor and critic have their own learning
    rates and gradient clips, and the value clip follows the eps_V schedule."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip (per network with separate optimisers). With --joint-grad-clip, one norm over both."""
    joint_grad_clip: Optional[bool] = None
    """Clip both networks' gradients by one norm, as CleanRL's PPO does. Preset: on with one optimiser, and in the
    mujoco recipe. Under the joint clip the actor's large norm also shrinks the critic's step
    (experiments/adam_step_share.py)."""
    norm_adv: bool = True
    """Normalise advantages per minibatch. Where the losses carry the sampler's weights, so do the mean and std."""
    ent_coef: Optional[float] = None
    """Entropy bonus coefficient (preset: 0, 0.01 Atari). On the summed entropy of all action dims."""
    vf_coef: float = 0.5
    """Value-loss coefficient (dapo: the policy-value balance)."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden widths of the actor and critic MLPs. Atari uses the Nature-DQN CNN."""
    log_std_init: Optional[float] = None
    """Initial log-std of Gaussian policies, on Box-action envs only (preset: 0; mujoco recipe: -1). With std 1,
    CleanRL's, most HalfCheetah runs learned to run on their back."""

    # --- clipping
    clip_eps: Optional[float] = None
    """Policy clip eps_pi; grpo's one range (preset: 0.2, 0.1 Atari)."""
    clip_eps_low: Optional[float] = None
    """Lower policy clip: ratio >= 1 - eps_low (default: --clip-eps)."""
    clip_eps_high: Optional[float] = None
    """Upper policy clip: ratio <= 1 + eps_high (default: --clip-eps). Above eps_low it is clip-higher (e.g. 0.28)."""
    clip_value: Optional[bool] = None
    """Clip the value prediction around V_old (preset: grpo, dapo). GRPO clips with --clip-eps, DAPO with eps_V."""
    eps_v_start: float = 0.5
    """dapo's value clip eps_V at the start (dapo-mujoco recipe: 0.2)."""
    eps_v_end: float = 0.3
    """dapo's value clip eps_V at the end (linear schedule)."""
    eps_v_schedule: Literal["linear", "constant"] = "linear"
    """eps_V from start to end: linear, or constant at the start value."""

    # --- sampler
    dynamic_sampling: Optional[bool] = None
    """Draw minibatches with p = softmax(|A|/max|A|/T) (preset: dapo). Off in the dapo-mujoco recipe, where
    uniform minibatches won the 1M-step benchmark."""
    window: Optional[int] = None
    """Transitions the sampler keeps (default: one rollout)."""
    resampling: Literal["multinomial", "systematic", "without-replacement", "weighted"] = "multinomial"
    """How an epoch's draws follow p (docs/algorithms.md). Multinomial draws i.i.d.; systematic with low variance;
    without-replacement repeats no transition within an epoch (it selects only with a --window above one rollout);
    weighted draws nothing: PPO's permutation with each loss weighted by N p_i, the draws' expected gradient
    without their noise."""
    # +SamplerOptions

    # --- health
    # +HealthOptions
    collapse_significance: float = 4.0
    """Collapse needs a gain of this many noise units. A noise unit is the std of a difference of window means."""
    collapse_confirm: int = 0
    """Further windows that must confirm a collapse (dapo-mujoco: 1)."""
    # +DivergenceOptions

    # --- extensions
    extensions: dict[str, Any] = field(default_factory=dict)
    """Mechanisms beyond PPO/GRPO/DAPO, by name with their options. --ext NAME [key=value ...] turns one on, or
    sets some options of one a recipe turned on (its others stay); repeated --ext NAME add up; --ext NAME off
    removes one a recipe added."""

    # --- runtime
    device: str = "auto"
    """auto, cpu, cuda or cuda:N (auto: CUDA when available)."""
    run_dir: Optional[str] = None
    """Output directory (default: runs/<env>__<algo>__s<seed>__<time>). One writer at a time holds it."""
    overlap: bool = False
    """Collect the next rollout during the update (stale data). Adds the proximal_clip extension unless it is
    turned off. 1.4-1.7x SPS on 2 cores, but it cost return on Walker2d (experiments/results/overlap)."""
    compile: bool = False
    """torch.compile the sampler and the minibatch forward pass. Small CPU MLPs gain nothing."""
    torch_threads: int = 1
    """CPU threads for torch and NumPy's BLAS (small MLPs: 1 is fastest)."""
    numpy_acting: bool = True
    """Act in NumPy during CPU rollouts of MLPs (~5x less overhead)."""
    numpy_update: bool = True
    """Update CPU MLPs in NumPy (hand-derived gradients, ~4x faster). Tested against the torch update."""
    precision: Optional[Literal["fp32", "bf16", "auto"]] = None
    """Arithmetic of the Atari CNN (preset: fp32, auto for Atari). Under auto: bf16 autocast on CUDA and on CPUs with
    AMX or AVX512-BF16. MLPs always run fp32, so other envs refuse the option."""
    eval_episodes: int = 10
    """Evaluation episodes after training (0: none)."""
    eval_deterministic: Optional[bool] = None
    """Evaluate the mean/argmax action (preset: on, off for Atari). On Atari an argmax policy can stall a game."""
    checkpoint_every_s: float = 60.0
    """Seconds between checkpoints. One is also written after the first update, at the end and on Ctrl-C."""
    snapshot_every: Optional[int] = None
    """Keep the policy every this many env steps (and the initial one) in snapshots/. For 'dapo dataset collect|d4rl'."""
    progress: bool = True
    """Show progress: a bar on a terminal, else a line every few s."""
    progress_every_s: float = 10.0
    """Seconds between progress lines when not on a terminal."""
    tensorboard: bool = True
    """Write TensorBoard event files to the run directory."""
    # +WandbOptions


def joint_grad_clip(c: TrainConfig) -> bool:
    """Whether both networks' gradients are clipped by one norm; unset, it follows the optimisers (one optimiser: joint)."""
    return c.joint_grad_clip if c.joint_grad_clip is not None else not c.separate_optimizers


def policy_clip(c: TrainConfig) -> tuple[float, float]:
    """(eps_low, eps_high) of the policy clip before any health remedy; each side defaults to clip_eps."""
    return c.clip_eps_low or c.clip_eps, c.clip_eps_high or c.clip_eps


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_numbers(c, at_least_one=(), non_negative=(), positive=(), below_one=(), unit_interval=(),
                  at_most: Optional[dict] = None) -> None:
    """One-line errors for numeric fields out of range or not finite; ``None`` (unset) passes.  ``at_most`` maps
    a field to a sane upper bound (counts and sizes that would exhaust memory or hang)."""
    rules = ((at_least_one, lambda v: v >= 1, "must be >= 1"), (non_negative, lambda v: v >= 0, "must be >= 0"),
             (positive, lambda v: v > 0, "must be positive"),
             (below_one, lambda v: v < 1, "must be < 1 (ratio >= 1-eps > 0)"),
             (unit_interval, lambda v: 0 < v <= 1, "must be in (0, 1]"))
    for names, ok, rule in rules:
        for name in names:
            v = getattr(c, name)
            if v is None:
                continue
            _require(not isinstance(v, float) or math.isfinite(v), f"{flag(name)} must be a finite number, got {v}")
            _require(ok(v), f"{flag(name)} {rule}, got {v}")
    for name, bound in (at_most or {}).items():
        v = getattr(c, name)
        _require(v is None or v <= bound, f"{flag(name)} {v} is beyond the sane limit {bound}; use a smaller value")


def check_finite(c) -> None:
    """Every float field must be finite (``inf``/``nan`` given for a rate or a coefficient would train nonsense)."""
    for name, v in vars(c).items():
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"{flag(name)} must be a finite number, got {v}")


def check_shared(c, algos) -> None:
    """Checks every trainer's config needs: algorithm, seed, device, budget, temperature rule, coefficients, networks."""
    _require(c.algo in algos, f"unknown --algo '{c.algo}'; choose one of: {', '.join(algos)}")
    _require(isinstance(c.seed, int) and 0 <= c.seed <= MAX_SEED, f"--seed must be in 0 .. {MAX_SEED}, got {c.seed}")
    check_device(c.device)
    check_finite(c)
    check_wandb(c)
    _require(0 < c.total_steps <= 10**12, f"--total-steps must be in 1 .. 10**12, got {c.total_steps}")
    _require(0 <= c.eval_episodes <= 100_000, f"--eval-episodes must be in 0 .. 100000, got {c.eval_episodes}")
    _require(0 < c.temperature_decay <= 1, f"--temperature-decay must be in (0, 1], got {c.temperature_decay}")
    _require(c.temperature_mode in TEMPERATURE_MODES,
             f"unknown --temperature-mode '{c.temperature_mode}'; choose one of: {', '.join(TEMPERATURE_MODES)}")
    _require((c.ent_coef is None or c.ent_coef >= 0) and c.vf_coef >= 0, "--ent-coef and --vf-coef must be >= 0")
    _require(c.divergence_factor > 1, f"--divergence-factor must be > 1, got {c.divergence_factor}")
    _require(c.checkpoint_every_s > 0, f"--checkpoint-every-s must be positive, got {c.checkpoint_every_s}")
    sizes = getattr(c, "hidden_sizes", None)
    _require(sizes is None or (0 < len(sizes) <= 16 and all(0 < h <= 65_536 for h in sizes)),
             f"--hidden-sizes must be 1 to 16 widths in 1 .. 65536, got {sizes}")


def check_minibatches(batch: int, what: str, num_minibatches: int, window: Optional[int]) -> None:
    """The rollout (``what`` names its size formula) must split into minibatches no larger than the window."""
    _require(batch % num_minibatches == 0,
             f"rollout size {what}={batch} is not divisible by --num-minibatches {num_minibatches}; pick a divisor")
    minibatch = batch // num_minibatches
    _require(window is None or window >= minibatch,
             f"--window {window} is smaller than a minibatch ({minibatch}); use --window >= {minibatch}")


def validate(c: TrainConfig) -> None:
    """Reject impossible hyper-parameters with a message that names the fix."""
    check_shared(c, ALGOS)
    check_numbers(c, at_least_one=("num_envs", "num_steps", "num_epochs", "num_minibatches", "collapse_window",
                                   "divergence_window", "torch_threads", "window"),
                  non_negative=("collapse_confirm", "policy_lr_drop_step"),
                  positive=("clip_eps", "clip_eps_low", "clip_eps_high", "eps_v_start", "eps_v_end", "lr", "critic_lr",
                            "temperature_init", "temperature_min", "temperature_lr", "max_grad_norm", "snapshot_every",
                            "policy_lr_drop_factor", "progress_every_s"),
                  below_one=("clip_eps", "clip_eps_low"),
                  unit_interval=("gamma", "gae_lambda", "lambda_min", "lambda_max", "ess_target", "collapse_drop"),
                  at_most={"num_envs": 4096, "num_steps": 1_000_000, "num_epochs": 10_000, "torch_threads": 1024,
                           "window": 100_000_000, "collapse_window": 100_000})
    _require(c.num_envs * c.num_steps <= 50_000_000,
             f"a rollout of --num-envs {c.num_envs} x --num-steps {c.num_steps} transitions is beyond the sane limit "
             "50000000; use fewer")
    _require(c.lambda_min <= c.lambda_max,
             f"--lambda-min ({c.lambda_min}) must not exceed --lambda-max ({c.lambda_max})")
    _require(-20 <= c.log_std_init <= 2, f"--log-std-init must be in [-20, 2] (std e^-20 .. e^2), got {c.log_std_init}")
    check_minibatches(c.num_envs * c.num_steps, "num_envs*num_steps", c.num_minibatches, c.window)
    _require(c.resampling != "without-replacement" or not c.importance_correction,
             "--resampling without-replacement has no closed-form inclusion probabilities for the importance "
             "correction; drop --importance-correction or use multinomial/systematic")
    _require(c.resampling != "weighted" or not c.importance_correction,
             "--resampling weighted with importance correction cancels its own weights (N p_i / (N p_i) = 1); "
             "drop --importance-correction, or use --no-dynamic-sampling for uniform minibatches")


# Options that do nothing under the resolved config: given explicitly, they are refused (one line, exit 2) rather
# than silently ignored.  name -> (inactive(c), what would make it act).
INACTIVE_WHEN = {
    "critic_lr": (lambda c: not c.separate_optimizers, "it needs separate optimisers (dapo, or --separate-optimizers)"),
    "eps_v_start": (lambda c: not (c.separate_optimizers and c.clip_value), "it is dapo's value clip (separate optimisers "
                                                                             "and --clip-value)"),
    "eps_v_end": (lambda c: not (c.separate_optimizers and c.clip_value) or c.eps_v_schedule == "constant",
                  "it needs dapo's value clip on the linear --eps-v-schedule"),
    "eps_v_schedule": (lambda c: not (c.separate_optimizers and c.clip_value), "it is dapo's value clip"),
    "lambda_min": (lambda c: not c.auto_lambda, "it needs --auto-lambda"),
    "lambda_max": (lambda c: not c.auto_lambda, "it needs --auto-lambda"),
    "policy_lr_drop_factor": (lambda c: c.policy_lr_drop_step is None, "it needs --policy-lr-drop-step"),
    "resampling": (lambda c: not c.dynamic_sampling, "it needs --dynamic-sampling"),
    "importance_correction": (lambda c: not c.dynamic_sampling, "it needs --dynamic-sampling"),
    **{k: (lambda c: not c.dynamic_sampling, "it needs --dynamic-sampling")
       for k in ("temperature_mode", "temperature_init")},
    "temperature_decay": (lambda c: not c.dynamic_sampling or c.temperature_mode != "decay",
                          "it needs --dynamic-sampling and --temperature-mode decay"),
    "temperature_min": (lambda c: not c.dynamic_sampling or c.temperature_mode == "fixed",
                        "it needs --dynamic-sampling and a --temperature-mode other than fixed"),
    **{k: (lambda c: not c.dynamic_sampling or c.temperature_mode != "learnable",
           "it needs --dynamic-sampling and --temperature-mode learnable") for k in ("ess_target", "temperature_lr")},
    **{k: (lambda c: not c.health_monitors, "it needs --health-monitors")
       for k in (*HEALTH_FIELDS, "collapse_significance", "collapse_confirm")},
}


def check_inactive(c, given, rules: dict) -> None:
    """Refuse explicitly ``given`` options that the resolved config ``c`` would ignore (``rules``: INACTIVE_WHEN)."""
    for name in sorted(given):
        rule = rules.get(name)
        if rule is not None and rule[0](c):
            raise ConfigError(f"{flag(name)} has no effect with --algo {c.algo} as configured: {rule[1]}; drop it")
