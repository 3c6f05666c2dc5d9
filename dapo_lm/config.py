"""Configuration of sequence-generation runs: ``grpo-lm`` and ``dapo-lm`` (docs/algorithms.md, section 8).

An algorithm is a config: the fields left at ``None`` come from the algorithm's recipe (``dapo_lm/recipes/``),
then ``--recipe`` files (the ablation ladder's steps are recipes), then the options given.  Each technique of
DAPO is one switch: ``--clip-eps-high``, ``--loss-aggregation``, ``--filter-truncated``,
``--soft-overlong-penalty``, ``--dynamic-sampling`` (with ``--group-filter``).  The response limit and the penalty buffer default to the
task's.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from core.run import recipes
from core.config.groups import ProgressOptions, RunOptions, WandbOptions
from core.config.options import MAX_SEED, check_finite, check_inactive, check_numbers
from core.config.errors import ConfigError
from core.config.limits import check_device, check_wandb

LM_ALGOS = ("grpo-lm", "dapo-lm")
GROUP_FILTERS = ("acc", "std")


@dataclass
class LMConfig(RunOptions, ProgressOptions, WandbOptions):
    """Train a small causal LM with GRPO or DAPO against a verifier (warm start, then RL)."""

    # --- experiment
    task: Literal["add", "mul", "countdown"] = "add"
    """Task: add (multi-digit addition with a carry scratchpad) | mul (multi-digit times one digit) | countdown
    (reach a target from four numbers). All are generated and verified locally."""
    algo: str = "dapo-lm"
    """grpo-lm (DeepSeek's GRPO: per-answer loss, symmetric clip) | dapo-lm (DAPO of Yu et al., 2025: clip-higher,
    token-level loss, dynamic sampling, overlong shaping); not the grpo and dapo of the control toolkit."""
    total_steps: int = 8192
    """RL budget in generated answers, filtered ones included (the warm start is extra). Rounded up to whole
    batches."""
    # +RunOptions
    device: str = "auto"
    """auto, cpu, cuda or cuda:N (auto: CUDA when available, with bf16 autocast)."""
    run_dir: Optional[str] = None
    """Output directory (default: runs/<task>__<algo>__s<seed>__<time>). One writer at a time holds it."""

    # --- model
    model_dir: Optional[str] = None
    """A local directory with a causal LM (save_pretrained) to start from instead of a fresh GPT-2. Its vocabulary
    must cover the character tokenizer's 23 ids; nothing is downloaded."""
    n_layer: int = 4
    """GPT-2 blocks of a fresh model."""
    n_head: int = 4
    """Attention heads per block."""
    n_embd: int = 128
    """Width of a fresh model (128 x 4 blocks: 0.8M parameters)."""

    # --- warm start
    warm_start_steps: int = 400
    """Supervised steps on generated worked answers before RL (0: none, e.g. with --model-dir). 400 leave the
    default task at about 0.4 held-out accuracy: room for RL to show."""
    warm_start_batch: int = 64
    """Worked examples per supervised step."""
    warm_start_lr: float = 3e-3
    """Supervised learning rate (AdamW, linear warm-up over the first 10% of the steps)."""

    # --- rollout
    prompts_per_batch: int = 16
    """Prompt groups per RL batch (after the group filter, with dynamic sampling)."""
    group_size: int = 8
    """Answers sampled per prompt (G); advantages are relative to the group."""
    temperature: float = 1.0
    """Sampling temperature of the RL answers."""
    max_new_tokens: Optional[int] = None
    """Response limit L_max in tokens, EOS included (default: the task's; longer answers are truncated)."""

    # --- optimisation
    lr: float = 1e-4
    """RL learning rate (AdamW, constant)."""
    num_minibatches: int = 4
    """Optimiser steps per batch (the batch is cut into this many minibatches)."""
    num_epochs: int = 1
    """Passes over each batch."""
    micro_batch_size: Optional[int] = None
    """Answers per forward/backward (gradient accumulation); the loss does not depend on it (default: a minibatch)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip."""

    # --- objective
    clip_eps_low: float = 0.2
    """Lower clip: ratio >= 1 - eps_low."""
    clip_eps_high: Optional[float] = None
    """Upper clip: ratio <= 1 + eps_high; above eps_low it is clip-higher (preset: 0.28 dapo-lm, 0.2 grpo-lm)."""
    loss_aggregation: Optional[Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]] = None
    """How per-token losses make the batch loss (preset: token-mean dapo-lm, seq-mean-token-mean grpo-lm).
    seq-mean-token-sum-norm is Dr. GRPO's constant normaliser."""
    std_normalise: bool = True
    """Divide group-relative advantages by the group's reward std (off: the unscaled advantages of Dr GRPO)."""
    filter_truncated: Optional[bool] = None
    """Overlong filtering: truncated answers add no loss (preset: dapo-lm)."""
    soft_overlong_penalty: Optional[bool] = None
    """Soft overlong punishment: a reward penalty rising linearly to -1 over the buffer before L_max (preset:
    dapo-lm)."""
    overlong_buffer: Optional[int] = None
    """Tokens before L_max over which the soft penalty rises (default: the task's)."""
    dynamic_sampling: Optional[bool] = None
    """Group filter: keep only informative prompt groups (--group-filter), generating more rounds until the batch
    is full (preset: dapo-lm)."""
    group_filter: Literal["acc", "std"] = "acc"
    """Which groups dynamic sampling keeps: acc (DAPO as published: 0 < correct answers < G, by the verifier) | std
    (reward spread, for non-binary rewards; with the soft penalty it also keeps groups with no correct answer)."""
    carry_surplus: bool = False
    """Dynamic sampling: keep the informative groups beyond a full batch for the next one, each with the
    log-probabilities of the policy that generated it (the ratio stays corrected); off: discarded, as in verl."""
    max_gen_rounds: int = 3
    """Dynamic sampling: generation rounds per batch at most; then the batch is trained short (one warning)."""

    # --- health
    entropy_collapse: float = 0.2
    """Event when the mean token entropy falls below this fraction of the first RL update's."""
    entropy_explosion: float = 3.0
    """Event when the mean token entropy exceeds this multiple of the first RL update's."""
    length_drift: float = 0.5
    """Event when the mean response length moves more than this fraction from the first RL update's."""
    zero_variance_alert: float = 0.9
    """Event when more than this share of a batch's generated groups have no reward spread."""
    clip_alert: float = 0.2
    """Event when the clip fraction at either bound exceeds this."""

    # --- runtime
    eval_problems: int = 200
    """Held-out problems in each evaluation (greedy answers; never drawn in training)."""
    eval_samples: int = 4
    """Sampled answers per held-out problem for the mean-over-k accuracy (0: greedy only)."""
    eval_every: int = 0
    """Evaluate on the held-out problems every this many generated answers too (0: only after warm start and at
    the end)."""
    # +ProgressOptions
    tensorboard: bool = True
    """Write TensorBoard event files to the run directory."""
    # +WandbOptions


