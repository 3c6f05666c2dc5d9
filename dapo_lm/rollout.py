"""Rollouts of the LM policy: prompt groups sampled, answered ``G`` times and scored by the run's reward
(:class:`dapo_lm.rewards.Reward`: the user's functions or a built-in task's verifier); batches collated from groups;
held-out evaluation.  A group is plain data (tensors and numbers), so the group filter's surplus goes into
checkpoints as it is."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from dapo_lm.losses import overlong_penalty
from dapo_lm.model import autocast, left_pad, sample
from dapo_lm.tasks import Problem


def rewards_of(base: Tensor, lengths: Tensor, cfg) -> Tensor:
    """The reward's values ``(N,)`` (a built-in task's: DAPO's rule-based +1 for a verified answer and -1 otherwise)
    plus the soft overlong punishment when it is on (Yu et al. 2025, eq. 13).  ``(N,)`` float32."""
    r = base.float()
    if cfg.soft_overlong_penalty:
        r = r + overlong_penalty(lengths, cfg.max_new_tokens, cfg.overlong_buffer)
    return r


def score(reward, tok, problems: list[Problem], tokens: Tensor, truncated: Tensor, per: int):
    """``per`` answers to each problem, ``(N, R)`` ids -> (rewards ``(N,)`` float64 numpy, correct ``(N,)`` bool
    numpy), from the decoded completions, the prompts and the rows' other columns."""
    n = len(tokens)
    rows = [problems[i // per] for i in range(n)]
    names = sorted({k for p in problems for k in p.columns})
    return reward.score([p.prompt for p in rows], [tok.decode(t) for t in tokens], truncated.tolist(),
                        {k: [p.columns.get(k) for p in rows] for k in names})


@torch.no_grad()
def generate_groups(model, tok, reward, problems: list[Problem], cfg, device,
                    generator: Optional[torch.Generator]) -> tuple[list[dict], Tensor]:
    """``G`` sampled answers to each problem -> (groups, rewards ``(P, G)``); each group is a dict of the prompt's
    ids ``(Lp,)``, the answers' ``tokens (G, R)``, ``lengths``, ``truncated``, ``correct`` and ``rewards`` ``(G,)``,
    and ``logp_old (G, R)``: the log-probabilities the sampler drew the tokens with (pi_old of the update)."""
    g = cfg.group_size
    prompts = [tok.encode_prompt(p.prompt) for p in problems]
    ids, mask = left_pad([p for p in prompts for _ in range(g)], tok.pad_id, device)
    model.eval()
    with autocast(device):
        out = sample(model, ids, mask, cfg.max_new_tokens, tok.eos_id, tok.pad_id, cfg.temperature, generator)
    tokens, lengths, truncated, logp = out.tokens.cpu(), out.lengths.cpu(), out.truncated.cpu(), out.logprobs.cpu()
    base, correct = score(reward, tok, problems, tokens, truncated, g)
    correct = torch.from_numpy(correct)
    rewards = rewards_of(torch.from_numpy(base), lengths, cfg)
    rows = [slice(k * g, (k + 1) * g) for k in range(len(problems))]
    groups = [{"prompt": torch.tensor(prompts[k]), "tokens": tokens[r], "lengths": lengths[r],
               "truncated": truncated[r], "correct": correct[r], "rewards": rewards[r], "logp_old": logp[r]}
              for k, r in enumerate(rows)]
    return groups, rewards.view(len(problems), g)


@dataclass
class Batch:
    prompt_ids: Tensor   # (N, Lp) left-padded
    prompt_mask: Tensor  # (N, Lp)
    tokens: Tensor       # (N, R) right-padded responses
    lengths: Tensor      # (N,)
    truncated: Tensor    # (N,) bool
    rewards: Tensor      # (P, G)
    logp_old: Tensor     # (N, R) float32: the behaviour log-probs each answer was sampled with (0 after its end)

    def to(self, device) -> "Batch":
        return Batch(*(t.to(device) for t in (self.prompt_ids, self.prompt_mask, self.tokens, self.lengths,
                                               self.truncated, self.rewards, self.logp_old)))


def collate(groups: list[dict], pad_id: int) -> Batch:
    """Groups (possibly of different prompt and answer widths) -> one batch, answers in group order."""
    g = groups[0]["tokens"].shape[0]
    ids, mask = left_pad([grp["prompt"].tolist() for grp in groups for _ in range(g)], pad_id, "cpu")
    width = max(int(grp["lengths"].max()) for grp in groups)
    tokens = torch.full((len(groups) * g, width), pad_id, dtype=torch.long)
    logp_old = torch.zeros((len(groups) * g, width), dtype=torch.float32)
    for k, grp in enumerate(groups):
        w = min(width, grp["tokens"].shape[1])
        tokens[k * g:(k + 1) * g, :w] = grp["tokens"][:, :w]
        logp_old[k * g:(k + 1) * g, :w] = grp["logp_old"][:, :w]
    cat = lambda key: torch.cat([grp[key] for grp in groups])  # noqa: E731
    return Batch(ids, mask, tokens, cat("lengths"), cat("truncated"), torch.stack([grp["rewards"] for grp in groups]),
                 logp_old)


@torch.no_grad()
def answer_hits(model, tok, reward, problems: list[Problem], max_new_tokens: int, device,
                k: int = 1, generator: Optional[torch.Generator] = None,
                batch: int = 256) -> tuple[list[bool], list[int]]:
    """Whether each of ``k`` answers per problem (greedy when ``generator`` is None, else sampled at temperature 1)
    is correct by the reward's rule, problem by problem, and the answers' lengths."""
    model.eval()
    hits, lengths = [], []
    for start in range(0, len(problems), batch):
        chunk = problems[start:start + batch]
        ids, mask = left_pad([tok.encode_prompt(p.prompt) for p in chunk for _ in range(k)], tok.pad_id, device)
        with autocast(device):
            res = sample(model, ids, mask, max_new_tokens, tok.eos_id, tok.pad_id, 1.0, generator,
                         greedy=generator is None)
        hits += score(reward, tok, chunk, res.tokens.cpu(), res.truncated.cpu(), k)[1].tolist()
        lengths += res.lengths.tolist()
    return hits, lengths


def heldout_accuracy(model, tok, reward, problems: list[Problem], max_new_tokens: int, device,
                     samples: int = 0, seed: int = 0) -> dict[str, float]:
    """Greedy accuracy on ``problems`` (and, with ``samples`` > 0, the mean accuracy of that many sampled answers per
    problem at temperature 1, from a generator of its own so that evaluating never moves the training RNG)."""
    hits, lengths = answer_hits(model, tok, reward, problems, max_new_tokens, device)
    out = {"greedy": float(np.mean(hits)), "greedy_length": float(np.mean(lengths))}
    if samples:
        gen = torch.Generator(device=device).manual_seed(seed)
        hits, lengths = answer_hits(model, tok, reward, problems, max_new_tokens, device, samples, gen)
        out.update(sampled=float(np.mean(hits)), sampled_length=float(np.mean(lengths)))
    return out
