"""--compile: same numbers as eager, and a clean fallback when compilation fails."""
import warnings

import torch

from core.training.compile import maybe_compile
from core.algo.sampler import sampling_probs


def test_compiled_sampling_probs_match_eager():
    adv = torch.randn(257, generator=torch.Generator().manual_seed(0))
    fn = maybe_compile(sampling_probs)
    assert torch.allclose(fn(adv, 0.5), sampling_probs(adv, 0.5), atol=1e-6)


def test_failure_falls_back_to_eager_with_one_warning(monkeypatch):
    def broken_compile(fn, **kw):
        def fail(*a, **k):
            raise RuntimeError("no compiler")
        return fail
    monkeypatch.setattr(torch, "compile", broken_compile)
    fn = maybe_compile(lambda x: x + 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fn(1) == 2 and fn(2) == 3
    assert len(caught) == 1 and "running eagerly" in str(caught[0].message)
