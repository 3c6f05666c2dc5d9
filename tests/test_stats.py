"""Benchmark statistics (experiments/stats.py) on hand-checkable inputs."""
import math

import numpy as np
import pytest
from scipy.stats import trim_mean

from experiments.stats import heldout_skill, iqm, steps_to_threshold, stratified_bootstrap_ci


def test_iqm_hand_values_and_scipy():
    assert iqm([1, 2, 3, 4, 5, 6, 7, 8]) == 4.5          # middle four: 3, 4, 5, 6
    assert iqm([10, 0, 100]) == pytest.approx(110 / 3)  # fewer than 4 values: plain mean
    x = np.random.default_rng(0).normal(size=37)
    assert iqm(x) == pytest.approx(trim_mean(x, 0.25))


def test_stratified_bootstrap_ci_brackets_the_statistic_and_keeps_strata():
    rng = np.random.default_rng(1)
    scores = {"a": rng.normal(0, 1, 10), "b": rng.normal(100, 1, 10)}
    lo, hi = stratified_bootstrap_ci(scores, np.mean, reps=500)
    point = np.mean(np.concatenate(list(scores.values())))
    assert lo < point < hi
    assert hi - lo < 2.0   # strata keep their sizes: the 0-vs-100 split never changes the mean much
    wide = stratified_bootstrap_ci({"a": scores["a"][:3], "b": scores["b"][:3]}, np.mean, reps=500)
    assert wide[1] - wide[0] > hi - lo


def test_steps_to_threshold():
    assert steps_to_threshold([10, 20, 30], [0.1, 0.5, 0.9], 0.5) == 20
    assert math.isnan(steps_to_threshold([10, 20], [0.1, 0.2], 0.5))


def test_probability_of_improvement_by_hand():
    from experiments.stats import probability_of_improvement
    # task a: pairs (1,0) win, (1,3) lose, (2,0) win, (2,3) lose -> 1/2; task b: 5 vs 5 tie -> 1/2, 6 vs 5 win -> 3/4
    assert probability_of_improvement({"a": [1, 2], "b": [5, 6]}, {"a": [0, 3], "b": [5]}) == (0.5 + 0.75) / 2
    assert probability_of_improvement({"a": [2]}, {"a": [1], "c": [0]}) == 1.0   # only shared tasks count


def test_heldout_skill_hand_values():
    # table a -> 1, b -> 10 from the training rows; constant = training mean 5.5
    # test rows 3 (a), 12 (b): MSE(table) = (4 + 4) / 2 = 4, MSE(constant) = (6.25 + 42.25) / 2 = 24.25
    y, keys, train = [1, 3, 10, 12], ["a", "a", "b", "b"], np.array([True, False, True, False])
    assert heldout_skill(y, keys, train) == pytest.approx(1 - 4 / 24.25)
    # a key never seen in training falls back to the training mean: no better than the constant
    assert heldout_skill([1, 3, 10, 12], ["a", "c", "b", "d"], train) == pytest.approx(0.0)
    # a key that fits every training row perfectly but says nothing about new rows scores below 0
    rng = np.random.default_rng(0)
    noise = rng.normal(size=2000)
    assert heldout_skill(noise, rng.integers(0, 500, 2000), np.arange(2000) % 2 == 0) < 0
