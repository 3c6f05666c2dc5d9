"""The peer of experiments/lm_benchmark.py: TRL's ``GRPOTrainer`` (trl 1.16, ``pip install -e ".[lm-bench]"``) with
its DAPO settings, on the same task, warm-start weights, prompts (in the same order), group size, learning rate,
minibatches per generation, response limit and rewards as a ``dapo-lm`` run of this toolkit.

TRL's side: ``loss_type="dapo"`` (token-level loss), ``epsilon=0.2``, ``epsilon_high=0.28`` (clip-higher),
``mask_truncated_completions=True`` (overlong filtering), ``beta=0`` (no KL term), the soft overlong punishment
from ``trl.rewards`` added to the verifier's +1/-1, ``scale_rewards="group"``.  TRL has no dynamic sampling, so
the like-for-like rung of ours is ``lm-token-loss`` (everything of dapo-lm but the group filter).  Evaluation
uses this toolkit's held-out problems and greedy decoding on the model TRL trained.

Two settings differ from a bare ``GRPOConfig``, both for equal settings: no gradient checkpointing (ours does
none) and a GPT-2 whose backbone counts positions from the attention mask (:func:`count_positions_from_mask`;
without it TRL's loss would see left-padded prompts at shifted absolute positions).
"""
from __future__ import annotations

import json
import resource
import time
from pathlib import Path


def count_positions_from_mask(model) -> None:
    """Make a GPT-2's backbone count positions from the attention mask whenever it is given none, as this toolkit
    and ``generate`` count them (the first real token is position 0, left padding takes none).

    Why the peer needs it: TRL 1.16 computes its loss's log-probabilities with ``model(input_ids, attention_mask,
    labels, fused_lm_head=True)`` and no ``position_ids``; its fused LM head (``trl.trainer.utils.add_fused_lm_head``)
    calls the backbone (``model.base_model``) directly.  A GPT-2 has absolute position embeddings, so with
    left-padded prompts every token of the loss would sit at a position shifted by the prompt's padding: on this
    task's warm start the trained log-probabilities differ from those the answers were sampled with by about 1.7
    nats per token (trl_positions.json), and TRL would optimise a different policy from the one it samples.  Models
    with rotary positions, which TRL's users train, do not see a constant shift, so this is a fix of the model
    used here, not a change of TRL: the patch sits on the backbone, under both TRL's fused head and ``generate``.
    (An earlier version patched ``model.forward``, which the fused head bypasses: it changed nothing.)"""
    import functools

    backbone = model.base_model
    inner = backbone.forward

    @functools.wraps(inner)
    def forward(*args, **kwargs):
        ids, mask = kwargs.get("input_ids", args[0] if args else None), kwargs.get("attention_mask")
        if kwargs.get("position_ids") is None and ids is not None and mask is not None and mask.dim() == 2 \
                and mask.shape[0] == ids.shape[0] and mask.shape[1] >= ids.shape[1]:
            # the last ids.shape[1] positions: the whole sequence, or the new tokens of a cached pass
            kwargs["position_ids"] = (mask.long().cumsum(-1) - 1).clamp_min(0)[:, -ids.shape[1]:]
        return inner(*args, **kwargs)

    backbone.forward = forward


