"""The policy: a ``transformers`` causal LM (GPT-2 family) built from a config, or read from a local directory, and
its two hot paths: batched sampling with a KV cache (:func:`sample`) and per-token log-probabilities of given
answers (:func:`answer_logprobs`).  Nothing is downloaded: a model directory is read with ``local_files_only``.

Layout: prompts are left-padded (``(N, Lp)``, BOS first) and responses right-padded (``(N, R)``), so every
response starts at column ``Lp``; position ids count real tokens only, so padding never shifts a position.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
from torch import Tensor

from core.config.options import ConfigError


def build_model(vocab_size: int, n_layer: int, n_head: int, n_embd: int, n_positions: int,
                model_dir: Optional[str] = None, seed: int = 0):
    """A fresh GPT-2 of the given size, or the causal LM saved in ``model_dir`` (its vocabulary must cover the
    character tokenizer's ids; its own tokenizer is not used)."""
    from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

    if model_dir is not None:
        path = Path(model_dir).expanduser()
        if not (path / "config.json").is_file():
            raise ConfigError(f"--model-dir {model_dir} holds no config.json; give a directory written by "
                              "save_pretrained (nothing is downloaded)")
        try:
            model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError) as e:
            raise ConfigError(f"--model-dir {model_dir} is not a loadable causal LM ({type(e).__name__})") from e
        if model.config.vocab_size < vocab_size:
            raise ConfigError(f"--model-dir {model_dir} has a vocabulary of {model.config.vocab_size} tokens, fewer "
                              f"than the {vocab_size} of the character tokenizer")
        return model
    with torch.random.fork_rng():  # initial weights depend on the seed only, not on what ran before
        torch.manual_seed(seed)
        config = GPT2Config(vocab_size=vocab_size, n_positions=n_positions, n_embd=n_embd, n_layer=n_layer,
                            n_head=n_head, bos_token_id=1, eos_token_id=2, pad_token_id=0, resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0)
        return GPT2LMHeadModel(config)


def uses_bf16(device: torch.device) -> bool:
    """Whether :func:`autocast` runs in bf16 on ``device``: CUDA with bf16 support (Ampere and later)."""
    return device.type == "cuda" and torch.cuda.is_bf16_supported()


def autocast(device: torch.device):
    """bf16 autocast on CUDA (Ampere and later); fp32 elsewhere (CPU runs are exact and resumable)."""
    if uses_bf16(device):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def left_pad(prompts: list[list[int]], pad_id: int, device) -> tuple[Tensor, Tensor]:
    """Token lists -> ``(ids (N, Lp), mask (N, Lp))`` padded on the left."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
        mask[i, width - len(p):] = 1
    return ids.to(device), mask.to(device)


def positions(mask: Tensor) -> Tensor:
    """Position ids counting real tokens (0 for the first real token), ``(N, L)``."""
    return (mask.cumsum(-1) - 1).clamp_min(0)


@dataclass
class Generated:
    tokens: Tensor
    """(N, R) sampled response ids, padded after EOS."""
    lengths: Tensor
    """(N,) response lengths in tokens, EOS included."""
    truncated: Tensor
    """(N,) bool: no EOS within the limit."""


@torch.no_grad()
def sample(model, prompt_ids: Tensor, prompt_mask: Tensor, max_new_tokens: int, eos_id: int, pad_id: int,
           temperature: float = 1.0, generator: Optional[torch.Generator] = None, greedy: bool = False) -> Generated:
    """Sample responses for left-padded prompts ``(N, Lp)``, one token per step through the KV cache, stopping
    once every row has emitted EOS (or at ``max_new_tokens``)."""
    n, device = prompt_ids.shape[0], prompt_ids.device
    tokens = torch.full((n, max_new_tokens), pad_id, dtype=torch.long, device=device)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    lengths = torch.full((n,), max_new_tokens, dtype=torch.long, device=device)
    mask = prompt_mask
    pos = positions(mask)
    out = model(input_ids=prompt_ids, attention_mask=mask, position_ids=pos, use_cache=True)
    next_pos = pos[:, -1:] + 1
    for t in range(max_new_tokens):
        logits = out.logits[:, -1].float()
        if greedy:
            tok = logits.argmax(-1)
        else:
            probs = torch.softmax(logits / temperature, -1)
            tok = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        tok = torch.where(done, torch.full_like(tok, pad_id), tok)
        tokens[:, t] = tok
        finished_now = (tok == eos_id) & ~done
        lengths = torch.where(finished_now, torch.full_like(lengths, t + 1), lengths)
        done |= finished_now
        if bool(done.all()) or t == max_new_tokens - 1:
            break
        mask = torch.cat([mask, torch.ones((n, 1), dtype=mask.dtype, device=device)], 1)
        cache = {"cache": out["cache"]} if "cache" in out else {"past_key_values": out.past_key_values}  # 5.x / 4.x
        out = model(input_ids=tok[:, None], attention_mask=mask, position_ids=next_pos, use_cache=True, **cache)
        next_pos = next_pos + 1
    width = int(lengths.max())
    return Generated(tokens[:, :width].contiguous(), lengths, ~done)


def answer_logprobs(model, prompt_ids: Tensor, prompt_mask: Tensor, responses: Tensor,
                    response_mask: Tensor, with_entropy: bool = False) -> tuple[Tensor, Optional[Tensor]]:
    """Log-probabilities ``(N, R)`` of the response tokens under ``model`` (and the policy's entropy at each
    response position, ``(N, R)``), from one forward pass over prompt and response."""
    ids = torch.cat([prompt_ids, responses], 1)
    mask = torch.cat([prompt_mask, response_mask.long()], 1)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits
    lp = prompt_ids.shape[1]
    logits = logits[:, lp - 1: lp - 1 + responses.shape[1]].float()  # the position before each response token
    logp_all = torch.log_softmax(logits, -1)
    logp = logp_all.gather(-1, responses[..., None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
    return logp, entropy


def supervised_loss(model, ids: Tensor, mask: Tensor, loss_mask: Tensor) -> Tensor:
    """Cross-entropy of the tokens where ``loss_mask`` ``(N, L)`` is set (the answers), given everything before."""
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits[:, :-1].float()
    target, keep = ids[:, 1:], loss_mask[:, 1:].bool()
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="none")
    return ce.view_as(target)[keep].mean()


def check_model_dir(model_dir: Optional[str]) -> None:
    """One line, before anything is written, for a --model-dir that cannot be read as a causal LM's config."""
    if model_dir is None:
        return
    from transformers import AutoConfig

    path = Path(model_dir).expanduser()
    if not (path / "config.json").is_file():
        raise ConfigError(f"--model-dir {model_dir} holds no config.json; give a directory written by save_pretrained "
                          "(nothing is downloaded)")
    try:
        AutoConfig.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as e:
        raise ConfigError(f"--model-dir {model_dir}: unreadable config.json ({type(e).__name__})") from e
