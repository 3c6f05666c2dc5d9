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
    """Make the trainer's generation hand out the given lists of groups, one list per round (then the last again),
    each with ``logp_old`` as the sampler keeps it: the generating model's, in eval mode, at the temperature."""
    it = iter(rounds)
    last = []

    def generate_groups(model, tok, task, problems, cfg, device, generator):
        nonlocal last
        last = next(it, last)
        groups = [copy.deepcopy(g) for g in last]
        model.eval()
        for g in groups:
            n = len(g["tokens"])
            with torch.no_grad():
                g["logp_old"], _ = answer_logprobs(model, g["prompt"][None].expand(n, -1),
                                                   torch.ones(n, len(g["prompt"]), dtype=torch.long), g["tokens"],
                                                   torch.ones_like(g["tokens"], dtype=torch.bool),
                                                   temperature=cfg.temperature)
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


# --- 2. log-probabilities at the sampling temperature --------------------------------------------------------------
def test_old_log_probs_are_those_of_the_sampling_distribution(tmp_path, monkeypatch):
    """pi_old of each sampled token equals the probability the sampler drew it with, softmax(logits / T)."""
    cfg = resolve({"algo": "grpo-lm", **TINY, "prompts_per_batch": 2, "group_size": 2, "num_minibatches": 1,
                   "temperature": 0.5})
    trainer = LMTrainer(cfg, tmp_path)
    drawn = []
    multinomial = torch.multinomial

    def recording(probs, n, generator=None):
        tok = multinomial(probs, n, generator=generator)
        drawn.append(probs.gather(-1, tok).squeeze(-1).log())
        return tok

    monkeypatch.setattr(torch, "multinomial", recording)
    trainer._generated = []
    groups, _, _ = trainer._round()
    monkeypatch.setattr(torch, "multinomial", multinomial)
    sampled = torch.stack(drawn, 1)                                          # (N, steps)
    lengths = torch.cat([g["lengths"] for g in groups])
    calls = capture_surrogate(monkeypatch)
    trainer.update(groups)
    logp_old = calls[0][1]
    for i, n in enumerate(lengths.tolist()):
        assert torch.allclose(logp_old[i, :n], sampled[i, :n], atol=1e-4), (i, logp_old[i, :n], sampled[i, :n])


def test_answer_logprobs_and_entropy_at_a_temperature():
    from dapo_lm.model import build_model, left_pad

    model = build_model(TOK.vocab_size, 1, 2, 16, 64, seed=1).eval()
    ids, mask = left_pad([TOK.encode("12+3=", bos=True)], TOK.pad_id, "cpu")
    answer = torch.tensor([TOK.encode("15", eos=True)])
    real = torch.ones_like(answer, dtype=torch.bool)
    lp, ent = answer_logprobs(model, ids, mask, answer, real, with_entropy=True, temperature=2.0)
    full = model(input_ids=torch.cat([ids, answer], 1)).logits[0, ids.shape[1] - 1:-1] / 2.0
    expect = torch.log_softmax(full, -1)
    assert torch.allclose(lp[0], expect.gather(-1, answer[0][:, None]).squeeze(-1), atol=1e-5)
    assert torch.allclose(ent[0], -(expect.exp() * expect).sum(-1), atol=1e-5)


# --- 3. no dropout in pi_old (nor in the update) -----------------------------------------------------------------------
@pytest.fixture
def dropout_model_dir(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=TOK.vocab_size, n_positions=128, n_embd=16, n_layer=1, n_head=2, bos_token_id=1,
                        eos_token_id=2, pad_token_id=0)  # GPT-2's dropout: 0.1 in residuals, embeddings, attention
    assert config.resid_pdrop == 0.1
    path = tmp_path / "model"
    GPT2LMHeadModel(config).save_pretrained(path)
    return str(path)