def grpo_config(out_dir: Path, seed: int, limit: int, batches: int, prompts_per_batch: int, group_size: int,
                num_minibatches: int, lr: float):
    """TRL's DAPO settings at this toolkit's: ``batches`` generation batches of ``prompts_per_batch`` x
    ``group_size`` answers, ``num_minibatches`` optimiser steps each, answers of at most ``limit`` tokens."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(out_dir / "trl_out"), loss_type="dapo", epsilon=0.2, epsilon_high=0.28,
        mask_truncated_completions=True, beta=0.0, scale_rewards="group", num_generations=group_size,
        max_completion_length=limit, per_device_train_batch_size=prompts_per_batch * group_size // num_minibatches,
        steps_per_generation=num_minibatches, gradient_accumulation_steps=1, num_iterations=1,
        max_steps=batches * num_minibatches, learning_rate=lr, lr_scheduler_type="constant", warmup_steps=0,
        adam_beta1=0.9, adam_beta2=0.99, weight_decay=0.0, max_grad_norm=1.0, temperature=1.0, top_k=0, top_p=1.0,
        use_cpu=True, bf16=False, seed=seed, shuffle_dataset=False, report_to="none", save_strategy="no",
        logging_steps=10**6, disable_tqdm=True, dataloader_num_workers=0, log_completions=False,
        # GRPOConfig defaults to gradient checkpointing (trl 1.16); this toolkit does not checkpoint, so the peer
        # would recompute activations that ours keeps: off, for equal settings
        gradient_checkpointing=False)


def run_trl(model_dir: str, task_name: str, seed: int, answers: int, out_dir: Path, prompts_per_batch: int = 16,
            group_size: int = 8, num_minibatches: int = 4, lr: float = 1e-4, eval_problems: int = 200) -> dict:
    """Train with TRL for ``answers`` generated answers (whole batches) and return the results row."""
    import numpy as np
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOTrainer
    from trl.rewards import get_soft_overlong_punishment

    from dapo_lm.rewards import Reward
    from dapo_lm.rollout import heldout_accuracy
    from dapo_lm.tasks import TASKS
    from dapo_lm.tokenizer import CharTokenizer

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    task, tok = TASKS[task_name], CharTokenizer()
    hf_tok = tok.to_transformers(bos_first=True)
    batches = -(-answers // (prompts_per_batch * group_size))
    rng = np.random.default_rng(seed)  # the same prompt sequence as our run from --model-dir (no warm-start draws)
    problems = [task.sample(rng) for _ in range(batches * prompts_per_batch)]
    data = Dataset.from_dict({"prompt": [p.prompt for p in problems]})
    limit, buffer = task.max_new_tokens, task.overlong_buffer
    generated = {"answers": 0, "tokens": 0}

    def correctness(prompts, completions, completion_ids, **_):
        out = []
        for p, c, ids in zip(prompts, completions, completion_ids):
            finished = len(ids) > 0 and ids[-1] == tok.eos_id
            out.append(1.0 if finished and task.verify(p, c) else -1.0)
            generated["answers"] += 1
            generated["tokens"] += len(ids)
        return out

    config = grpo_config(out_dir, seed, limit, batches, prompts_per_batch, group_size, num_minibatches, lr)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    count_positions_from_mask(model)  # GPT-2's absolute positions under TRL's loss forward (see the function)
    trainer = GRPOTrainer(model=model, reward_funcs=[correctness, get_soft_overlong_punishment(limit, buffer)],
                          args=config, train_dataset=data, processing_class=hf_tok)
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    final = heldout_accuracy(trainer.model, tok, Reward.of_task(task), task.heldout_set(eval_problems), limit,
                             torch.device("cpu"), samples=4, seed=seed + 10_000)
    return {"algo": "trl-grpo-dapo-loss", "task": task_name, "seed": seed, "answers_generated": generated["answers"],
            "updates": batches * num_minibatches, "wall_time_s": round(wall, 2),
            "answers_per_s": round(generated["answers"] / wall, 2), "tokens_per_s": round(generated["tokens"] / wall, 1),
            "heldout_accuracy": final["greedy"], "heldout_accuracy_sampled": final["sampled"],
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def run_trl_generic(model_dir: str, prompts: str, eval_prompts: str, reward: str, max_new_tokens: int,
                    overlong_buffer: int, seed: int, answers: int, out_dir: Path, prompts_per_batch: int = 16,
                    group_size: int = 8, num_minibatches: int = 4, lr: float = 1e-4, eval_problems: int = 200) -> dict:
    """The generic path's peer (experiments/lm_generic_benchmark.py): TRL from a model directory holding its own
    tokenizer, on the rows of a prompts file (the same rows in the same order as ``dapo run --prompts`` draws them
    with this seed), with the user's ``module:function`` reward as it is (plus TRL's soft overlong punishment), timed
    by phase (experiments/lm_phases.py); held-out accuracy as ``dapo run`` measures it."""
    import importlib

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOTrainer
    from trl.rewards import get_soft_overlong_punishment

    from dapo_lm.hf_tokenizer import load_tokenizer
    from dapo_lm.prompts import file_prompts
    from dapo_lm.rewards import Reward
    from dapo_lm.rollout import heldout_accuracy
    from experiments.lm_phases import Phases, time_trl

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    tok = load_tokenizer(model_dir, "--model-dir", False)
    source = file_prompts(prompts, "prompt", eval_prompts, 0.1, seed)
    batches = -(-answers // (prompts_per_batch * group_size))
    rows = source.draw(None, batches * prompts_per_batch)  # ours draws in this order (a permutation from the seed)
    data = Dataset.from_list([{"prompt": p.prompt, **p.columns} for p in rows])
    module, _, name = reward.rpartition(":")
    user_fn = getattr(importlib.import_module(module), name)
    generated = {"answers": 0, "tokens": 0}

    def counted(prompts, completions, completion_ids, **kwargs):  # the user's reward, answers and tokens counted
        generated["answers"] += len(completion_ids)
        generated["tokens"] += sum(len(ids) for ids in completion_ids)
        return user_fn(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)

    counted.__name__ = name
    config = grpo_config(out_dir, seed, max_new_tokens, batches, prompts_per_batch, group_size, num_minibatches, lr)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    trainer = GRPOTrainer(model=model, args=config, train_dataset=data, processing_class=tok.tok,
                          reward_funcs=[counted, get_soft_overlong_punishment(max_new_tokens, overlong_buffer)])
    phases = Phases()
    time_trl(phases, trainer)
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    final = heldout_accuracy(trainer.model, tok, Reward.load([reward]), source.heldout_set(eval_problems),
                             max_new_tokens, torch.device("cpu"), samples=4, seed=seed + 10_000)
    return {"algo": "trl-grpo-dapo-loss", "seed": seed, "answers_generated": generated["answers"],
            "updates": batches * num_minibatches, "rl_time_s": round(wall, 2),
            "answers_per_s": round(generated["answers"] / wall, 2), "tokens_per_s": round(generated["tokens"] / wall, 1),
            "heldout_accuracy": final["greedy"], "heldout_accuracy_sampled": final["sampled"],
            **{f"phase_{k}_s": round(v, 3) for k, v in phases.seconds.items()}}


if __name__ == "__main__":  # one run per process, so that the peak memory is its own
    import sys

    args = json.loads(sys.argv[1])
    if args.pop("generic", False):
        row_path = args.pop("row")
        row = run_trl_generic(**{**args, "out_dir": Path(args["out_dir"])})
        Path(row_path).write_text(json.dumps(row))
    else:
        row = run_trl(args["model_dir"], args["task"], args["seed"], args["answers"], Path(args["out_dir"]))
        Path(args["row"]).write_text(json.dumps(row))


def position_mismatch(model_dir: str, task_name: str, n: int = 128, seed: int = 0) -> dict:
    """How far a left-padded batch's log-probabilities move when positions count from the padding (a forward pass
    without ``position_ids``, as TRL 1.16's GRPOTrainer makes for its loss) instead of from the first real token
    (as ``generate`` and this toolkit count them): per answer token, |log p_arange - log p_mask|, and the share of
    tokens whose implied ratio leaves [0.8, 1.28]; and the same difference for the peer as it now runs (TRL's fused
    LM head on the GPT-2 of :func:`count_positions_from_mask`), which should be float noise."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from dapo_lm.model import answer_logprobs, left_pad, sample
    from dapo_lm.tasks import TASKS
    from dapo_lm.tokenizer import CharTokenizer

    torch.manual_seed(seed)
    tok, task = CharTokenizer(), TASKS[task_name]
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True).eval()
    rng = np.random.default_rng(seed)
    ids, mask = left_pad([tok.encode(task.sample(rng).prompt, bos=True) for _ in range(n)], tok.pad_id, "cpu")
    out = sample(model, ids, mask, task.max_new_tokens, tok.eos_id, tok.pad_id)
    real = torch.arange(out.tokens.shape[1])[None] < out.lengths[:, None]
    with torch.no_grad():
        by_mask, _ = answer_logprobs(model, ids, mask, out.tokens, real)
        full = torch.cat([ids, out.tokens], 1)
        logits = model(input_ids=full, attention_mask=torch.cat([mask, real.long()], 1)).logits  # arange positions
        lp = torch.log_softmax(logits[:, ids.shape[1] - 1:-1].float(), -1)
        by_arange = lp.gather(-1, out.tokens[..., None]).squeeze(-1)
        # the peer's path: TRL's fused LM head (as GRPOTrainer adds it) on the GPT-2 of count_positions_from_mask
        from trl.trainer.utils import add_fused_lm_head

        add_fused_lm_head(model)
        count_positions_from_mask(model)
        att = torch.cat([mask, real.long()], 1)
        labels = full.masked_fill(att == 0, -100)
        labels[:, :ids.shape[1]] = -100
        by_peer = model(input_ids=full, attention_mask=att, labels=labels, fused_lm_head=True).log_probs
        by_peer = by_peer[:, -out.tokens.shape[1]:]
    delta = (by_arange - by_mask)[real]
    padded = (mask == 0).any(1)[:, None].expand_as(real)[real]
    ratio = delta.exp()
    return {"tokens": int(real.sum()), "padded_prompt_share": float(padded.float().mean()),
            "mean_abs_delta_logp": float(delta.abs().mean()),
            "mean_abs_delta_logp_padded": float(delta[padded].abs().mean()),
            "ratio_outside_clip_share": float(((ratio < 0.8) | (ratio > 1.28)).float().mean()),
            "peer_mean_abs_delta_logp": float((by_peer - by_mask)[real].abs().mean())}
