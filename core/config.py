"""Training configuration: one dataclass for PPO, GRPO and DAPO (an algorithm is a config).

Fields left at ``None`` are filled by :func:`core.presets.resolve` from the env-family and algorithm presets;
:func:`validate` checks the result.  Every field's docstring becomes its ``--help`` text.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

ALGOS = ("ppo", "grpo", "dapo")
TEMPERATURE_MODES = ("fixed", "ema", "decay", "learnable")


class ConfigError(ValueError):
    """A user-facing configuration problem; the CLI prints it as one line and exits 2."""


class RunInterrupted(Exception):
    """Training stopped on Ctrl-C after checkpointing; ``run_dir`` can be resumed."""

    def __init__(self, run_dir):
        super().__init__(str(run_dir))
        self.run_dir = run_dir


@dataclass
class TrainConfig:
    """Train PPO, GRPO or DAPO on a Gymnasium environment."""

    # --- experiment -------------------------------------------------------------------------
    env: str = "CartPole-v1"
    """Gymnasium environment id (classic control, MuJoCo, Atari as ALE/<Game>-v5, ...)."""
    algo: str = "dapo"
    """Algorithm: ppo | grpo | dapo. GRPO here is PPO with one clip range for policy and value plus
    automatic GAE lambda; it is NOT DeepSeek's critic-free Group Relative Policy Optimization."""
    total_steps: int = 100_000
    """Total environment steps (summed over all envs)."""
    seed: int = 1
    """Random seed (torch, numpy, environments, sampler)."""
    device: str = "auto"
    """auto | cpu | cuda (auto picks CUDA when available); rollout storage and the sampler live there."""
    run_dir: Optional[str] = None
    """Output directory (default: runs/<env>__<algo>__<seed>__<timestamp>)."""
    compile: bool = False
    """torch.compile the sampler arithmetic and the minibatch forward pass (falls back with a warning);
    on small CPU MLPs it costs start-up time and gains nothing (experiments/results/throughput)."""
    torch_threads: int = 1
    """CPU threads for torch and for NumPy's BLAS (NumPy acting and update); small MLPs run fastest single-threaded."""

    # --- rollout ----------------------------------------------------------------------------
    num_envs: Optional[int] = None
    """Parallel environments (preset: 8 classic, 1 continuous)."""
    num_steps: Optional[int] = None
    """Steps per env per rollout (preset: 32 classic, 2048 continuous)."""
    backend: Optional[Literal["auto", "sync", "async", "envpool"]] = None
    """Rollout backend: sync | async (Gymnasium vector envs; exact resume needs sync) | envpool | auto
    (EnvPool for the ids it supports, else sync). Preset: sync, auto for Atari (EnvPool's DQN preprocessing
    in C++: 84x84 grey, frame skip 4, stack 4, no-op starts, episodic life; without EnvPool the same on ale-py)."""
    overlap: bool = False
    """Collect the next rollout while the learner updates (double buffering; the data are one update old,
    and --proximal-clip, on with it, re-anchors the clip). CPU MLP policies with NumPy acting (sync/EnvPool
    backends): a worker process steps the envs on another core; otherwise a worker thread. 1.4-1.7x SPS
    on 2 cores, but off by default: it cost return on Walker2d even with the proximal clip
    (experiments/results/overlap)."""
    proximal_clip: Optional[bool] = None
    """For stale data (--overlap, or a --window above one rollout): clip the policy ratio around the policy
    at the start of the update (the proximal policy) and weight each sample's surrogate by
    pi_prox / pi_behaviour (capped at 2), instead of clipping around the older behaviour policy, whose
    trust region the previous update has partly used up (Hilton et al. 2021, decoupled PPO objective).
    Default: on with --overlap (DAPO with --overlap, 300k steps, 5 seeds: HalfCheetah 1421 vs 811 without
    it, Walker2d 752 vs 543); off otherwise (with a two-rollout --window it lowered DAPO's Walker2d return
    at 1M steps, experiments/results/mujoco_1M/walker2d_only)."""
    numpy_acting: bool = True
    """During CPU rollouts, act with a NumPy copy of MLP actor/critic (copied once per rollout): ~5x less
    per-step overhead than torch at a few observations per step. Off, or CNN/GPU networks: torch."""
    numpy_update: bool = True
    """On the CPU, run the update's gradient steps for MLP actor-critics (Gaussian or categorical) in NumPy
    with hand-derived gradients (core/numpy_update.py; same losses and Adam, tested against the torch
    update): ~4x faster updates at minibatch 64. Off, or CNN/GPU/--compile/torchrun: torch."""
    norm_obs: Optional[bool] = None
    """Normalise observations with running statistics (preset: off classic, on continuous)."""
    norm_reward: Optional[bool] = None
    """Scale rewards by the running std of the discounted return (preset as norm_obs)."""
    gamma: Optional[float] = None
    """Discount factor (preset: 0.98 classic, 0.99 continuous)."""
    gae_lambda: Optional[float] = None
    """GAE lambda; the initial value when auto_lambda is on (preset: 0.8 classic, 0.95 continuous)."""
    auto_lambda: Optional[bool] = None
    """Adapt lambda to the critic's explained variance (SPEC 2.2; preset: on for grpo, and for dapo on MuJoCo)."""
    lambda_min: float = 0.9
    """Lower bound of the automatic lambda (reached when explained variance is 1)."""
    lambda_max: float = 0.99
    """Upper bound of the automatic lambda (reached when explained variance is <= 0)."""

    # --- optimisation -----------------------------------------------------------------------
    num_epochs: Optional[int] = None
    """Update epochs per rollout (preset: 20 classic, 10 continuous)."""
    num_minibatches: Optional[int] = None
    """Minibatches per epoch (preset: 1 classic, 32 continuous)."""
    lr: Optional[float] = None
    """Policy learning rate; also the single optimiser's rate for ppo/grpo (preset: 1e-3 classic, 3e-4 continuous)."""
    critic_lr: Optional[float] = None
    """Value-network learning rate when actor and critic have separate optimisers (dapo). Default: the
    policy's --lr. With lr 3e-4, the SPEC's 1e-3 scored 936 vs 1253 on Walker2d-v5 (300k steps, 5 seeds;
    3e-4 won 72% of run pairs) and tied on HalfCheetah-v5 (experiments/results/mujoco/ablation)."""
    anneal_lr: bool = True
    """Linearly anneal learning rates to zero over training."""
    target_kl: Optional[float] = None
    """Adapt the policy learning rate to hold each update's approx KL near this value (x1.5 when below half of it,
    /1.5 when above twice it; Isaac Gym's adaptive rule). Off: 0 (preset: 0; DAPO on MuJoCo 0.05, see
    --kl-lr-max-scale). 0.008 with --no-anneal-lr lost at 1M steps (experiments/results/mujoco_1M/ablation)."""
    kl_lr_max_scale: Optional[float] = None
    """Highest multiplier the --target-kl rule may put on the policy learning rate (preset: Isaac Gym's 10; DAPO on
    MuJoCo 1, a brake that never undoes the lr annealing, as 10 did by 1M steps; the lowest is 0.1)."""
    policy_lr_drop_step: Optional[int] = None
    """Cut the policy learning rate by policy_lr_drop_factor after this many env steps (off: None)."""
    policy_lr_drop_factor: float = 0.1
    """Multiplier applied to the policy learning rate at policy_lr_drop_step."""
    separate_optimizers: Optional[bool] = None
    """Decoupled clipping (SPEC 2.3): separate actor/critic optimiser groups (learning rates lr and
    critic_lr, per-network gradient clipping unless joint_grad_clip), and the value clip follows the eps_V
    schedule instead of clip_eps (preset: on for dapo only)."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip (per network when optimisers are separate, unless joint_grad_clip)."""
    joint_grad_clip: Optional[bool] = None
    """Clip the actor's and the critic's gradients by one joint norm, as CleanRL's and SB3's PPO do (preset:
    on without separate optimisers, off with them, except on for dapo on MuJoCo).  On MuJoCo the actor's norm
    is ~100x the critic's, so the joint clip also shrinks the critic's gradient ~20x and Adam's eps then
    absorbs part of its step (experiments/adam_step_share.py)."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    ent_coef: Optional[float] = None
    """Entropy bonus coefficient c_H (preset: 0 classic and continuous, 0.01 Atari)."""
    ent_below: Optional[float] = None
    """Box actions: apply the entropy bonus only to action dimensions whose log-std is below this level, in units of
    the action's half-range (log-std - log((high - low) / 2)), so the bonus holds the noise up to a level and no
    further: a soft floor the reward can trade against. None: the bonus acts on every dimension."""
    ent_per_dim: bool = False
    """Box actions: divide the entropy bonus by the number of action dimensions, so --ent-coef weighs the mean
    entropy per dimension (--ent-coef 0.03 is 0.005 per dim on 6-dim Walker2d and 0.0018 on 17-dim Humanoid,
    whose noise must narrow fast; still too much there: experiments/results/MUJOCO.md). Off: --ent-coef weighs the
    summed entropy, as CleanRL and SB3 do."""
    vf_coef: float = 0.5
    """Value-loss coefficient: c_V for ppo/grpo, the policy-value balance lam for dapo (0.2-0.5)."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the actor and critic MLPs (Atari uses the Nature-DQN CNN instead)."""
    critic_hidden_sizes: Optional[tuple[int, ...]] = None
    """Hidden layer widths of the critic MLP alone (default: --hidden-sizes; Atari's value head sits on the actor's
    CNN instead). A 256-wide critic did not help DAPO on Walker2d (experiments/results/mujoco_1M/walker2d_only)."""
    log_std_init: Optional[float] = None
    """Initial log standard deviation of the Gaussian policy for Box actions (preset: 0, i.e. std 1, CleanRL's;
    -1 for dapo on MuJoCo, where a smaller initial action noise keeps HalfCheetah from learning to run on its
    back; see README "Why DAPO on MuJoCo starts with less action noise")."""
    log_std_min: Optional[float] = None
    """Floor on each action dimension's log-std of the Gaussian policy (Box actions), kept by projecting the
    parameter back onto it after every update; within an update the log-std may dip below it (preset: no floor;
    for dapo on MuJoCo -1.2 in units of the half-range, held for the first half of training, then falling to zero:
    Walker2d's walkers kept the noise GRPO ends with). A value given here replaces the preset floor whole, its
    shape flags off unless given; --log-std-min=-inf: no floor."""
    log_std_min_anneal: Optional[bool] = None
    """Lower the --log-std-min floor's std linearly to zero over training: it holds the noise up early, when it
    would otherwise collapse, and lifts by the end, so late training episodes do not pay for noise (a fixed floor
    cost DAPO's training return on Ant and HalfCheetah while its deterministic policy evaluated as well)."""
    log_std_min_anneal_start: Optional[float] = None
    """With --log-std-min-anneal: the share of training during which the floor holds before it starts to fall
    (0: it falls from the first step; 0.5: it holds for the first half, then falls to zero at the end)."""
    log_std_min_anneal_end: Optional[float] = None
    """With --log-std-min-anneal: the share of training at which the falling floor reaches zero (preset 1: the end;
    0.75 leaves the last quarter without a floor)."""
    log_std_min_relative: Optional[bool] = None
    """Measure --log-std-min in units of each action's half-range (high - low) / 2: the std floor becomes
    e^floor * half-range, the same relative noise on Humanoid (actions in +-0.4) as on envs whose actions span +-1,
    where the flag changes nothing."""
    log_std_max: Optional[float] = None
    """Cap on each action dimension's log-std (Box actions), kept by projection after every update like
    --log-std-min; None: no cap. With an entropy bonus, a cap at --log-std-init lets the bonus hold the noise
    but not raise it (on Humanoid it still lost to DAPO without a bonus: experiments/results/MUJOCO.md)."""
    precision: Optional[Literal["fp32", "bf16", "auto"]] = None
    """CNN arithmetic: fp32, or bf16 autocast for the convolutions (heads, log-probs, losses and the
    optimiser stay fp32); auto picks bf16 on CUDA and on CPUs with AVX512-BF16/AMX, else fp32. Preset:
    fp32, auto for Atari (bf16 gave 5x the SPS of fp32 on this project's 2-core AMX CPU: 423 vs 82 SPS
    in an 8k-step Pong run). MLPs always run fp32."""

    # --- clipping ---------------------------------------------------------------------------
    clip_eps: Optional[float] = None
    """Policy clip eps (eps_pi for dapo, the shared eps for grpo; preset: 0.2, 0.1 Atari)."""
    clip_eps_low: Optional[float] = None
    """Lower policy clip (ratio >= 1-eps_low); None uses clip_eps."""
    clip_eps_high: Optional[float] = None
    """Upper policy clip (ratio <= 1+eps_high); > eps_low gives DAPO's clip-higher (e.g. 0.28)."""
    clip_value: Optional[bool] = None
    """Clip the value prediction around V_old (preset: off ppo, on grpo with clip_eps, on dapo with eps_V)."""
    eps_v_start: Optional[float] = None
    """DAPO value clip eps_V at the start of training (preset: 0.5, the SPEC's; 0.2 for dapo on MuJoCo)."""
    eps_v_end: float = 0.3
    """DAPO value clip eps_V at the end of training."""
    eps_v_schedule: Optional[Literal["linear", "constant"]] = None
    """How eps_V moves from eps_v_start to eps_v_end (preset: linear; constant for dapo on MuJoCo)."""

    # --- dynamic sampling (SPEC 2.3) --------------------------------------------------------
    dynamic_sampling: Optional[bool] = None
    """Draw minibatches with p = softmax(|A|/max|A| / T) (preset: on for dapo, except on MuJoCo / Box-action
    envs, where uniform minibatches won the 1M benchmark; see README)."""
    window: Optional[int] = None
    """Sliding-window capacity in transitions (default: one rollout, i.e. purely on-policy)."""
    temperature_mode: Literal["fixed", "ema", "decay", "learnable"] = "fixed"
    """Temperature rule: fixed | ema | decay | learnable (ESS target). Default fixed (T=1: at most e-fold
    oversampling): on HalfCheetah at 300k steps decay (ESS fell to ~0.4) scored 1129 +- 73 vs fixed
    1391 +- 140 (experiments/results/mujoco/ablation)."""
    temperature_init: float = 1.0
    """Initial sampling temperature T."""
    temperature_decay: float = 0.99
    """Per-update factor for temperature_mode=decay."""
    temperature_min: float = 0.2
    """Floor of T for decay, ema and learnable modes."""
    ess_target: float = 0.5
    """Target normalised effective sample size for temperature_mode=learnable."""
    temperature_lr: float = 0.05
    """Adam learning rate of log T for temperature_mode=learnable."""
    importance_correction: bool = False
    """Weight sampled losses by 1/(N p_i) so the expected gradient equals uniform sampling's."""
    value_importance_correction: bool = False
    """Weight only the critic's loss by 1/(N p_i): the critic regresses on the window's own distribution
    while the policy keeps the prioritised draws (prioritised replay corrects its value loss this way)."""
    resampling: Literal["multinomial", "systematic", "without-replacement", "weighted"] = "multinomial"
    """How each epoch's draws follow p: multinomial (i.i.d.), systematic (low-variance: transition i
    drawn floor or ceil of M p_i times; uniform p then visits every transition once per epoch),
    without-replacement (no transition twice per epoch; selects only with --window above one rollout) or
    weighted (no draws: PPO's permutation with every loss weighted by N p_i, the draws' expected gradient
    without their noise)."""

    # --- health monitors (SPEC 2.4) ---------------------------------------------------------
    health_monitors: Optional[bool] = None
    """Policy-collapse and value-divergence monitors with remedies (preset: on for dapo only)."""
    collapse_window: int = 10
    """Episodes in the recent-return mean watched by the collapse monitor."""
    collapse_drop: float = 0.7
    """Collapse fires when the recent mean has lost this fraction of the best mean's gain over the first."""
    collapse_significance: float = 4.0
    """The best-minus-first gain must exceed this many noise units (std of a window-mean difference)."""
    collapse_confirm: Optional[int] = None
    """Further windows of fresh episodes that must show the drop again before the collapse remedy acts
    (0: act on the first; a new best in between cancels it; preset: 1 for dapo on MuJoCo, else 0)."""
    divergence_window: int = 10
    """Updates over which a steadily growing value loss counts as divergence."""
    divergence_factor: float = 10.0
    """Divergence also needs the value loss to exceed this multiple of its window minimum."""

    # --- outputs ----------------------------------------------------------------------------
    eval_episodes: int = 10
    """Evaluation episodes at the end of training."""
    eval_deterministic: Optional[bool] = None
    """Evaluate with the mean/argmax action (preset: on; off for Atari, where an argmax policy can stall
    a game, e.g. never pressing FIRE in Breakout)."""
    checkpoint_every_s: float = 120.0
    """Seconds between periodic checkpoints (one is always written at the end and on Ctrl-C)."""
    snapshot_every: Optional[int] = None
    """Also keep the policy every this many env steps as snapshots/step_<N>.pt (behaviour policies of
    several qualities for 'dapo dataset collect'; off: None)."""
    progress: bool = True
    """Show a live progress bar."""
    tensorboard: bool = True
    """Write TensorBoard event files to the run directory."""


