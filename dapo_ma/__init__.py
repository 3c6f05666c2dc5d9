"""Multi-agent DAPO on PettingZoo (SPEC 3): per-agent clip parameters over one shared buffer.

Entry points: :func:`dapo_ma.runner.run_experiment`, :func:`dapo_ma.evaluation.evaluate_run`,
:class:`dapo_ma.config.MAConfig`.  Algorithms: ippo, mappo, dapo-ma (one on-policy trainer,
:mod:`dapo_ma.ppo`, differing by presets) and maddpg (:mod:`dapo_ma.maddpg`).
"""
