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
    """A local causal-LM directory (save_pretrained) to start from, with its own tokenizer if it holds one. Its
    embeddings must cover the tokenizer's ids; nothing is downloaded."""
    model_config: Optional[str] = None
    """An architecture config.json (GPT-2, Llama, ...) for a fresh model. Instead of the default GPT-2; its weights
    drawn from the seed; a folder holding a config.json works too."""
    tokenizer_dir: Optional[str] = None
    """A local tokenizer directory (default: the --model-dir's, else the character tokenizer). Saved by
    save_pretrained; the character tokenizer is the built-in tasks' (23 ids)."""
    chat_template: bool = False
    """Encode prompts through the tokenizer's chat template. Each prompt as one user message, with the generation
    prompt; refused if the tokenizer has no template."""
    lora_rank: Optional[int] = None
    """Train LoRA adapters of this rank (peft); base weights frozen."""
    n_layer: int = 4
    """GPT-2 blocks of a fresh model."""
    n_head: int = 4
    """Attention heads per block."""
    n_embd: int = 128
    """Width of a fresh model (128 x 4 blocks: 0.8M parameters)."""

    # --- prompts and reward
    prompts: Optional[str] = None
    """Your prompts (.jsonl, .csv, .parquet or a saved datasets folder) instead of a built-in task. Its other columns
    go to the reward (needs --reward); Parquet needs pyarrow, a datasets folder datasets."""
    prompt_column: str = "prompt"
    """The column of --prompts holding the prompt text."""
    eval_prompts: Optional[str] = None
    """Held-out prompts, a file like --prompts (default: the --heldout-share of --prompts)."""
    heldout_share: float = 0.1
    """Share of --prompts held out for evaluation, by a stable hash of the prompt. The prompts whose CRC-32 is in the
    lowest share of its range: the same rows on every run and machine."""
    reward: tuple[str, ...] = ()
    """Rewards module:function[=weight] (TRL's reward_funcs shape), summed with their weights. Each is called as
    fn(prompts=, completions=, **columns) -> list of floats; path/file.py:function works too (default: the task's
    verifier)."""
    correct_reward: Optional[str] = None
    """The --reward that decides correctness (group filter, accuracy); default the first. Named by its
    module:function or its function name."""
    correct_threshold: float = 1.0
    """An answer is correct when that reward is at least this (and it is not truncated). The reward's own value,
    unweighted."""

    # --- warm start
    warm_start_steps: int = 400
    """Supervised steps on generated worked answers before RL (0: none, e.g. with --model-dir). 400 leave the
    default task at about 0.4 held-out accuracy: room for RL to show. Built-in tasks only (--prompts: 0)."""
    warm_start_batch: int = 64
    """Worked examples per supervised step."""
    warm_start_lr: float = 3e-3
    """Supervised learning rate (AdamW, linear warm-up over the first 10% of the steps)."""

    # --- rollout
    prompts_per_batch: int = 16
    """Prompt groups per RL batch (after the group filter, with dynamic sampling)."""
    group_size: int = 8
    """Answers sampled per prompt (G); advantages are group-relative."""
    temperature: float = 1.0
    """Sampling temperature of the RL answers."""
    group_streams: Optional[bool] = None
    """Each prompt group's answers from a random stream of its own (seed, group index): alike on any number of torchrun
    ranks. Default: on under torchrun; off in one process (one stream for the run, as before)."""
    max_new_tokens: Optional[int] = None
    """Response limit L_max in tokens, EOS included (default: the task's; longer answers are truncated). With
    --prompts the default is 128."""

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
    """Tokens before L_max over which the soft penalty rises (default: the task's). With --prompts a quarter of
    L_max."""
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
    """Held-out problems in each evaluation (greedy answers; never drawn in training). With --prompts at most the
    held-out rows."""
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
    **{k: (lambda c: c.model_dir is not None or c.model_config is not None,
           "a --model-dir or --model-config fixes the model's size") for k in ("n_layer", "n_head", "n_embd")},
    "task": (lambda c: c.prompts is not None, "--prompts replace the built-in task"),
    **{k: (lambda c: c.prompts is None, "it needs --prompts") for k in ("prompt_column", "eval_prompts")},
    "heldout_share": (lambda c: c.prompts is None or c.eval_prompts is not None,
                      "it needs --prompts without --eval-prompts"),
    **{k: (lambda c: not c.reward, "it needs --reward") for k in ("correct_reward", "correct_threshold")},
}
PROMPTS_MAX_NEW_TOKENS = 128  # the response limit of a run on the user's prompts, unless given


