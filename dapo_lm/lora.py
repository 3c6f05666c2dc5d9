"""LoRA (Hu et al. 2021) through ``peft``: low-rank adapters on the policy's linear projections, the base weights
frozen, for models too large to train whole.

``--lora-rank r`` wraps the model (fresh, from ``--model-config`` or from ``--model-dir``) in adapters of rank ``r``
on every linear (and GPT-2 ``Conv1D``) projection but the output head, scaled by ``lora_alpha = 2 r`` (a common
choice; the scale only rescales the adapters' learning rate) and without dropout (pi_old and pi_theta are scored
without dropout, docs/algorithms.md section 8).  B starts at zero, so the wrapped model computes exactly what the
base model does until the first step; A is drawn from the run's seed.  Only the adapters are optimised (the trainer
passes ``requires_grad`` parameters to AdamW, clipping and the data-parallel all-reduce); checkpoints hold the
whole wrapped state, so a resume rebuilds the same wrapper from config.yaml and continues exactly.
"""
from __future__ import annotations

import torch

from core.config.errors import ConfigError


def with_lora(model, rank: int, seed: int):
    """``model`` wrapped in rank-``rank`` LoRA adapters (a ``peft`` ``PeftModel``); one line if peft is missing."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ConfigError("--lora-rank needs peft, which is not installed: pip install -e \".[lora]\"") from None
    from dapo_lm.model import quiet_transformers

    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear",
                        task_type="CAUSAL_LM")
    with quiet_transformers(), torch.random.fork_rng():  # the adapters' A from the seed, not from what ran before
        torch.manual_seed(seed)
        return get_peft_model(model, config)


def trainable(model) -> list[torch.nn.Parameter]:
    """The parameters the optimiser steps: all of them, or only the adapters under LoRA."""
    return [p for p in model.parameters() if p.requires_grad]
