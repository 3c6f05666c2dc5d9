"""The policy: a ``transformers`` causal LM (a fresh GPT-2, a fresh model of an architecture config, or one read from a
local directory), and its two hot paths: batched sampling with a KV cache (:func:`sample`) and per-token
log-probabilities of given answers (:func:`answer_logprobs`).  Nothing is downloaded (``local_files_only``).

Layout: prompts are left-padded (``(N, Lp)``) and responses right-padded (``(N, R)``), so every
response starts at column ``Lp``; position ids count real tokens only, so padding never shifts a position.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
from torch import Tensor

from core.config.errors import ConfigError


def build_model(vocab_size: int, n_layer: int, n_head: int, n_embd: int, n_positions: int,
                model_dir: Optional[str] = None, seed: int = 0, model_config: Optional[str] = None,
                tokenizer: str = "the character tokenizer"):
    """A fresh GPT-2 of the given size (no dropout); or the causal LM saved in ``model_dir``
    (:func:`load_model_dir`); or a fresh model of the architecture in ``model_config`` (:func:`model_from_config`).
    ``tokenizer`` names the run's tokenizer in messages."""
    from transformers import GPT2Config, GPT2LMHeadModel

    if model_dir is not None:
        return load_model_dir(model_dir, vocab_size, n_positions, tokenizer)
    if model_config is not None:
        return model_from_config(model_config, vocab_size, n_positions, seed, tokenizer)
    with torch.random.fork_rng():  # initial weights depend on the seed only, not on what ran before
        torch.manual_seed(seed)
        config = GPT2Config(vocab_size=vocab_size, n_positions=n_positions, n_embd=n_embd, n_layer=n_layer,
                            n_head=n_head, bos_token_id=1, eos_token_id=2, pad_token_id=0, resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0)
        return GPT2LMHeadModel(config)


def model_from_config(path: str, vocab_size: int, n_positions: int, seed: int,
                      tokenizer: str = "the character tokenizer"):
    """A fresh causal LM of the architecture in ``path`` (a config.json, e.g. GPT-2's or a Llama-style one, or a
    directory holding one), its weights drawn from ``seed``; one :class:`ConfigError` line when that fails."""
    import json

    from transformers import AutoConfig, AutoModelForCausalLM

    file = Path(path).expanduser()
    file = file / "config.json" if file.is_dir() else file
    if not file.is_file():
        raise ConfigError(f"--model-config {path}: no such config.json")
    try:
        values = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"--model-config {path} is not JSON ({type(e).__name__})") from e
    if not isinstance(values, dict) or not isinstance(values.get("model_type"), str):
        raise ConfigError(f"--model-config {path} names no model_type (e.g. \"gpt2\" or \"llama\")")
    try:
        with quiet_transformers(), torch.random.fork_rng():
            torch.manual_seed(seed)
            config = AutoConfig.for_model(values.pop("model_type"), **values)
            model = AutoModelForCausalLM.from_config(config)
    except Exception as e:  # noqa: BLE001 - every failure to build is one line, named by its type
        raise ConfigError(f"--model-config {path} does not make a causal LM ({load_failure(e)})") from e
    check_fits(model, f"--model-config {path}", vocab_size, n_positions, tokenizer)
    return model


def check_fits(model, what: str, vocab_size: int, n_positions: int, tokenizer: str) -> None:
    """One line when ``model`` has fewer embeddings than the tokenizer has ids, or fewer positions than the run
    needs."""
    rows = model.get_input_embeddings().num_embeddings
    if rows < vocab_size:
        raise ConfigError(f"{what} has a vocabulary of {rows} tokens, fewer than the {vocab_size} of {tokenizer}: "
                          "the tokenizer does not match the model")
    mc = model.config
    have = getattr(mc, "n_positions", None) or getattr(mc, "max_position_embeddings", None)
    if have is not None and have < n_positions:
        raise ConfigError(f"{what}'s model has {have} positions; this run needs {n_positions} (the longest prompt "
                          "and --max-new-tokens)")


@contextlib.contextmanager
def quiet_transformers():
    """transformers' loading bar and its warnings (config ids outside the vocabulary, the load report) off stderr
    and stdout while a model is read; its settings restored after."""
    import io

    from transformers.utils import logging as hf_logging

    verbosity, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()