def fill_task_defaults(c: LMConfig) -> LMConfig:
    """The response limit and the penalty buffer: the task's, or with --prompts 128 tokens and a quarter of them."""
    from dapo_lm.tasks import TASKS

    if c.prompts is not None:  # only unset (None) fields: 0 is a value, which validate() refuses
        limit = PROMPTS_MAX_NEW_TOKENS if c.max_new_tokens is None else c.max_new_tokens
        buffer = max(1, limit // 4) if isinstance(limit, int) else None
        return dataclasses.replace(c, max_new_tokens=limit,
                                   overlong_buffer=buffer if c.overlong_buffer is None else c.overlong_buffer)
    task = TASKS[c.task]
    return dataclasses.replace(c, max_new_tokens=task.max_new_tokens if c.max_new_tokens is None else c.max_new_tokens,
                               overlong_buffer=task.overlong_buffer if c.overlong_buffer is None else c.overlong_buffer)


def resolve(explicit, trust_env: bool = False) -> LMConfig:
    """The complete config for the options given (a dict of field -> value, or an LMConfig whose non-default fields
    count as given): the algorithm's recipe, the ``--recipe`` files, then the options; validated, and options the
    resolved algorithm would ignore refused.  ``trust_env`` confirms a --reward that a recipe file names (it imports
    code that file chooses)."""
    explicit = recipes.given(explicit, LMConfig)
    values, algo, user = recipes.layered(explicit, LMConfig, LM_ALGOS, lambda a: [a], [RECIPES])
    values["recipe"] = user
    if values.get("prompts") is not None and "warm_start_steps" not in values:
        values["warm_start_steps"] = 0  # the user's prompts have no worked answers to warm start on
    check_reward_trust(values.get("reward", ()), explicit.get("reward"), "a --recipe file", trust_env)
    out = fill_task_defaults(LMConfig(**values))
    validate(out)
    check_inactive(out, explicit, INACTIVE_WHEN)
    return out


def check_reward_trust(rewards, given, source: str, trusted: bool) -> None:
    """One line when a file (a recipe, a run's config.yaml) names a --reward that imports code, unless ``trusted``
    or the same rewards were ``given`` again (core/config/trust.py's rule for envs)."""
    from dapo_lm.rewards import imports_code

    if trusted or tuple(rewards) == tuple(given or ()):
        return
    named = next((r for r in rewards if imports_code(r)), None)
    if named is not None:
        raise ConfigError(f"{source} names reward '{named}', which would import and run code named by that file; if "
                          "you trust the file, pass --trust-env (Python: trust_env=True)")


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
    require(c.prompts is None or bool(c.reward), "--prompts needs --reward module:function (what scores an answer)")
    require(c.prompts is None or c.warm_start_steps == 0,
            "--warm-start-steps needs a built-in --task (worked answers to learn from); your --prompts have none")
    require(c.model_dir is None or c.model_config is None,
            "--model-dir and --model-config both name the model; give one")
    require(c.lora_rank is None or c.lora_rank >= 1, f"--lora-rank must be at least 1, got {c.lora_rank}")
    require(0 < c.heldout_share < 1, f"--heldout-share must be in (0, 1), got {c.heldout_share}")
    require(bool(c.prompt_column), "--prompt-column must name a column")
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
