"""Decision Transformer with DAPO's advantage weighting, and BC baselines (docs/algorithms.md section 6).

- Python API: :func:`train`, :func:`load` (``evaluate``); config: :class:`DTConfig`.
- :mod:`dapo_dt.data`: reading Minari datasets: Atari ones made by the toolkit's own agents, and any with flat Box
  observations and Box or Discrete actions; :mod:`dapo_dt.collect`: ``dapo dataset collect`` (the Atari ones).
- :mod:`dapo_dt.model`: GPT-2 (``transformers.GPT2Model`` via ``inputs_embeds``) over (R, s, a) tokens,
  the advantage FiLM after each attention sub-layer, the value head.
- :mod:`dapo_dt.losses`: the per-token action losses (cross-entropy, MSE) and the exponential advantage weights.
- :mod:`dapo_dt.trainer`: offline DT / DAPO-DT training and evaluation; :mod:`dapo_dt.online`: online
  fine-tuning (imitation for DT, DAPO's clipped ratio with a KL-driven clip for DAPO-DT).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from core.config.lazy import lazy_exports

# public name -> its module, imported on first use (PEP 562): the family's registration (family.py) and ``dapo --help``
# import no trainer and no torch
_EXPORTS = {
    "train": "dapo_dt.api", "load": "dapo_dt.api", "DTAgent": "dapo_dt.api", "DTConfig": "dapo_dt.config",
    "DT_ALGOS": "dapo_dt.config", "weighted_action_loss": "dapo_dt.losses",
    "weighted_mse_action_loss": "dapo_dt.losses", "exponential_advantage_weights": "dapo_dt.losses",
}

if TYPE_CHECKING:
    from dapo_dt.api import DTAgent, load, train
    from dapo_dt.config import DT_ALGOS, DTConfig
    from dapo_dt.losses import exponential_advantage_weights, weighted_action_loss, weighted_mse_action_loss

__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = ["train", "load", "DTAgent", "DTConfig", "DT_ALGOS", "weighted_action_loss", "weighted_mse_action_loss",
           "exponential_advantage_weights"]
