"""dapo_lm's tokenizer, tasks and verifiers, and the sampler's agreement with a full forward pass."""
import numpy as np
import pytest
import torch

from dapo_lm.tasks import TASKS, column_steps, is_heldout
from dapo_lm.tokenizer import ALPHABET, CharTokenizer


def test_tokenizer_round_trip():
    tok = CharTokenizer()
    text = "95+7=5+7+0=12,9+0+1=10,>102 3,5,7,2>34:(1*2)-3"
    ids = tok.encode(text, bos=True, eos=True)
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id and len(ids) == len(text) + 2
    assert tok.decode(ids) == text
    assert tok.decode(ids + tok.encode("99")) == text  # decoding stops at EOS
    assert tok.vocab_size == 3 + len(ALPHABET)
    with pytest.raises(ValueError, match="not in the alphabet"):
        tok.encode("x")


def test_transformers_tokenizer_has_the_same_ids():
    tok = CharTokenizer()
    hf = tok.to_transformers()
    text = "347*8=7*8+0=56"
    assert hf(text, add_special_tokens=False)["input_ids"] == tok.encode(text)
    assert hf.decode(tok.encode(text)) == text and hf.eos_token_id == tok.eos_id and hf.pad_token_id == tok.pad_id


def test_worked_answers_verify_and_the_verifier_rejects_wrong_ones():
    assert column_steps(95, 7, "+") == "5+7+0=12,9+0+1=10,>102"
    assert column_steps(347, 8, "*") == "7*8+0=56,4*8+5=37,3*8+3=27,>2776"
    rng = np.random.default_rng(0)
    for task in TASKS.values():
        for _ in range(300):
            p = task.sample(rng)
            assert task.verify(p.prompt, p.answer), p
            assert not is_heldout(p.prompt)
            assert not task.verify(p.prompt, p.answer + "1")
    add, cd = TASKS["add"], TASKS["countdown"]
    assert add.verify("95+7=", ">102") and not add.verify("95+7=", ">103") and not add.verify("95+7=", "102")
    assert cd.verify("3,5,7,2>34:", "5*7=35,3-2=1,35-1=34")
    assert cd.verify("3,5,7,2>34:", "7*5=35,3-2=1,35-1=34")      # another valid derivation
    assert not cd.verify("3,5,7,2>34:", "5*7=35,35-1=34")         # 3 and 2 unused, 1 not available
    assert not cd.verify("3,5,7,2>34:", "5*7=36,3-2=1,36-1=35")   # wrong arithmetic
    assert not cd.verify("3,5,7,2>34:", "5*5=25,3-2=1,25+9=34")   # 5 used twice


def test_heldout_problems_are_fixed_and_never_drawn_in_training():
    task = TASKS["add"]
    a, b = task.heldout_set(50), task.heldout_set(50)
    assert a == b and len({p.prompt for p in a}) == 50 and all(is_heldout(p.prompt) for p in a)
    rng = np.random.default_rng(1)
    train = {task.sample(rng).prompt for _ in range(2000)}
    assert not train & {p.prompt for p in a}


def test_kv_cache_sampling_matches_a_full_forward_pass():
    from dapo_lm.model import answer_logprobs, build_model, left_pad, positions, sample

    tok = CharTokenizer()
    model = build_model(tok.vocab_size, 2, 2, 32, 64, seed=3).eval()
    ids, mask = left_pad([tok.encode(p, bos=True) for p in ("1+2=", "345+6789=", "7*3=")], tok.pad_id, "cpu")
    out = sample(model, ids, mask, 12, tok.eos_id, tok.pad_id, greedy=True)
    real = torch.arange(out.tokens.shape[1])[None] < out.lengths[:, None]
    full = torch.cat([ids, out.tokens], 1)
    fmask = torch.cat([mask, real.long()], 1)
    logits = model(input_ids=full, attention_mask=fmask, position_ids=positions(fmask)).logits
    greedy = logits[:, ids.shape[1] - 1:-1].argmax(-1)
    assert ((greedy == out.tokens) | ~real).all()  # left padding and the cache change nothing
    g = torch.Generator().manual_seed(0)
    s = sample(model, ids, mask, 12, tok.eos_id, tok.pad_id, generator=g)
    lp, ent = answer_logprobs(model, ids, mask, s.tokens, torch.arange(s.tokens.shape[1])[None] < s.lengths[:, None],
                              with_entropy=True)
    assert torch.isfinite(lp).all() and (ent >= 0).all()
    assert (~s.truncated | (s.lengths == 12)).all()  # a truncated answer used the whole limit


