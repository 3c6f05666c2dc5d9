"""RL of a small generating transformer against a verifier: GRPO-LM and DAPO-LM (docs/algorithms.md, section 8).

- Python API: :func:`train`, :func:`load` (``evaluate``, ``answer``); config: :class:`LMConfig`.
- :mod:`dapo_lm.tasks`: addition and multiplication with a carry scratchpad, countdown; verifiers; held-out split.
- :mod:`dapo_lm.tokenizer`: the character tokenizer; :mod:`dapo_lm.model`: a transformers GPT-2, KV-cache sampling.
- :mod:`dapo_lm.trainer`: warm start, then RL with the losses of :mod:`dapo_lm.losses` and the group filter of
  :mod:`dapo_lm.group_filter`; :mod:`dapo_lm.health`: entropy, clip, length and zero-variance monitors.
"""
from dapo_lm.api import LMAgent, load, train
from dapo_lm.config import LM_ALGOS, LMConfig

__all__ = ["train", "load", "LMAgent", "LMConfig", "LM_ALGOS"]
