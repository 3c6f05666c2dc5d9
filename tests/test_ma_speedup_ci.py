"""The multi-agent benchmark's convergence speed-up: ratio of median steps to the threshold with a bootstrap CI."""
import math

import numpy as np

from experiments.ma_spread import ratio_of_medians_ci


def test_never_reached_counts_as_the_budget_so_the_interval_stays_defined():
    a, b = np.array([10.0, 30.0, np.nan]), np.array([20.0, np.nan, 40.0])
    ratio, lo, hi = ratio_of_medians_ci(a, b, reps=500, budget=100)
    assert ratio == 30 / 40  # medians of (10, 30, 100) and (20, 40, 100)
    assert math.isfinite(lo) and math.isfinite(hi) and lo <= ratio <= hi
    assert all(math.isnan(x) for x in ratio_of_medians_ci(np.array([np.nan]), np.array([np.nan]), reps=50)[1:])
