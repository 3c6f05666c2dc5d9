"""Multi-agent DAPO on PettingZoo: per-agent clip parameters over one shared buffer (docs/algorithms.md).

Python API: :func:`train`, :func:`load` (agents with ``predict`` and ``evaluate``); config: :class:`MAConfig`.
Algorithms: ippo, mappo, dapo-ma (one on-policy trainer, :mod:`dapo_ma.ppo`, differing by recipes) and maddpg
(:mod:`dapo_ma.maddpg`).
"""
from dapo_ma.api import MAAgent, load, train
from dapo_ma.config import MA_ALGOS, MAConfig

__all__ = ["train", "load", "MAAgent", "MAConfig", "MA_ALGOS"]
