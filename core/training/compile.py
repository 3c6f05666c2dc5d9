"""Optional ``torch.compile`` with a clean fallback (docs/algorithms.md)."""
from __future__ import annotations

import functools
import warnings
from typing import Callable


def maybe_compile(fn: Callable, enabled: bool = True) -> Callable:
    """``torch.compile(fn)``, falling back to ``fn`` with one warning if compilation fails.

    Compilation is lazy (it happens at the first call), so the fallback wraps the first call too.
    """
    if not enabled:
        return fn
    import torch

    try:
        compiled = torch.compile(fn, dynamic=True)
    except Exception as e:  # torch.compile unavailable on this platform / Python
        warnings.warn(f"torch.compile unavailable ({type(e).__name__}: {e}); running eagerly", stacklevel=2)
        return fn
    state = {"fn": compiled}

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return state["fn"](*args, **kwargs)
        except Exception as e:
            if state["fn"] is fn:
                raise
            warnings.warn(f"torch.compile failed ({type(e).__name__}); running eagerly", stacklevel=2)
            state["fn"] = fn
            return fn(*args, **kwargs)
    return call
