"""dapo_lm.losses and dapo_lm.group_filter by hand numbers: group advantages, the per-token clipped surrogate with
clip-higher, the three aggregations (and that gradient accumulation leaves them unchanged), overlong shaping and
the group filter (accuracy or reward spread, float noise, cap reached, surplus discarded or carried)."""
import math
import warnings

import pytest
import torch

from dapo_lm.group_filter import GroupFilter
from dapo_lm.losses import (aggregate, batch_normaliser, clipped_token_surrogate, constant_groups, group_advantages,
                            overlong_penalty, response_mask)


def test_group_advantages_by_hand():
    r = torch.tensor([[1.0, -1.0, -1.0, -1.0], [1.0, 1.0, 1.0, 1.0]])
    # group 1: mean -0.5, deviations (1.5, -0.5, -0.5, -0.5), std (ddof 1) = 1
    assert torch.allclose(group_advantages(r, std_normalise=False)[0], torch.tensor([1.5, -0.5, -0.5, -0.5]))
    assert torch.allclose(group_advantages(r, std_normalise=True)[0], torch.tensor([1.5, -0.5, -0.5, -0.5]), atol=1e-5)
    assert group_advantages(r)[1].abs().sum() == 0  # a constant group carries no signal
    r2 = torch.tensor([[3.0, 1.0]])  # mean 2, std sqrt(2)
    assert torch.allclose(group_advantages(r2), torch.tensor([[1 / math.sqrt(2), -1 / math.sqrt(2)]]), atol=1e-5)
    with pytest.raises(ValueError):
        group_advantages(torch.ones(4))


def test_float_noise_is_not_signal():
    noisy = torch.tensor([[1.0, 1.0 + 1e-9, 1.0 - 1e-9, 1.0]], dtype=torch.float64)
    assert constant_groups(noisy).tolist() == [True]
    assert group_advantages(noisy).abs().max() == 0  # without the spread test, std-normalising gives ~1
    assert constant_groups(torch.tensor([[1.0, 0.999]])).tolist() == [False]


def test_clipped_surrogate_with_clip_higher():
    logp_old = torch.zeros(1, 4)
    ratio = torch.tensor([[0.7, 0.9, 1.25, 1.4]])
    logp_new = ratio.log()
    pos, d = clipped_token_surrogate(logp_new, logp_old, torch.tensor([1.0]), 0.2, 0.28)
    # A > 0: min(r, clip(r, 0.8, 1.28)) -> 0.7, 0.9, 1.25, 1.28 (only the upper bound binds)
    assert torch.allclose(pos, -torch.tensor([[0.7, 0.9, 1.25, 1.28]]), atol=1e-6)
    assert d["clipped_high"].tolist() == [[False, False, False, True]] and not d["clipped_low"].any()
    neg, d = clipped_token_surrogate(logp_new, logp_old, torch.tensor([-1.0]), 0.2, 0.28)
    # A < 0: min(-r, -clip(r)) = -max(r, clip(r)) -> 0.8, 0.9, 1.25, 1.4 (only the lower bound binds)
    assert torch.allclose(neg, torch.tensor([[0.8, 0.9, 1.25, 1.4]]), atol=1e-6)
    assert d["clipped_low"].tolist() == [[True, False, False, False]] and not d["clipped_high"].any()
    sym, _ = clipped_token_surrogate(logp_new, logp_old, torch.tensor([1.0]), 0.2, 0.2)
    assert float(sym[0, 2]) == pytest.approx(-1.2)  # the symmetric clip caps 1.25 at 1.2


# per-token losses of 3 answers with 3, 1 and 2 tokens
LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0], [5.0, 7.0, 9.0]])
MASK = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0]], dtype=torch.bool)


@pytest.mark.parametrize("how,expected", [
    ("token-mean", (1 + 2 + 3 + 4 + 5 + 7) / 6),                  # every token weighs 1/6
    ("seq-mean-token-mean", ((1 + 2 + 3) / 3 + 4 / 1 + 12 / 2) / 3),  # every answer 1/3
    ("seq-mean-token-sum-norm", 22 / (3 * 5)),                     # Dr. GRPO: answers x max_len (5)
])
def test_aggregations_by_hand(how, expected):
    norm = batch_normaliser(MASK, how, max_len=5)
    assert float(aggregate(LOSS, MASK, how, norm)) == pytest.approx(expected)