def test_the_sampler_log_probs_equal_a_full_forward_pass_at_the_temperature():
    """The log-probs kept from sampling (pi_old of the update) are those :func:`answer_logprobs` computes in one
    full pass at the same temperature, on the answer tokens; 0 after EOS."""
    from dapo_lm.model import answer_logprobs, build_model, left_pad, sample

    tok = CharTokenizer()
    model = build_model(tok.vocab_size, 2, 2, 32, 64, seed=3).eval()
    ids, mask = left_pad([tok.encode(p, bos=True) for p in ("1+2=", "345+6789=", "7*3=")], tok.pad_id, "cpu")
    s = sample(model, ids, mask, 12, tok.eos_id, tok.pad_id, 0.7, torch.Generator().manual_seed(1))
    real = torch.arange(s.tokens.shape[1])[None] < s.lengths[:, None]
    with torch.no_grad():
        lp, _ = answer_logprobs(model, ids, mask, s.tokens, real, temperature=0.7)
    assert s.logprobs.shape == s.tokens.shape and (s.logprobs[real] < 0).all()
    assert torch.allclose(s.logprobs[real], lp[real], atol=1e-5), (s.logprobs[real] - lp[real]).abs().max()
    assert (s.logprobs[~real] == 0).all()
    assert sample(model, ids, mask, 12, tok.eos_id, tok.pad_id, greedy=True).logprobs is None


def test_the_update_runs_no_scoring_pass_for_sampled_groups(tmp_path, monkeypatch):
    """Groups from the sampler bring their pi_old: the update's only forward passes are its minibatches'."""
    import dapo_lm.trainer
    from dapo_lm.config import resolve
    from dapo_lm.trainer import LMTrainer

    cfg = resolve({"algo": "grpo-lm", "n_layer": 1, "n_head": 2, "n_embd": 16, "warm_start_steps": 0, "device": "cpu",
                   "eval_problems": 4, "eval_samples": 0, "prompts_per_batch": 2, "group_size": 2,
                   "num_minibatches": 2, "num_epochs": 1})
    trainer = LMTrainer(cfg, tmp_path)
    trainer._generated = []
    groups, _, _ = trainer._round()
    assert all(g["logp_old"].shape == g["tokens"].shape for g in groups)
    calls = []
    real = dapo_lm.trainer.answer_logprobs
    monkeypatch.setattr(dapo_lm.trainer, "answer_logprobs", lambda *a, **k: calls.append(k) or real(*a, **k))
    trainer.update(groups)
    assert len(calls) == 2 and all(k.get("with_entropy") for k in calls)  # the two minibatches, no pi_old pass


def test_rows_that_finish_leave_the_forward_pass_and_change_no_token(monkeypatch):
    """Each row's answer and log-probs, from a stream of its own, are the same in a batch (where finished rows are
    dropped from the cache and the forward pass) as alone; the batch did drop rows."""
    from transformers import DynamicCache

    from dapo_lm.model import build_model, left_pad, sample

    tok = CharTokenizer()
    model = build_model(tok.vocab_size, 2, 2, 32, 64, seed=5).eval()
    prompts = [tok.encode(p, bos=True) for p in ("1+2=", "345+6789=", "7*3=", "88-9=", "6+6=", "12*12=")]
    streams = lambda: [torch.Generator().manual_seed(10 + i) for i in range(len(prompts))]  # noqa: E731
    dropped = []
    select = DynamicCache.batch_select_indices
    monkeypatch.setattr(DynamicCache, "batch_select_indices",
                        lambda self, idx: dropped.append(len(idx)) or select(self, idx))
    ids, mask = left_pad(prompts, tok.pad_id, "cpu")
    batch = sample(model, ids, mask, 40, tok.eos_id, tok.pad_id, 3.0, streams())  # near uniform: EOS ~1 in 23
    assert dropped and len(set(batch.lengths.tolist())) > 2
    for i, (p, g) in enumerate(zip(prompts, streams())):
        one_ids, one_mask = left_pad([p], tok.pad_id, "cpu")
        alone = sample(model, one_ids, one_mask, 40, tok.eos_id, tok.pad_id, 3.0, [g])
        n = int(alone.lengths[0])
        assert int(batch.lengths[i]) == n and torch.equal(batch.tokens[i, :n], alone.tokens[0, :n])
        assert torch.allclose(batch.logprobs[i, :n], alone.logprobs[0, :n], atol=1e-5)
