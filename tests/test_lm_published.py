"""dapo_lm follows DAPO as published (Yu et al. 2025, arXiv 2503.14476; docs/algorithms.md, section 8): the group
filter keeps a group when 0 < #correct < G; pi_old and pi_theta are scored at the sampling temperature and without
dropout, so the ratio is exactly 1 at identical weights; surplus groups are discarded, or carried with the
behaviour log-probs of the policy that generated them."""
import copy

import pytest
import torch

import dapo_lm.trainer
from dapo_lm.config import resolve
from dapo_lm.model import answer_logprobs
from dapo_lm.tokenizer import CharTokenizer
from dapo_lm.trainer import LMTrainer

TINY = {"n_layer": 1, "n_head": 2, "n_embd": 16, "warm_start_steps": 0, "device": "cpu", "eval_problems": 4,
        "eval_samples": 0}
TOK = CharTokenizer()


def group(correct, rewards, truncated=None, prompt="12+3=", seed=0):
    """A prompt group as dapo_lm.rollout.generate_groups makes it: answers of 3 digits and EOS (5 tokens when
    truncated, no EOS)."""
    g = len(correct)
    truncated = truncated or [False] * g
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.full((g, 5), TOK.pad_id, dtype=torch.long)
    lengths = torch.zeros(g, dtype=torch.long)
    for i in range(g):
        n = 5 if truncated[i] else 4
        digits = torch.randint(0, 10, (n,), generator=gen)
        tokens[i, :n] = torch.tensor(TOK.encode("".join(map(str, digits.tolist()))))
        if not truncated[i]:
            tokens[i, 3] = TOK.eos_id
        lengths[i] = n
    return {"prompt": torch.tensor(TOK.encode(prompt, bos=True)), "tokens": tokens, "lengths": lengths,
            "truncated": torch.tensor(truncated), "correct": torch.tensor(correct),
            "rewards": torch.tensor(rewards, dtype=torch.float32)}


def fake_rounds(monkeypatch, rounds):
    """Make the trainer's generation hand out the given lists of groups, one list per round (then the last again)."""
    it = iter(rounds)
    last = []

    def generate_groups(model, tok, task, problems, cfg, device, generator):
        nonlocal last
        last = next(it, last)
        groups = [copy.deepcopy(g) for g in last]
        return groups, torch.stack([g["rewards"] for g in groups])

    monkeypatch.setattr(dapo_lm.trainer, "generate_groups", generate_groups)


def capture_surrogate(monkeypatch):
    """Record (logp_new, logp_old, ratio) of every call of the clipped surrogate; minibatches in batch order."""
    calls = []
    real = dapo_lm.trainer.clipped_token_surrogate

    def spy(logp_new, logp_old, adv, eps_low, eps_high):
        loss, d = real(logp_new, logp_old, adv, eps_low, eps_high)
        calls.append((logp_new.detach().clone(), logp_old.detach().clone(), d["ratio"].clone()))
        return loss, d

    monkeypatch.setattr(dapo_lm.trainer, "clipped_token_surrogate", spy)
    monkeypatch.setattr(torch, "randperm", lambda n, **k: torch.arange(n))
    return calls


WRONG_TWO_TRUNCATED = dict(correct=[False] * 4, truncated=[False, False, True, True], rewards=[-1.0, -1.0, -2.0, -2.0])
ONE_RIGHT = dict(correct=[True, False, False, False], rewards=[1.0, -1.0, -1.0, -1.0])


# --- 1. the group filter tests accuracy -------------------------------------------------------------------------
def test_the_default_filter_keeps_groups_by_accuracy_not_reward_spread(tmp_path, monkeypatch):
    """Four wrong answers, two of them truncated, have rewards [-1, -1, -2, -2] under the soft penalty: reward
    spread, but no correct answer; DAPO drops the group (0 < #correct < G), so a second round is needed."""
    cfg = resolve({"algo": "dapo-lm", **TINY, "prompts_per_batch": 2, "group_size": 4, "num_minibatches": 1})
    fake_rounds(monkeypatch, [[group(**WRONG_TWO_TRUNCATED), group(**ONE_RIGHT)]])
    m = LMTrainer(cfg, tmp_path).rl_iterate()
    assert (m["sampler/rounds"], m["sampler/filtered_share"], m["sampler/groups"]) == (2, 0.5, 2)
    assert cfg.group_filter == "acc"


def test_the_std_filter_keeps_groups_by_reward_spread(tmp_path, monkeypatch):
    cfg = resolve({"algo": "dapo-lm", **TINY, "prompts_per_batch": 2, "group_size": 4, "num_minibatches": 1,
                   "group_filter": "std"})
    fake_rounds(monkeypatch, [[group(**WRONG_TWO_TRUNCATED), group(**ONE_RIGHT)]])
    m = LMTrainer(cfg, tmp_path).rl_iterate()
    assert (m["sampler/rounds"], m["sampler/filtered_share"], m["sampler/groups"]) == (1, 0.0, 2)
