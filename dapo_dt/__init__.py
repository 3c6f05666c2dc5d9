"""Decision Transformer for Atari with DAPO's advantage weighting (SPEC 4).

- :mod:`dapo_dt.data`: Minari datasets made by the toolkit's own agents (``dapo dataset collect|info``).
- :mod:`dapo_dt.model`: GPT-2 (``transformers.GPT2Model`` via ``inputs_embeds``) over (R, s, a) tokens,
  the advantage FiLM after each attention sub-layer, the value head.
- :mod:`dapo_dt.trainer`: offline DT / DAPO-DT training and evaluation; :mod:`dapo_dt.online`: online
  fine-tuning (imitation for DT, DAPO's clipped ratio with a KL-driven clip for DAPO-DT).
- :mod:`dapo_dt.acting`: playing whole games with a DT; :mod:`dapo_dt.runner`: ``dapo run --algo dt|dapo-dt``.
"""
