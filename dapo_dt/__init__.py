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
from dapo_dt.api import DTAgent, load, train
from dapo_dt.config import DT_ALGOS, DTConfig
from dapo_dt.losses import exponential_advantage_weights, weighted_action_loss, weighted_mse_action_loss

__all__ = ["train", "load", "DTAgent", "DTConfig", "DT_ALGOS", "weighted_action_loss", "weighted_mse_action_loss",
           "exponential_advantage_weights"]
