"""Configuration of Decision Transformer runs: ``dt`` (the baseline), ``dapo-dt``, and the behaviour-cloning
baselines ``bc`` and ``pct-bc`` (docs/algorithms.md section 6).

``dapo-dt`` = ``dt`` + a value head, exponential advantage weights on the action loss, the
advantage FiLM after every attention sub-layer, and (with ``online_steps``) fine-tuning on its own
rollouts with DAPO's clipped-ratio objective and a KL-driven clip range.  Fields left ``None`` come
from the algorithm preset and the env (``context_len`` 50 for Pong, 30 for other Atari games, 20 for flat-state
datasets, as in the DT paper).  ``bc`` is the same transformer without return tokens; ``pct-bc`` is ``bc`` on the best
``--top-fraction`` (10%) of the episodes by return.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from core.run import recipes
from core.config.groups import ProgressOptions, RunOptions, WandbOptions
from core.config.errors import ConfigError
from core.config.options import check_inactive

DT_ALGOS = ("dt", "dapo-dt", "bc", "pct-bc")
ACTIVATIONS = {"gelu": "gelu_pytorch_tanh", "relu": "relu"}  # --activation -> transformers' activation_function
BC_ALGOS = ("bc", "pct-bc")


@dataclass
class DTConfig(RunOptions, ProgressOptions, WandbOptions):
    """Train a Decision Transformer (dt), DAPO-DT (dapo-dt) or a BC baseline (bc, pct-bc) on a Minari dataset."""

    # --- experiment
    env: Optional[str] = None
    """Env evaluation plays (default: the one the dataset records: its 'dapo dataset collect' metadata, else
    Minari's env_spec)."""
    algo: str = "dapo-dt"
    """dt (Chen et al. 2021) | dapo-dt (advantage-weighted, advantage-modulated, DAPO online fine-tuning) | bc (the
    same transformer without return tokens) | pct-bc (bc on the best --top-fraction of the episodes by return)."""
    dataset: Optional[str] = None
    """Minari dataset name in Minari's local store (MINARI_DATASETS_PATH): made by 'dapo dataset collect' (Atari
    frames) or any dataset with flat Box observations and Box or Discrete actions; or give --dataset-path."""
    dataset_path: Optional[str] = None
    """Minari dataset directory (the dataset's folder or its data/ folder) instead of --dataset NAME."""
    dataset_steps: Optional[int] = None
    """Use only the dataset's first episodes up to this many steps (sample-efficiency studies; default: all)."""
    # +RunOptions

    # --- model
    context_len: Optional[int] = None
    """K, steps per sequence (preset: 50 for Pong, 30 otherwise)."""
    n_layer: int = 3
    """GPT-2 blocks."""
    n_head: int = 1
    """Attention heads per block."""
    n_embd: int = 128
    """Token width."""
    dropout: float = 0.1
    """GPT-2 dropout."""
    activation: str = "gelu"
    """GPT-2 MLP activation: gelu (GPT-2's tanh GELU; the DT paper's Atari model) | relu (the DT paper's MuJoCo
    model and transformers' DecisionTransformerConfig default; cheaper on the CPU)."""
    precision: str = "auto"
    """fp32 | bf16 (autocast for the CNN and the GPT-2 blocks) | auto (bf16 on CUDA and on CPUs with
    AVX512-BF16/AMX, else fp32)."""

    # --- offline training
    grad_steps: int = 2000
    """Gradient steps of offline training."""
    batch_size: int = 16
    """Sequences per gradient step."""
    lr: float = 6e-4
    """AdamW learning rate (DT paper, Atari), linear warm-up then cosine decay to 10%."""
    warmup_steps: int = 100
    """Linear learning-rate warm-up steps."""
    weight_decay: float = 0.1
    """AdamW weight decay (matrices only)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip."""

    top_fraction: float = 0.1
    """pct-bc: the fraction of the episodes, best by return, it imitates (at least one episode)."""

    # --- dapo-dt
    advantage_weighting: Optional[bool] = None
    """Weight each token's action loss by clip(exp(A/T), max) with A = G - V(s), normalised per batch
    (preset: on for dapo-dt)."""
    advantage_modulation: Optional[bool] = None
    """FiLM after every attention sub-layer conditioned on the advantage (preset: on for dapo-dt)."""
    adv_temperature: float = 1.0
    """T of the exponential advantage weights (normalised advantages)."""
    adv_max_weight: float = 20.0
    """Upper clip of the advantage weights (AWR's 20)."""
    ev_gated_weights: bool = False
    """Scale the advantages inside the weights by the value head's explained variance on the batch,
    exp(clip(EV, 0, 1) * A / T): uniform weights (plain DT imitation) while the critic explains nothing,
    full strength once it explains the returns (GRPO's trust-the-critic rule, docs/algorithms.md)."""
    adv_gamma: float = 1.0
    """Discount of the hindsight return the value head regresses on and advantages A = G - V(s) measure
    against (1: the undiscounted return-to-go the DT is conditioned on).  Below 1 the advantage credits the
    next rewards (on Pong, gamma 0.99 ~ the next point) instead of the whole rest of a mixed-policy game."""
    value_coef: float = 0.5
    """Weight of the value-head regression loss."""
    value_trains_encoder: bool = False
    """Let the offline value loss back-propagate into the CNN state encoder it shares with the action
    tokens.  Off: V reads stop-gradient features, so only imitation shapes the encoder, as in plain DT.
    On Pong the shared gradient kept DAPO-DT's grad norm above the clip (6.4 on average over the first 100
    steps, DT's 1.1) for ~250 steps and delayed imitation (experiments/results/dt/pong_v2_3k)."""
    separate_value_encoder: bool = False
    """Give the value head its own Nature CNN, trained by the value loss alone, instead of the imitation
    encoder's stop-gradient features (on Pong those explain ~0 of the return's variance)."""
    target_advantage: float = 1.0
    """Advantage (in normalised units) the modulated model is conditioned on when acting."""

    # --- online fine-tuning
    online_steps: int = 0
    """Env steps of online fine-tuning after offline training (0: off). Online, dt imitates its own rollouts
    (hindsight return-to-go); dapo-dt uses the clipped-ratio objective against the collecting model."""
    online_envs: int = 8
    """Parallel envs for online rollouts and evaluation."""
    online_epochs: int = 2
    """Passes over each online rollout."""
    clip_init: float = 0.2
    """Initial clip range of the online clipped-ratio objective (dapo-dt)."""
    kl_target: float = 0.01
    """KL target of the adaptive clip: eps shrinks by 1.5x above 1.5*target, grows below target/1.5."""

    # --- runtime
    target_return: Optional[float] = None
    """Return-to-go the policy is conditioned on when acting (default: the dataset's best episode return)."""
    eval_episodes: int = 8
    """Whole games played at each evaluation (in parallel envs)."""
    eval_every: int = 500
    """Gradient steps between evaluations (the last step is always evaluated)."""
    eval_max_steps: int = 27_000
    """Agent steps after which an evaluation game is cut (EnvPool's default Atari limit)."""
    # +ProgressOptions
    # +WandbOptions


RECIPES = Path(__file__).parent / "recipes"
DAPO_DT_ONLY = ("adv_temperature", "adv_max_weight", "ev_gated_weights", "adv_gamma", "value_coef",
                "value_trains_encoder", "separate_value_encoder", "target_advantage", "clip_init", "kl_target")
# Options given explicitly that the resolved config would ignore are refused (core.config.options.check_inactive).
INACTIVE_WHEN = {
    **{k: (lambda c: c.algo != "dapo-dt", "it is an option of dapo-dt") for k in DAPO_DT_ONLY},
    **{k: (lambda c: c.online_steps == 0, "it needs --online-steps") for k in ("online_envs", "online_epochs")},
    **{k: (lambda c: c.online_steps == 0, "it is an option of online fine-tuning (--online-steps)")
       for k in ("clip_init", "kl_target")},
    **{k: (lambda c: not c.advantage_weighting, "it needs --advantage-weighting")
       for k in ("adv_temperature", "adv_max_weight", "ev_gated_weights")},
    "target_advantage": (lambda c: not c.advantage_modulation, "it needs --advantage-modulation"),
    "top_fraction": (lambda c: c.algo != "pct-bc", "it is an option of pct-bc"),
    "target_return": (lambda c: c.algo in BC_ALGOS, "bc and pct-bc do not condition on returns"),
    "online_steps": (lambda c: c.algo in BC_ALGOS, "online fine-tuning is for dt and dapo-dt"),
}


def resolve(explicit, trust_env: bool = False) -> DTConfig:
    """The complete config for the options given (a dict of field -> value, or a DTConfig whose non-default fields
    count as given): the algorithm's recipe, the user's ``--recipe`` files, then the options; validated.  An env a
    recipe file names is imported only when trusted (core/config/trust.py)."""
    from core.envs.make import imports_code
    from core.config.trust import check_env

    explicit = recipes.given(explicit, DTConfig)
    top, source = recipes.user_layer(explicit, DTConfig, [RECIPES])
    if top.get("env") is not None:
        check_env(top["env"], f"recipe {source}", trust_env or source is None, imports_code)
    values, algo, user = recipes.layered(explicit, DTConfig, DT_ALGOS, lambda a: [a], [RECIPES])
    values["recipe"] = user
    cfg = DTConfig(**values)
    validate(cfg)  # option errors before the dataset is looked up
    check_inactive(cfg, explicit, INACTIVE_WHEN)
    if cfg.dataset_path is not None:  # absolute: eval and resume may run elsewhere
        cfg.dataset_path = str(Path(cfg.dataset_path).expanduser().resolve())
    if cfg.env is None:
        from dapo_dt.data import dataset_label, load

        cfg.env = load(cfg.dataset, cfg.dataset_path)[1]["env_id"]
        if cfg.env is None:
            raise ConfigError(f"dataset {dataset_label(cfg.dataset, cfg.dataset_path)} records no env (no env_spec); "
                              "name the env evaluation plays with --env")
    if cfg.context_len is None:
        from core.envs.make import is_atari

        cfg.context_len = (50 if "Pong" in cfg.env else 30) if is_atari(cfg.env) else 20
    from core.algo.networks import resolve_precision

    cfg.precision = resolve_precision(cfg.precision)
    validate(cfg)
    from core.envs.make import check_env_id

    check_env_id(cfg.env)
    return cfg


def complete(cfg: DTConfig) -> DTConfig:
    """A saved (resolved) config, validated as it stands (resume and eval)."""
    cfg = dataclasses.replace(cfg, recipe=tuple(cfg.recipe))
    validate(cfg)
    return cfg


def validate(c: DTConfig) -> None:
    def require(ok: bool, msg: str) -> None:
        if not ok:
            raise ConfigError(msg)

    check_shared_dt(c)
    check_source(c)
    require(c.precision in ("fp32", "bf16", "auto"), f"--precision must be fp32, bf16 or auto, got '{c.precision}'")
    require(c.activation in ACTIVATIONS, f"--activation must be gelu or relu, got '{c.activation}'")
    require(c.algo == "dapo-dt" or not (c.advantage_weighting or c.advantage_modulation),
            "--advantage-weighting/--advantage-modulation need the value head of --algo dapo-dt")
    for name, top in (("grad_steps", 10**9), ("batch_size", 65_536), ("n_layer", 256), ("n_head", 256),
                      ("n_embd", 65_536), ("eval_episodes", 100_000), ("eval_every", 10**9), ("online_envs", 4096),
                      ("online_epochs", 10_000), ("torch_threads", 1024), ("eval_max_steps", 10**9)):
        v = getattr(c, name)
        require(1 <= v <= top, f"--{name.replace('_', '-')} must be in 1 .. {top}, got {v}")
    require(c.context_len is None or 1 <= c.context_len <= 10_000, f"--context-len must be in 1 .. 10000, got {c.context_len}")
    require(c.n_embd % c.n_head == 0, f"--n-embd {c.n_embd} must be divisible by --n-head {c.n_head}")
    for name in ("lr", "adv_temperature", "adv_max_weight", "clip_init", "kl_target", "max_grad_norm",
                 "checkpoint_every_s", "progress_every_s"):
        require(getattr(c, name) > 0, f"--{name.replace('_', '-')} must be positive, got {getattr(c, name)}")
    require(0 <= c.dropout < 1, f"--dropout must be in [0, 1), got {c.dropout}")
    require(0 <= c.online_steps <= 10**12 and c.warmup_steps >= 0 and c.value_coef >= 0 and c.weight_decay >= 0,
            "--online-steps, --warmup-steps, --value-coef and --weight-decay must be >= 0")
    require(0 < c.adv_gamma <= 1, f"--adv-gamma must be in (0, 1], got {c.adv_gamma}")
    require(not (c.separate_value_encoder and c.value_trains_encoder),
            "--value-trains-encoder shares the imitation CNN with V; it excludes --separate-value-encoder")
    require(c.dataset_steps is None or c.dataset_steps >= 1, f"--dataset-steps must be >= 1, got {c.dataset_steps}")
    require(0 < c.top_fraction <= 1, f"--top-fraction must be in (0, 1], got {c.top_fraction}")
    require(c.env is None or (isinstance(c.env, str) and c.env != ""), "--env must name an env")


def check_source(c: DTConfig) -> None:
    """Exactly one of --dataset NAME and --dataset-path DIR."""
    if c.dataset is None and c.dataset_path is None:
        raise ConfigError("--dataset NAME is required (a local Minari dataset, e.g. one made by 'dapo dataset "
                          "collect'), or --dataset-path DIR")
    if c.dataset is not None and c.dataset_path is not None:
        raise ConfigError("give --dataset NAME or --dataset-path DIR, not both")


def check_shared_dt(c: DTConfig) -> None:
    """Seed, device, algorithm and finite numbers, as every family checks them."""
    from core.config.options import MAX_SEED, check_finite
    from core.config.limits import check_device, check_wandb

    if c.algo not in DT_ALGOS:
        raise ConfigError(f"unknown --algo '{c.algo}'; choose one of: {', '.join(DT_ALGOS)}")
    if not (isinstance(c.seed, int) and 0 <= c.seed <= MAX_SEED):
        raise ConfigError(f"--seed must be in 0 .. {MAX_SEED}, got {c.seed}")
    check_device(c.device)
    check_finite(c)
    check_wandb(c)