RECIPES = Path(__file__).parent / "recipes"  # one per algorithm, plus the ablation ladder's steps
INACTIVE_WHEN = {
    "overlong_buffer": (lambda c: not c.soft_overlong_penalty, "it needs --soft-overlong-penalty"),
    **{k: (lambda c: not c.dynamic_sampling, "it needs --dynamic-sampling") for k in ("max_gen_rounds",
                                                                                    "group_filter", "carry_surplus")},
    **{k: (lambda c: c.warm_start_steps == 0, "it needs --warm-start-steps above 0")
       for k in ("warm_start_batch", "warm_start_lr")},
    **{k: (lambda c: c.model_dir is not None, "a --model-dir fixes the model's size") for k in ("n_layer", "n_head",
                                                                                              "n_embd")},
}


def fill_task_defaults(c: LMConfig) -> LMConfig:
    from dapo_lm.tasks import TASKS

    task = TASKS[c.task]  # only unset (None) fields: 0 is a value, which validate() refuses
    return dataclasses.replace(c, max_new_tokens=task.max_new_tokens if c.max_new_tokens is None else c.max_new_tokens,
                               overlong_buffer=task.overlong_buffer if c.overlong_buffer is None else c.overlong_buffer)


def resolve(explicit, trust_env: bool = False) -> LMConfig:
    """The complete config for the options given (a dict of field -> value, or an LMConfig whose non-default fields
    count as given): the algorithm's recipe, the ``--recipe`` files, then the options; validated, and options the
    resolved algorithm would ignore refused.  ``trust_env`` is accepted for the family protocol: LM tasks are built
    in, so a config never names code to import."""
    explicit = recipes.given(explicit, LMConfig)
    values, algo, user = recipes.layered(explicit, LMConfig, LM_ALGOS, lambda a: [a], [RECIPES])
    values["recipe"] = user
    out = fill_task_defaults(LMConfig(**values))
    validate(out)
    check_inactive(out, explicit, INACTIVE_WHEN)
    return out