def load_failure(e: Exception) -> str:
    """What went wrong reading a model directory, in a few words (one line, no terminal escapes)."""
    import re

    name = type(e).__name__
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()
    if name == "UnpicklingError":
        return f"{name}: a pickled weights file that torch's weights-only loader refuses; save it with safetensors"
    if "ignore_mismatched_sizes" in text or "size mismatch" in text:
        return f"{name}: its config.json does not match the shapes of its weights"
    first = (text.splitlines() or [""])[0]
    return f"{name}: {first if len(first) <= 160 else first[:157] + '...'}"


def load_model_dir(model_dir: str, vocab_size: int, n_positions: int, tokenizer: str = "the character tokenizer"):
    """The causal LM saved (save_pretrained) in ``model_dir``, in eval mode, or one :class:`ConfigError` line for
    every way that fails: no config.json; anything transformers, safetensors or torch raise while reading it
    (a truncated or garbage safetensors file, a config that does not match the weights, a pickled
    ``pytorch_model.bin`` that torch's weights-only loader refuses); fewer embeddings than ``tokenizer``'s
    ``vocab_size`` ids; fewer than ``n_positions`` positions; a non-finite weight.  Nothing is downloaded
    (``local_files_only``)."""
    from transformers import AutoModelForCausalLM

    path = Path(model_dir).expanduser()
    if not (path / "config.json").is_file():
        raise ConfigError(f"--model-dir {model_dir} holds no config.json; give a directory written by "
                          "save_pretrained (nothing is downloaded)")
    try:
        with quiet_transformers():
            model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)
    except Exception as e:  # noqa: BLE001 - every loading failure is the same one line, named by its type
        raise ConfigError(f"--model-dir {model_dir} is not a loadable causal LM ({load_failure(e)})") from e
    check_fits(model, f"--model-dir {model_dir}", vocab_size, n_positions, tokenizer)
    bad = [name for name, t in [*model.named_parameters(), *model.named_buffers()]
           if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise ConfigError(f"--model-dir {model_dir} holds non-finite weights ({len(bad)} tensors, e.g. {bad[0]}); "
                          "training would sample from NaN probabilities")
    return model.eval()


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
    logprobs: Optional[Tensor] = None
    """(N, R) float32 log-probability each sampled token was drawn with, ``log softmax(logits / T)`` (0 after EOS);
    None for greedy decoding.  The behaviour policy's pi_old, so the RL update needs no scoring pass of its own."""


def draw(probs: Tensor, generator) -> Tensor:
    """One token per row of ``probs`` ``(N, V)`` -> ``(N,)``.  ``generator``: one stream for all rows (or None: the
    global one), or a list of ``k`` streams, row block ``i`` of ``N / k`` rows drawn from stream ``i`` alone, so that
    a block's tokens depend on its stream and its probabilities only, not on the rows beside it (a prompt group's
    answers are the same whichever data-parallel rank, beside whichever other groups, samples them)."""
    if isinstance(generator, (list, tuple)):
        per = probs.shape[0] // len(generator)
        return torch.cat([torch.multinomial(p, 1, generator=g) for p, g in zip(probs.split(per), generator)]).squeeze(1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


@torch.no_grad()
def sample(model, prompt_ids: Tensor, prompt_mask: Tensor, max_new_tokens: int, eos_id: int, pad_id: int,
           temperature: float = 1.0, generator=None, greedy: bool = False) -> Generated:
    """Sample responses for left-padded prompts ``(N, Lp)``, one token per step through the KV cache, stopping
    once every row has emitted EOS (or at ``max_new_tokens``), with the log-probability of each drawn token (the
    same numbers :func:`answer_logprobs` computes from one full forward pass, up to float rounding between the
    cached and the full pass).  ``generator``: see :func:`draw`.

    Finished rows leave the forward pass (their cache rows dropped once a tenth of the running rows are done:
    answers of one batch differ in length, so the last steps run few rows).  Every row still takes its draw from
    ``generator`` at every step, as before, so the tokens are those of the full-batch loop."""
    n, device = prompt_ids.shape[0], prompt_ids.device
    tokens = torch.full((n, max_new_tokens), pad_id, dtype=torch.long, device=device)
    logprobs = None if greedy else torch.zeros((n, max_new_tokens), dtype=torch.float32, device=device)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    lengths = torch.full((n,), max_new_tokens, dtype=torch.long, device=device)
    running = torch.arange(n, device=device)  # the rows the model still runs, in order
    mask = prompt_mask
    pos = positions(mask)
    out = model(input_ids=prompt_ids, attention_mask=mask, position_ids=pos, use_cache=True)
    next_pos = pos[:, -1:] + 1
    for t in range(max_new_tokens):
        logits = out.logits[:, -1].float()                                        # (running, V)
        if len(running) < n:  # finished rows draw from a uniform stand-in (their token is replaced by pad)
            logits = logits.new_zeros((n, logits.shape[-1])).index_copy_(0, running, logits)
        if greedy:
            tok = logits.argmax(-1)
        else:
            scaled = logits / temperature
            tok = draw(torch.softmax(scaled, -1), generator)
            logprobs[:, t] = torch.log_softmax(scaled, -1).gather(-1, tok[:, None]).squeeze(-1).masked_fill(done, 0.0)
        tok = torch.where(done, torch.full_like(tok, pad_id), tok)
        tokens[:, t] = tok
        finished_now = (tok == eos_id) & ~done
        lengths = torch.where(finished_now, torch.full_like(lengths, t + 1), lengths)
        done |= finished_now
        if bool(done.all()) or t == max_new_tokens - 1:
            break
        cache = out["cache"] if "cache" in out else out.past_key_values  # transformers 5.x / 4.x
        keep = ~done[running]
        if int(keep.sum()) <= 0.9 * len(running) and hasattr(cache, "batch_select_indices"):
            rows = keep.nonzero().squeeze(1)
            cache.batch_select_indices(rows)
            running, mask, next_pos = running[rows], mask[rows], next_pos[rows]
        mask = torch.cat([mask, torch.ones((len(running), 1), dtype=mask.dtype, device=device)], 1)
        cached = {"cache": cache} if "cache" in out else {"past_key_values": cache}
        out = model(input_ids=tok[running, None], attention_mask=mask, position_ids=next_pos, use_cache=True, **cached)
        next_pos = next_pos + 1
    width = int(lengths.max())
    return Generated(tokens[:, :width].contiguous(), lengths, ~done,
                     None if logprobs is None else logprobs[:, :width].contiguous())


def answer_logprobs(model, prompt_ids: Tensor, prompt_mask: Tensor, responses: Tensor, response_mask: Tensor,
                    with_entropy: bool = False, temperature: float = 1.0) -> tuple[Tensor, Optional[Tensor]]:
    """Log-probabilities ``(N, R)`` of the response tokens under the policy that :func:`sample` draws from at
    ``temperature``, ``log softmax(logits / T)`` (and that policy's entropy at each response position, ``(N, R)``),
    from one forward pass over prompt and response.  The caller sets the model's mode (the RL trainer: eval, no
    dropout)."""
    ids = torch.cat([prompt_ids, responses], 1)
    mask = torch.cat([prompt_mask, response_mask.long()], 1)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits
    lp = prompt_ids.shape[1]
    logits = logits[:, lp - 1: lp - 1 + responses.shape[1]].float()  # the position before each response token
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, -1)
    logp = logp_all.gather(-1, responses[..., None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
    return logp, entropy


def supervised_loss(model, ids: Tensor, mask: Tensor, loss_mask: Tensor, normaliser: Optional[float] = None) -> Tensor:
    """Cross-entropy of the tokens where ``loss_mask`` ``(N, L)`` is set (the answers), given everything before: their
    mean, or with ``normaliser`` their sum divided by it (a data-parallel rank's share of a batch's mean: the
    normaliser is the whole batch's count of answer tokens after the first column, :func:`answer_tokens`)."""
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits[:, :-1].float()
    target, keep = ids[:, 1:], loss_mask[:, 1:].bool()
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="none")
    return ce.view_as(target)[keep].mean() if normaliser is None else ce.view_as(target)[keep].sum() / normaliser


def answer_tokens(loss_mask: Tensor) -> float:
    """The tokens :func:`supervised_loss` averages over, ``loss_mask`` ``(N, L)``."""
    return float(loss_mask[:, 1:].sum())
