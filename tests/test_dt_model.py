"""Decision Transformer model (``dapo_dt.model``) and its losses (``core.algo.losses``), docs/algorithms.md section 6.

Tiny configs (d=32, 2 layers, K=4, batch 2) so every test runs in well under a second on CPU.
Hand-computed expectations are literals worked out in the docstring or comment next to them.
"""
import copy
import math

import pytest
import torch

from dapo_dt.losses import exponential_advantage_weights, weighted_action_loss
from dapo_dt.model import DecisionTransformer, DTModelConfig, NatureCNN

B, K, A = 2, 4, 5


def _cfg(**kw) -> DTModelConfig:
    base = {"n_actions": A, "context_len": K, "n_layer": 2, "n_head": 2, "n_embd": 32, "max_timestep": 50,
            "dropout": 0.1}
    return DTModelConfig(**{**base, **kw})


def _model(**kw) -> DecisionTransformer:
    torch.manual_seed(0)
    return DecisionTransformer(_cfg(**kw)).eval()


def _batch(seed: int = 1) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {
        "rtg": torch.randn(B, K, generator=g),
        "frames": torch.randint(0, 256, (B, K, 4, 84, 84), generator=g, dtype=torch.uint8),
        "actions": torch.randint(0, A, (B, K), generator=g),
        "timesteps": torch.arange(K).repeat(B, 1) + 3,
        "mask": torch.ones(B, K, dtype=torch.bool),
        "advantages": torch.randn(B, K, generator=g),
    }


def _perturb_from(batch: dict, t: int, keys=("rtg", "frames", "actions", "advantages")) -> dict:
    """Copy of ``batch`` with the chosen inputs changed at every step > t, and the action at step t."""
    out = {k: v.clone() for k, v in batch.items()}
    g = torch.Generator().manual_seed(99)
    if "rtg" in keys:
        out["rtg"][:, t + 1:] += 5.0
    if "frames" in keys:
        out["frames"][:, t + 1:] = torch.randint(0, 256, out["frames"][:, t + 1:].shape, generator=g,
                                                 dtype=torch.uint8)
    if "advantages" in keys:
        out["advantages"][:, t + 1:] -= 3.0
    if "actions" in keys:
        out["actions"][:, t:] = (out["actions"][:, t:] + 1) % A
    return out


def _set_film(model: DecisionTransformer, seed: int = 7) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.film.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g))


def test_nature_cnn_shapes_and_uint8_equals_float():
    cnn = NatureCNN(out_dim=16)
    x = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    out = cnn(x)
    assert out.shape == (3, 16)
    assert torch.equal(out, cnn(x.float()))
    assert all(torch.count_nonzero(m.bias) == 0 for m in cnn.modules() if isinstance(m, (torch.nn.Conv2d,
                                                                                        torch.nn.Linear)))


def test_output_shapes():
    out = _model(value_head=True, advantage_modulation=True)(**_batch())
    assert out.logits.shape == (B, K, A)
    assert out.values.shape == (B, K)
    assert _model()(**_batch()).values is None


def test_no_token_vocabulary_and_frozen_zero_positions():
    model = _model()
    assert model.gpt.wte.weight.shape[0] == 1  # inputs_embeds only
    assert not model.gpt.wpe.weight.requires_grad
    assert torch.count_nonzero(model.gpt.wpe.weight) == 0


@pytest.mark.parametrize("modulated", [False, True])
def test_causality(modulated):
    """a_t's logits depend on R_<=t, s_<=t, a_<t (and A_<=t) only."""
    model = _model(advantage_modulation=modulated)
    if modulated:
        _set_film(model)
    batch = _batch()
    ref = model(**batch).logits
    for t in range(K - 1):
        out = model(**_perturb_from(batch, t)).logits
        assert torch.allclose(out[:, :t + 1], ref[:, :t + 1], atol=1e-6), t
        assert not torch.allclose(out[:, t + 1:], ref[:, t + 1:], atol=1e-4), t  # the perturbation is seen later


def test_current_step_inputs_are_seen():
    """Sanity check of the token order: R_t and s_t (not only the past) reach the logits at t."""
    model = _model()
    batch = _batch()
    ref = model(**batch).logits[:, -1]
    for key in ("rtg", "frames"):
        other = {k: v.clone() for k, v in batch.items()}
        other[key][:, -1] = 0
        assert not torch.allclose(model(**other).logits[:, -1], ref, atol=1e-4), key