def complete(cfg: LMConfig) -> LMConfig:
    """A saved (resolved) config, validated as it stands (resume and eval)."""
    cfg = fill_task_defaults(dataclasses.replace(cfg, recipe=tuple(cfg.recipe)))
    validate(cfg)
    return cfg


def validate(c: LMConfig) -> None:
    """One-line errors for impossible settings."""
    from dapo_lm.tasks import TASKS

    def require(ok: bool, msg: str) -> None:
        if not ok:
            raise ConfigError(msg)

    require(c.algo in LM_ALGOS, f"unknown --algo '{c.algo}'; choose one of: {', '.join(LM_ALGOS)}")
    require(c.task in TASKS, f"unknown --task '{c.task}'; choose one of: {', '.join(TASKS)}")
    require(c.group_filter in GROUP_FILTERS,
            f"unknown --group-filter '{c.group_filter}'; choose one of: {', '.join(GROUP_FILTERS)}")
    require(isinstance(c.seed, int) and 0 <= c.seed <= MAX_SEED, f"--seed must be in 0 .. {MAX_SEED}, got {c.seed}")
    check_device(c.device)
    check_finite(c)
    check_wandb(c)
    require(0 < c.total_steps <= 10**10, f"--total-steps must be in 1 .. 10**10, got {c.total_steps}")
    check_numbers(c, at_least_one=("n_layer", "n_head", "n_embd", "warm_start_batch", "prompts_per_batch",
                                   "max_new_tokens", "num_minibatches", "num_epochs", "micro_batch_size",
                                   "max_gen_rounds", "eval_problems", "overlong_buffer", "torch_threads"),
                  non_negative=("warm_start_steps", "eval_samples", "eval_every"),
                  positive=("warm_start_lr", "lr", "temperature", "max_grad_norm", "clip_eps_high",
                            "entropy_collapse", "entropy_explosion", "length_drift", "clip_alert",
                            "checkpoint_every_s", "progress_every_s"),
                  below_one=("clip_eps_low", "entropy_collapse"), unit_interval=("zero_variance_alert",),
                  at_most={"n_layer": 64, "n_head": 64, "n_embd": 8192, "warm_start_steps": 10**7,
                           "warm_start_batch": 65_536, "prompts_per_batch": 65_536, "group_size": 1024,
                           "max_new_tokens": 4096, "num_minibatches": 65_536, "num_epochs": 100,
                           "max_gen_rounds": 1000, "eval_problems": 100_000, "eval_samples": 64,
                           "torch_threads": 1024, "micro_batch_size": 10**6})
    require(c.clip_eps_low > 0, f"--clip-eps-low must be positive, got {c.clip_eps_low}")
    require(c.group_size >= 2, f"--group-size must be >= 2 (advantages are relative to the group), got {c.group_size}")
    require(c.n_embd % c.n_head == 0, f"--n-embd {c.n_embd} must be a multiple of --n-head {c.n_head}")
    require(c.overlong_buffer <= c.max_new_tokens,
            f"--overlong-buffer {c.overlong_buffer} must not exceed --max-new-tokens {c.max_new_tokens}")
    require(c.num_minibatches <= c.prompts_per_batch * c.group_size,
            f"--num-minibatches {c.num_minibatches} exceeds the {c.prompts_per_batch * c.group_size} answers of a "
            "batch; use fewer")
