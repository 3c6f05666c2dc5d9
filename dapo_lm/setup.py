"""What a run trains on, made and checked before its directory exists: the tokenizer, the prompt source, the reward
and the model (:func:`prepare`).  Every bad input is one :class:`ConfigError` line here, so a refused run writes
nothing: a prompts file without the named column, a prompt the tokenizer cannot encode, a reward module that does not
import or a reward that fails its dry call, a tokenizer with more ids than the model has embeddings, a chat template
asked for and absent, a model without the positions the longest prompt needs.

A built-in task goes through the same path as the user's data: a prompt source (:class:`dapo_lm.prompts.TaskPrompts`)
and a reward (:meth:`dapo_lm.rewards.Reward.of_task`, unless --reward replaces its verifier).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.config.errors import ConfigError

PROMPT_ROOM = 32  # positions a built-in task's prompts get (the longest, countdown's, is 14 tokens)


@dataclass
class Setup:
    tok: Any
    """:class:`dapo_lm.tokenizer.CharTokenizer` or :class:`dapo_lm.hf_tokenizer.HFTokenizer`."""
    source: Any
    """:class:`dapo_lm.prompts.TaskPrompts` or :class:`dapo_lm.prompts.FilePrompts`."""
    reward: Any
    """:class:`dapo_lm.rewards.Reward`."""
    model: Any
    """The causal LM (on the CPU)."""
    task: Any = None
    """The built-in task (its worked answers for the warm start), or None with --prompts."""


def prompt_room(cfg, source, tok) -> int:
    """Positions for prompts: a built-in task's fixed room, or the longest of the user's prompts once encoded."""
    if cfg.prompts is None:
        return PROMPT_ROOM
    longest = 0
    for part in (source.train, source.heldout):
        for p in part:
            try:
                n = len(tok.encode_prompt(p.prompt))
            except ValueError as e:  # the character tokenizer: a character outside its alphabet
                raise ConfigError(f"--prompts: {tok.describe()} cannot encode the prompt {p.prompt[:40]!r} ({e}); "
                                  "give --tokenizer-dir (or a --model-dir holding its tokenizer)") from e
            if n == 0:
                raise ConfigError(f"--prompts: the prompt {p.prompt[:40]!r} encodes to no tokens")
            longest = max(longest, n)
    return longest


def n_positions(cfg, room: int = PROMPT_ROOM) -> int:
    """Positions the model needs: prompt room and the response limit."""
    return room + cfg.max_new_tokens


def make_source(cfg, rows=None):
    from dapo_lm.prompts import LOCAL_PROMPTS, TaskPrompts, file_prompts
    from dapo_lm.tasks import TASKS

    if cfg.prompts is None:
        return TaskPrompts(TASKS[cfg.task])
    if cfg.prompts.startswith("dapo-local/") and cfg.prompts not in LOCAL_PROMPTS:
        raise ConfigError(f"prompts {cfg.prompts} were a Python list; pass them again: dapo_lm.train(resume=run_dir, "
                          "prompts=rows) or dapo_lm.load(run_dir, prompts=rows)")
    eval_rows = LOCAL_PROMPTS.get(cfg.eval_prompts) if cfg.eval_prompts else None
    return file_prompts(cfg.prompts, cfg.prompt_column, cfg.eval_prompts, cfg.heldout_share, cfg.seed,
                        LOCAL_PROMPTS.get(cfg.prompts), eval_rows)


def prepare(cfg, dry_run: bool = True) -> Setup:
    """Tokenizer, prompts, reward and model of ``cfg``, each checked (one line for every way one can be wrong);
    ``dry_run``: call the rewards once on a dry batch (a new run or a resume; skipped to reopen a finished run)."""
    from dapo_lm.hf_tokenizer import pick_tokenizer
    from dapo_lm.model import build_model
    from dapo_lm.rewards import Reward
    from dapo_lm.tasks import TASKS

    tok = pick_tokenizer(cfg)
    source = make_source(cfg)
    task = TASKS[cfg.task] if cfg.prompts is None else None
    if cfg.reward:
        reward = Reward.load(cfg.reward, cfg.correct_reward, cfg.correct_threshold)
    else:
        reward = Reward.of_task(task)
    if dry_run and cfg.reward:
        reward.dry_run(source.train_rows(2))
    positions = n_positions(cfg, prompt_room(cfg, source, tok))
    model = build_model(tok.vocab_size, cfg.n_layer, cfg.n_head, cfg.n_embd, positions, cfg.model_dir, cfg.seed,
                        cfg.model_config, tok.describe())
    if cfg.lora_rank is not None:
        from dapo_lm.lora import with_lora

        model = with_lora(model, cfg.lora_rank, cfg.seed)
    return Setup(tok, source, reward, model, task)