def test_modulation_is_identity_at_init_and_switchable():
    plain = _model()
    modulated = _model(advantage_modulation=True)
    missing, unexpected = modulated.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and all(k.startswith(("adv_embed.", "film.")) for k in missing)
    batch = _batch()
    ref = plain(**batch).logits
    assert torch.equal(modulated(**batch).logits, ref)  # zero-init FiLM: exactly the plain DT
    _set_film(modulated)
    assert not torch.allclose(modulated(**batch).logits, ref, atol=1e-4)
    assert torch.equal(modulated(**{**batch, "advantages": None}).logits, ref)
    # A plain model ignores advantages; the conditioning of a call never leaks into the next one.
    assert torch.equal(plain(**batch).logits, ref)
    modulated(**batch)
    assert torch.equal(modulated(**{**batch, "advantages": None}).logits, ref)


def test_modulation_depends_on_advantage_value():
    model = _model(advantage_modulation=True)
    _set_film(model)
    batch = _batch()
    low = model(**{**batch, "advantages": torch.full((B, K), -1.0)}).logits
    high = model(**{**batch, "advantages": torch.full((B, K), 1.0)}).logits
    assert not torch.allclose(low, high, atol=1e-4)


def test_deepcopy_hooks_follow_the_copy():
    """The online fine-tuner keeps a frozen copy of the data-collecting DT: its hooks must use its own FiLM."""
    model = _model(advantage_modulation=True)
    old = copy.deepcopy(model)
    batch = _batch()
    ref = old(**batch).logits
    _set_film(model)
    assert torch.equal(old(**batch).logits, ref)
    assert not torch.allclose(model(**batch).logits, ref, atol=1e-4)


def test_value_head_ignores_rtg_actions_and_context():
    model = _model(value_head=True, advantage_modulation=True)
    _set_film(model)
    batch = _batch()
    ref = model(**batch).values
    other = {**batch, "rtg": batch["rtg"] + 10.0, "actions": (batch["actions"] + 1) % A,
             "advantages": -batch["advantages"], "timesteps": batch["timesteps"] + 7}
    assert torch.equal(model(**other).values, ref)
    frames = batch["frames"].clone()
    frames[:, 0] = 0  # V(s_t) is per step: changing s_0 changes V at step 0 only
    vals = model(**{**batch, "frames": frames}).values
    assert torch.equal(vals[:, 1:], ref[:, 1:]) and not torch.allclose(vals[:, 0], ref[:, 0])


def test_separate_value_encoder_keeps_value_and_imitation_gradients_apart():
    """With value_encoder, V reads its own CNN: the value output's gradient reaches that CNN and not the
    imitation encoder, the logits' gradient the reverse; without frames (acting) no value is computed."""
    model = _model(value_head=True, value_encoder=True)
    batch = _batch()
    out = model(**batch)
    assert torch.equal(out.values, model.state_values(batch["frames"], None))
    feats = model.encode_states(batch["frames"])
    assert model(**{**batch, "frames": None}, state_feat=feats).values is None

    def grads_of(loss):
        model.zero_grad()
        loss.backward()
        return [any(p.grad is not None and p.grad.abs().sum() > 0 for p in m.parameters())
                for m in (model.value_cnn, model.embed_state)]

    assert grads_of(model(**batch).values.sum()) == [True, False]
    assert grads_of(model(**batch).logits.sum()) == [False, True]


@pytest.mark.parametrize("modulated", [False, True])
def test_left_padding_does_not_affect_real_positions(modulated):
    model = _model(advantage_modulation=modulated, value_head=True)
    if modulated:
        _set_film(model)
    batch = _batch()
    pad = 2
    batch["mask"][0, :pad] = False  # row 0 has 2 padded steps on the left, row 1 none
    ref = model(**batch)
    other = {k: v.clone() for k, v in batch.items()}
    other["rtg"][0, :pad] = 123.0
    other["frames"][0, :pad] = 255
    other["actions"][0, :pad] = 0
    other["timesteps"][0, :pad] = 0
    other["advantages"][0, :pad] = 9.0
    out = model(**other)
    assert torch.isfinite(out.logits).all()
    assert torch.allclose(out.logits[0, pad:], ref.logits[0, pad:], atol=1e-6)
    assert torch.allclose(out.logits[1], ref.logits[1], atol=1e-6)
    assert torch.allclose(out.values[0, pad:], ref.values[0, pad:], atol=1e-6)


def test_timesteps_beyond_table_are_clamped():
    model = _model()
    batch = _batch()
    a = model(**{**batch, "timesteps": torch.full((B, K), 49)}).logits
    b = model(**{**batch, "timesteps": torch.full((B, K), 10_000)}).logits
    assert torch.equal(a, b)


def test_backward_reaches_film_and_embeddings():
    model = _model(advantage_modulation=True, value_head=True).train()
    out = model(**_batch())
    (out.logits.logsumexp(-1).mean() + out.values.mean()).backward()
    assert model.film[0].weight.grad.abs().sum() > 0  # zero-init layers still receive gradient
    assert model.embed_state.convs[0].weight.grad is not None
    assert model.gpt.wpe.weight.grad is None