def joint_grad_clip(c: TrainConfig) -> bool:
    """Whether both networks' gradients are clipped by one norm; unset, it follows the optimisers (one optimiser:
    joint), which is also how runs made before the flag existed were clipped."""
    return c.joint_grad_clip if c.joint_grad_clip is not None else not c.separate_optimizers


def policy_clip(c: TrainConfig) -> tuple[float, float]:
    """(eps_low, eps_high) of the policy clip before any health remedy; each side defaults to clip_eps."""
    return c.clip_eps_low or c.clip_eps, c.clip_eps_high or c.clip_eps


def _require(ok: bool, msg: str) -> None:
    if not ok:
        raise ConfigError(msg)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_numbers(c, at_least_one=(), non_negative=(), positive=(), below_one=(), unit_interval=()) -> None:
    """One-line errors for numeric fields out of range; ``None`` (unset) passes."""
    rules = ((at_least_one, lambda v: v >= 1, "must be >= 1"), (non_negative, lambda v: v >= 0, "must be >= 0"),
             (positive, lambda v: v > 0, "must be positive"),
             (below_one, lambda v: v < 1, "must be < 1 (ratio >= 1-eps > 0)"),
             (unit_interval, lambda v: 0 < v <= 1, "must be in (0, 1]"))
    for names, ok, rule in rules:
        for name in names:
            v = getattr(c, name)
            _require(v is None or ok(v), f"{flag(name)} {rule}, got {v}")