@pytest.mark.parametrize("how", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_gradient_accumulation_does_not_change_the_loss_or_its_gradient(how):
    torch.manual_seed(0)
    lengths = torch.tensor([7, 1, 4, 6, 2, 5])
    mask = response_mask(lengths, 7, torch.zeros(6, dtype=torch.bool), False)
    w = torch.randn(6, 7, requires_grad=True)
    norm = batch_normaliser(mask, how, max_len=8)
    full = aggregate(w ** 2, mask, how, norm)
    (g_full,) = torch.autograd.grad(full, w)
    for cut in ([0, 1, 2, 3, 4, 5], [[0, 1], [2, 3, 4], [5]]):
        parts = [cut] if isinstance(cut[0], int) else cut
        total, grad = 0.0, torch.zeros_like(w)
        for idx in parts:
            idx = torch.tensor(idx)
            part = aggregate(w[idx] ** 2, mask[idx], how, norm)
            (g,) = torch.autograd.grad(part, w)
            total, grad = total + float(part.detach()), grad + g
        assert total == pytest.approx(float(full), rel=1e-6)
        assert torch.allclose(grad, g_full, atol=1e-6)
    # the bug this rules out: a mean of per-micro-batch means differs when micro-batches hold unequal token counts
    if how == "token-mean":
        a, b = torch.tensor([0, 1]), torch.tensor([2, 3, 4, 5])
        naive = (aggregate(w[a] ** 2, mask[a], how, batch_normaliser(mask[a], how, 8))
                 + aggregate(w[b] ** 2, mask[b], how, batch_normaliser(mask[b], how, 8))) / 2
        assert float(naive) != pytest.approx(float(full), rel=1e-3)


def test_overlong_masking_and_penalty():
    lengths = torch.tensor([10, 40, 44, 48, 60])
    # max_len 48, buffer 8: free up to 40, then -(L - 40) / 8, -1 from 48 on
    assert overlong_penalty(lengths, 48, 8).tolist() == [0.0, 0.0, -0.5, -1.0, -1.0]
    truncated = torch.tensor([False, True])
    m = response_mask(torch.tensor([2, 3]), 3, truncated, filter_truncated=True)
    assert m.tolist() == [[True, True, False], [False, False, False]]
    assert response_mask(torch.tensor([2, 3]), 3, truncated, False).tolist() == [[True, True, False], [True] * 3]
    with pytest.raises(ValueError):
        overlong_penalty(lengths, 8, 9)


def _rounds(rewards_per_round, correct_per_round=None):
    """A generate() that hands out groups named by (round, index) with the given rewards (and verdicts: by default a
    reward of 1 is a correct answer)."""
    it = iter(enumerate(zip(rewards_per_round, correct_per_round or [None] * len(rewards_per_round))))

    def generate():
        k, (rewards, correct) = next(it)
        r = torch.tensor(rewards, dtype=torch.float64)
        c = r == 1 if correct is None else torch.tensor(correct)
        return [(k, i) for i in range(len(r))], r, c
    return generate


def test_acc_filter_keeps_groups_with_some_but_not_all_correct():
    """DAPO's rule (0 < #correct < G), not reward spread: four wrong answers, two truncated, have rewards
    [-1, -1, -2, -2] under the soft penalty and are dropped; a noisy all-correct group is dropped too."""
    f = GroupFilter(target=2, max_rounds=5)
    assert f.criterion == "acc"
    rewards = [[-1, -1, -2, -2], [1, -1, -1, -1], [1, 1 - 1e-3, 1, 1], [-1, -1, -1, 0.5]]
    correct = [[False] * 4, [True, False, False, False], [True] * 4, [False, False, False, True]]
    fill = f.fill(_rounds([rewards], [correct]))
    assert fill.groups == [(0, 1), (0, 3)] and fill.filtered == 2 and fill.rounds == 1
    std = GroupFilter(target=4, max_rounds=1, criterion="std").fill(_rounds([rewards], [correct]))
    assert std.groups == [(0, 0), (0, 1), (0, 2), (0, 3)]  # every group has reward spread
    with pytest.raises(ValueError, match="criterion"):
        GroupFilter(1, 1, criterion="spread")


def test_std_filter_keeps_groups_with_spread_and_generates_until_full():
    f = GroupFilter(target=2, max_rounds=5, criterion="std", carry=True)
    gen = _rounds([[[1, 1], [0, 0], [1, 0]], [[1, 1 + 1e-12], [0, 1], [1, 0]]])
    fill = f.fill(gen)
    # round 0 gives one informative group, round 1 two more (the float-noise group is dropped): one is surplus
    assert fill.groups == [(0, 2), (1, 1)] and fill.rounds == 2 and fill.generated == 6 and fill.filtered == 3
    assert f.pending == [(1, 2)]
    fill = f.fill(_rounds([[[0, 1], [1, 1]]]))
    assert fill.groups == [(1, 2), (0, 0)] and fill.from_surplus == 1 and f.pending == []


def test_surplus_is_discarded_unless_carried():
    f = GroupFilter(target=1, max_rounds=1)
    fill = f.fill(_rounds([[[0, 1], [1, 0], [1, 0]]]))
    assert fill.groups == [(0, 0)] and f.pending == []


def test_filter_at_the_cap_trains_short_and_warns_once():
    f = GroupFilter(target=3, max_rounds=2)
    with pytest.warns(UserWarning, match="training on what there is"):
        fill = f.fill(_rounds([[[1, 1], [1, 1]], [[0, 0], [1, 0]]]))
    assert fill.hit_cap and fill.groups == [(1, 1)] and fill.rounds == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second time: no warning
        fill = f.fill(_rounds([[[1, 1], [1, 1]], [[0, 0], [0, 0]]]))  # all equal: nothing to train on, no crash
    assert fill.hit_cap and fill.groups == [] and fill.filtered == 4


def test_filter_off_keeps_everything_and_surplus_is_bounded():
    fill = GroupFilter(target=2, max_rounds=3, enabled=False).fill(_rounds([[[1, 1], [0, 0]]]))
    assert fill.groups == [(0, 0), (0, 1)] and fill.filtered == 0
    f = GroupFilter(target=1, max_rounds=1, carry=True, max_surplus=2)
    f.fill(_rounds([[[0, 1], [0, 1], [1, 0], [1, 0]]]))
    assert f.pending == [(0, 2), (0, 3)]  # the oldest surplus dropped first
    assert GroupFilter(1, 1, carry=True).load_state_dict(f.state_dict()) is None