def test_exponential_advantage_weights_hand_computed():
    """T=1, max 3: exp(0)=1, exp(ln 2)=2, exp(ln 4)=4 -> clipped to 3, exp(-ln 2)=0.5, exp(1000) -> 3 (no inf).
    T=2: exp(ln 4 / 2) = 2."""
    adv = torch.tensor([0.0, math.log(2), math.log(4), -math.log(2), 1000.0], requires_grad=True)
    w = exponential_advantage_weights(adv, temperature=1.0, max_weight=3.0)
    assert torch.allclose(w, torch.tensor([1.0, 2.0, 3.0, 0.5, 3.0]), atol=1e-6)
    assert not w.requires_grad
    assert exponential_advantage_weights(torch.tensor([math.log(4)]), 2.0, 10.0).item() == pytest.approx(2.0)
    with pytest.raises(ValueError):
        exponential_advantage_weights(adv, temperature=0.0, max_weight=3.0)


def test_dapo_dt_token_weights_stay_within_the_cap_after_rescaling():
    """T=1, max 2, real tokens A = (3, -1, -1, -1) and a padded one (A = 50, ignored): capped exp weights
    (2, e^-1, e^-1, e^-1), mean (2 + 3/e) / 4 = 0.7759 over the real tokens, so mean-1 rescaling alone gives the
    first token 2 / 0.7759 = 2.578 > 2 (issue 46); the second cap holds it at 2, the others stay e^-1 / 0.7759
    = 0.4741.  A batch whose capped mean is >= 1 keeps mean 1 exactly: A = (1, -1): (e, e^-1) / cosh(1)."""
    from dapo_dt.trainer import token_weights

    adv = torch.tensor([[3.0, -1.0, -1.0, -1.0, 50.0]])
    mask = torch.tensor([[True, True, True, True, False]])
    mean = (2 + 3 / math.e) / 4
    assert 2 / mean == pytest.approx(2.578, abs=1e-3)
    w = token_weights(adv, mask, temperature=1.0, max_weight=2.0)
    torch.testing.assert_close(w[mask], torch.tensor([2.0, *[math.exp(-1) / mean] * 3]))
    assert float(w.max()) <= 2.0
    w = token_weights(torch.tensor([[1.0, -1.0]]), torch.ones(1, 2, dtype=torch.bool), 1.0, 20.0)
    torch.testing.assert_close(w, torch.tensor([[math.e, math.exp(-1)]]) / math.cosh(1.0))


def test_weighted_action_loss_hand_computed():
    """B=1, K=3, A=4.  Token 0: uniform logits -> ce = ln 4, weight 2.  Token 1: logits (ln 3, 0, 0, 0) with
    action 0 -> p = 3/6 = 1/2, ce = ln 2, weight 0.5, argmax correct.  Token 2: padding (mask 0, action -1).
    loss = (2 ln 4 + 0.5 ln 2) / 2 = (4 ln 2 + 0.5 ln 2) / 2 = 2.25 ln 2.
    accuracy: token 0 has argmax 0 (ties -> first index) vs action 2 -> wrong; token 1 right -> 1/2.
    weight_mean = (2 + 0.5) / 2 = 1.25, weight_max = 2 (the padded weight 7 is ignored)."""
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [math.log(3), 0.0, 0.0, 0.0], [0.0, 9.0, 0.0, 0.0]]],
                          dtype=torch.float64)
    actions = torch.tensor([[2, 0, -1]])
    weights = torch.tensor([[2.0, 0.5, 7.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss, diag = weighted_action_loss(logits, actions, weights, mask)
    assert loss.item() == pytest.approx(2.25 * math.log(2), abs=1e-12)
    assert diag["action_accuracy"].item() == pytest.approx(0.5)
    assert diag["weight_mean"].item() == pytest.approx(1.25)
    assert diag["weight_max"].item() == pytest.approx(2.0)
    # weights=None: plain masked mean of the CE = (ln 4 + ln 2) / 2 = 1.5 ln 2
    loss, diag = weighted_action_loss(logits, actions, None, mask)
    assert loss.item() == pytest.approx(1.5 * math.log(2), abs=1e-12)
    assert diag["weight_max"].item() == 1.0


def test_weighted_action_loss_ignores_nan_at_padding():
    logits = torch.zeros(1, 2, 3)
    logits[0, 1] = float("nan")
    loss, _ = weighted_action_loss(logits, torch.tensor([[1, 1]]), None, torch.tensor([[True, False]]))
    assert loss.item() == pytest.approx(math.log(3))
