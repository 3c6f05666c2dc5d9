"""RL of a small generating transformer against a verifier: GRPO-LM and DAPO-LM (docs/algorithms.md, section 8).

- Python API: :func:`train`, :func:`load` (``evaluate``, ``answer``); config: :class:`LMConfig`.
- :mod:`dapo_lm.tasks`: addition and multiplication with a carry scratchpad, countdown; verifiers; held-out split.
- :mod:`dapo_lm.tokenizer`: the character tokenizer; :mod:`dapo_lm.model`: a transformers GPT-2, KV-cache sampling.
- :mod:`dapo_lm.trainer`: warm start, then RL with the losses of :mod:`dapo_lm.losses` and the group filter of
  :mod:`dapo_lm.group_filter`; :mod:`dapo_lm.health`: entropy, clip, length and zero-variance monitors.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from core.config.lazy import lazy_exports

# public name -> its module, imported on first use (PEP 562): the family's registration (family.py) and ``dapo --help``
# import no trainer and no torch
_EXPORTS = {
    "train": "dapo_lm.api", "load": "dapo_lm.api", "LMAgent": "dapo_lm.api", "LMConfig": "dapo_lm.config",
    "LM_ALGOS": "dapo_lm.config",
}

if TYPE_CHECKING:
    from dapo_lm.api import LMAgent, load, train
    from dapo_lm.config import LM_ALGOS, LMConfig

__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = ["train", "load", "LMAgent", "LMConfig", "LM_ALGOS"]
