"""PufferLib 3.0's prioritized segments (``core.algo.segment_sampler``) and their extension.

Hand numbers for the segment layout, priorities and beta schedule; a second implementation of the priorities
written the way PufferLib stores a rollout (segments as rows of an env-major array); the draws' frequencies
against ``p``; and the extension's refusals and its wiring into the trainer.
"""
import numpy as np
import pytest
import torch

from core.config.errors import ConfigError
from core.algo.segment_sampler import SegmentSampler, annealed_beta, segment_indices, segment_probs
from core.algo.sampler import Transitions


def _window(adv: torch.Tensor) -> Transitions:
    n = adv.numel()
    return Transitions(torch.zeros(n, 1), torch.zeros(n), torch.zeros(n), torch.zeros(n), adv, torch.zeros(n))


def test_segments_are_consecutive_steps_of_one_env():
    # 2 envs x 4 steps stored time-major (i = 2 t + e), segments of 2 steps
    assert segment_indices(2, 4, 2).tolist() == [[0, 2], [4, 6], [1, 3], [5, 7]]


def test_priorities_by_hand():
    adv = torch.tensor([1.0, -2.0, 3.0, 0.0, -1.0, 4.0, 0.0, 0.0])  # (T=4, E=2) time-major
    p = segment_probs(adv, segment_indices(2, 4, 2), alpha=0.5)
    # segment sums of |A|: env 0 steps 0-1: |1| + |3| = 4, steps 2-3: |-1| + 0 = 1; env 1: 2 + 0 = 2, 4 + 0 = 4
    expected = np.array([2.0, 1.0, 2 ** 0.5, 2.0]) + 1e-6
    np.testing.assert_allclose(p.numpy(), expected / expected.sum(), rtol=1e-6)
    assert annealed_beta(0.2, 0.8, 0.0) == 0.2 and annealed_beta(0.2, 0.8, 0.5) == pytest.approx(0.52)
    assert annealed_beta(0.2, 0.8, 1.0) == pytest.approx(0.84) and annealed_beta(0.4, 1.0, 1.0) == pytest.approx(1.0)


def test_priorities_match_pufferlibs_layout():
    """PufferLib keeps a rollout as (segments, horizon) rows; the same advantages stored time-major must give the
    same p."""
    g = torch.Generator().manual_seed(0)
    envs, steps, length, alpha = 3, 8, 4, 0.7
    by_env = torch.randn(envs, steps, generator=g)                          # (E, T)
    rows = by_env.reshape(envs * steps // length, length).numpy()           # PufferLib's (S, L)
    prio = np.abs(rows).sum(axis=1) ** alpha
    reference = (prio + 1e-6) / (prio + 1e-6).sum()
    time_major = by_env.T.reshape(-1)                                       # the trainer's flattening of (T, E)
    ours = segment_probs(time_major, segment_indices(envs, steps, length), alpha)
    np.testing.assert_allclose(ours.numpy(), reference, rtol=1e-6)


def test_minibatches_hold_whole_distinct_segments_with_their_weights():
    adv = torch.arange(32, dtype=torch.float32)
    sampler = SegmentSampler(4, 8, 2, alpha=1.0, beta0=0.5, device=torch.device("cpu"), seed=1)
    sampler.add(_window(adv))
    sampler.progress = 0.5
    p, segments = sampler.segment_probabilities(), sampler.segments
    beta = 0.5 + 0.5 * 1.0 * 0.5
    for idx, w in sampler.minibatches(num_minibatches=5, minibatch_size=8):
        rows = idx.reshape(4, 2)
        chosen = [int(torch.nonzero((segments == r).all(dim=1))[0]) for r in rows]
        assert len(set(chosen)) == 4  # without replacement within a minibatch
        expected = (16 * p[chosen]).pow(-beta).repeat_interleave(2)
        torch.testing.assert_close(w, expected)
    assert sampler.stats()["sampler/beta"] == pytest.approx(beta)
    assert sampler.probabilities().sum().item() == pytest.approx(1.0, abs=1e-6)


def test_single_segment_draws_follow_p():
    """With one segment per minibatch each draw is one sample of p: 20000 draws land within 4 binomial sds."""
    adv = torch.tensor([0.1, 1.0, 2.0, 4.0, 0.5, 0.0, 3.0, 1.0])
    sampler = SegmentSampler(1, 8, 2, alpha=1.0, beta0=0.0, device=torch.device("cpu"), seed=3)
    sampler.add(_window(adv))
    p = sampler.segment_probabilities().numpy()
    counts = np.zeros(4)
    for idx, _ in sampler.minibatches(num_minibatches=20_000, minibatch_size=2):
        counts[int(idx[0]) // 2] += 1
    sd = np.sqrt(20_000 * p * (1 - p))
    assert np.all(np.abs(counts - 20_000 * p) < 4 * sd), (counts, 20_000 * p)


def test_a_partial_rollout_is_refused():
    sampler = SegmentSampler(2, 4, 2, alpha=0.8, beta0=0.2, device=torch.device("cpu"))
    with pytest.raises(ValueError, match="whole rollouts"):
        sampler.add(_window(torch.zeros(6)))


@pytest.mark.parametrize("overrides,match", [
    ({}, "--no-dynamic-sampling"),
    ({"dynamic_sampling": False, "window": 512}, "drop --window"),
    ({"dynamic_sampling": False, "extensions": {"prioritized_segments": {"segment_length": 48}}}, "divide --num-steps"),
    ({"dynamic_sampling": False, "num_minibatches": 8, "extensions": {"prioritized_segments": {"segment_length": 64}}},
     "divide the minibatch size"),
    ({"dynamic_sampling": False, "extensions": {"prioritized_segments": {"alpha": 1.5}}}, "alpha must be in"),
])
def test_the_extension_refuses_what_it_cannot_do(tmp_path, small_config, overrides, match):
    overrides = {"extensions": {"prioritized_segments": {}}, **overrides}
    with pytest.raises(ConfigError, match=match):
        small_config(tmp_path, **overrides)


def test_the_trainer_draws_segments_and_anneals_beta(tmp_path, small_config):
    from core.training.trainer import Trainer

    cfg = small_config(tmp_path, dynamic_sampling=False, total_steps=1024,
                       extensions={"prioritized_segments": {"segment_length": 16, "alpha": 1.0, "beta0": 0.5}})
    t = Trainer(cfg, tmp_path)
    assert isinstance(t.sampler, SegmentSampler) and t.updater.name == "numpy"
    betas = [t.iterate()["sampler/beta"] for _ in range(4)]
    assert betas == pytest.approx([0.5, 0.625, 0.75, 0.875])  # 4 updates: progress 0, 1/4, 2/4, 3/4