def check_shared(c, algos) -> None:
    """Checks every trainer's config needs: algorithm, device, budget, temperature rule, coefficients, networks."""
    _require(c.algo in algos, f"unknown --algo '{c.algo}'; choose one of: {', '.join(algos)}")
    _require(c.device in ("auto", "cpu", "cuda") or c.device.startswith("cuda:"),
             f"--device must be auto, cpu or cuda, got '{c.device}'")
    _require(c.total_steps > 0, f"--total-steps must be positive, got {c.total_steps}")
    _require(c.eval_episodes >= 0, f"--eval-episodes must be >= 0, got {c.eval_episodes}")
    _require(0 < c.temperature_decay <= 1, f"--temperature-decay must be in (0, 1], got {c.temperature_decay}")
    _require(c.temperature_mode in TEMPERATURE_MODES,
             f"unknown --temperature-mode '{c.temperature_mode}'; choose one of: {', '.join(TEMPERATURE_MODES)}")
    _require((c.ent_coef is None or c.ent_coef >= 0) and c.vf_coef >= 0, "--ent-coef and --vf-coef must be >= 0")
    _require(c.divergence_factor > 1, f"--divergence-factor must be > 1, got {c.divergence_factor}")
    for name in ("hidden_sizes", "critic_hidden_sizes"):
        sizes = getattr(c, name, None)
        _require(sizes is None or (len(sizes) > 0 and all(h > 0 for h in sizes)),
                 f"{flag(name)} must be positive integers, got {sizes}")


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
                                   "divergence_window", "torch_threads"),
                  non_negative=("collapse_confirm", "target_kl"),
                  positive=("clip_eps", "clip_eps_low", "clip_eps_high", "eps_v_start", "eps_v_end", "lr", "critic_lr",
                            "temperature_init", "temperature_min", "temperature_lr", "max_grad_norm", "snapshot_every"),
                  below_one=("clip_eps", "clip_eps_low"),
                  unit_interval=("gamma", "gae_lambda", "lambda_min", "lambda_max", "ess_target", "collapse_drop"))
    _require(c.lambda_min <= c.lambda_max,
             f"--lambda-min ({c.lambda_min}) must not exceed --lambda-max ({c.lambda_max})")
    _require(c.kl_lr_max_scale >= 1,
             f"--kl-lr-max-scale must be at least 1 (1: the KL rule only brakes), got {c.kl_lr_max_scale}")
    _require(c.policy_lr_drop_factor > 0, f"--policy-lr-drop-factor must be positive, got {c.policy_lr_drop_factor}")
    _require(c.log_std_init is None or -20 <= c.log_std_init <= 2,
             f"--log-std-init must be in [-20, 2] (std e^-20 .. e^2), got {c.log_std_init}")
    _require(c.log_std_min is None or -20 <= c.log_std_min <= (2 if c.log_std_init is None else c.log_std_init),
             f"--log-std-min must be in [-20, --log-std-init] (a floor above the initial log-std would move it), "
             f"got {c.log_std_min} with --log-std-init {c.log_std_init}")
    _require(c.ent_below is None or bool(c.ent_coef),
             "--ent-below limits an entropy bonus and there is none: add --ent-coef (e.g. 0.005) or drop the flag")
    _require(not c.ent_per_dim or bool(c.ent_coef),
             "--ent-per-dim scales an entropy bonus and there is none: add --ent-coef (e.g. 0.03) or drop the flag")
    _require(c.log_std_max is None or (-20 if c.log_std_init is None else c.log_std_init) <= c.log_std_max <= 2,
             f"--log-std-max must be in [--log-std-init, 2] (a cap below the initial log-std would move it), "
             f"got {c.log_std_max} with --log-std-init {c.log_std_init}")
    _require(not c.log_std_min_anneal or c.log_std_min is not None,
             "--log-std-min-anneal lowers a floor and there is none: add --log-std-min (e.g. -1.2) or drop the flag")
    _require(not c.log_std_min_relative or c.log_std_min is not None,
             "--log-std-min-relative scales a floor and there is none: add --log-std-min (e.g. -1.2) or drop the flag")
    _require(0 <= c.log_std_min_anneal_start < 1 and (c.log_std_min_anneal or c.log_std_min_anneal_start == 0),
             f"--log-std-min-anneal-start must be in [0, 1) and needs --log-std-min-anneal, got "
             f"{c.log_std_min_anneal_start} with --log-std-min-anneal {c.log_std_min_anneal}")
    _require(c.log_std_min_anneal_start < c.log_std_min_anneal_end <= 1
             and (c.log_std_min_anneal or c.log_std_min_anneal_end == 1),
             f"--log-std-min-anneal-end must be in (--log-std-min-anneal-start, 1] and needs --log-std-min-anneal, "
             f"got {c.log_std_min_anneal_end} with start {c.log_std_min_anneal_start}")
    check_minibatches(c.num_envs * c.num_steps, "num_envs*num_steps", c.num_minibatches, c.window)
    _require(c.resampling != "without-replacement" or not (c.importance_correction or c.value_importance_correction),
             "--resampling without-replacement has no closed-form inclusion probabilities for the importance "
             "correction; drop --importance-correction/--value-importance-correction or use multinomial/systematic")
    _require(c.resampling != "weighted" or not (c.importance_correction or c.value_importance_correction),
             "--resampling weighted with importance correction cancels its own weights (N p_i / (N p_i) = 1); "
             "drop --importance-correction/--value-importance-correction, or use --no-dynamic-sampling for uniform")
    _require(not c.proximal_clip or c.overlap or c.window > c.num_envs * c.num_steps,
             "--proximal-clip re-anchors stale data, and there is none: add --overlap or a --window above one rollout "
             f"({c.num_envs * c.num_steps} transitions)")