def test_the_ratio_is_one_at_identical_weights_with_a_dropout_model(tmp_path, dropout_model_dir, monkeypatch):
    cfg = resolve({**{k: v for k, v in TINY.items() if not k.startswith("n_")}, "algo": "grpo-lm",
                   "model_dir": dropout_model_dir, "prompts_per_batch": 2, "group_size": 4, "num_minibatches": 2,
                   "run_dir": str(tmp_path / "run")})
    trainer = LMTrainer(cfg, tmp_path / "run")
    trainer._generated = []
    groups, _, _ = trainer._round()
    calls = []
    real = dapo_lm.trainer.clipped_token_surrogate

    def spy(logp_new, logp_old, adv, eps_low, eps_high):
        loss, d = real(logp_new, logp_old, adv, eps_low, eps_high)
        calls.append(d["ratio"].clone())
        return loss, d

    dapo_lm.trainer.clipped_token_surrogate, saved = spy, real
    monkeypatch.setattr(torch, "randperm", lambda n, **k: torch.arange(n))
    try:
        trainer.update(groups)
    finally:
        dapo_lm.trainer.clipped_token_surrogate = saved
    lengths = torch.cat([g["lengths"] for g in groups])[:len(calls[0])]  # minibatches in batch order
    real = torch.arange(calls[0].shape[1])[None] < lengths[:, None]  # answer tokens (pads are not scored)
    first = calls[0][real]  # the first minibatch: before any optimiser step, pi_theta = pi_old
    assert torch.allclose(first, torch.ones_like(first), atol=1e-5), (first.min(), first.max())


# --- 4. surplus groups ---------------------------------------------------------------------------------------------------
THREE_GROUPS = [group(**ONE_RIGHT, seed=1), group(**ONE_RIGHT, prompt="7+8=", seed=2),
                group(**ONE_RIGHT, prompt="40+2=", seed=3)]


def test_surplus_groups_are_discarded_by_default(tmp_path, monkeypatch):
    cfg = resolve({"algo": "dapo-lm", **TINY, "prompts_per_batch": 2, "group_size": 4, "num_minibatches": 1})
    fake_rounds(monkeypatch, [THREE_GROUPS])
    trainer = LMTrainer(cfg, tmp_path)
    m = trainer.rl_iterate()
    assert m["sampler/groups"] == 2 and m["sampler/surplus"] == 0 and trainer.filter.pending == []


def test_carried_surplus_keeps_the_behaviour_log_probs_of_its_generation(tmp_path, monkeypatch):
    """With --carry-surplus the third group waits for the next batch with pi_old of the policy that sampled it; the
    next update's ratio for it is pi_theta / that pi_old, not / the next update's starting policy."""
    cfg = resolve({"algo": "dapo-lm", **TINY, "prompts_per_batch": 2, "group_size": 4, "num_minibatches": 1,
                   "carry_surplus": True, "lr": 1e-2, "temperature": 0.7})
    fresh = group(**ONE_RIGHT, prompt="5+5=", seed=4)
    fake_rounds(monkeypatch, [THREE_GROUPS, [fresh]])
    trainer = LMTrainer(cfg, tmp_path)
    behaviour = copy.deepcopy(trainer.model).eval()
    g3 = THREE_GROUPS[2]
    real = torch.ones_like(g3["tokens"], dtype=torch.bool)  # every answer's 4 or 5 tokens; none is shorter
    with torch.no_grad():
        expect, _ = answer_logprobs(behaviour, g3["prompt"][None].expand(4, -1), torch.ones(4, len(g3["prompt"]),
                                    dtype=torch.long), g3["tokens"], real, temperature=0.7)
    trainer.rl_iterate()
    assert len(trainer.filter.pending) == 1
    carried = trainer.filter.pending[0]
    assert torch.allclose(carried["logp_old"][:, :4], expect[:, :4], atol=1e-5)
    calls = capture_surrogate(monkeypatch)
    m = trainer.rl_iterate()
    assert m["sampler/from_surplus"] == 1
    logp_new, logp_old, _ = calls[0]  # batch order: the carried group first
    assert torch.allclose(logp_old[:4, :4], expect[:, :4], atol=1e-5)
    assert not torch.allclose(logp_new[:4, :4], expect[:, :4], atol=1e-3)  # the policy moved: a real correction
