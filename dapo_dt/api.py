"""The Decision Transformer Python API, the same shape as :mod:`core.run.api`:

    import dapo_dt
    result = dapo_dt.train(dataset="pong/mixed-v0", env="ALE/Pong-v5", algo="dapo-dt", grad_steps=2000)
    agent = dapo_dt.load(result.run_dir)
    agent.evaluate(episodes=8)        # whole games, actions sampled from the model's softmax
    agent.normalised_score(agent.evaluate(10).mean)   # D4RL-style datasets: 0 random, 100 expert

    # any Minari dataset with flat Box observations, by name or folder; the env is the one it records
    dapo_dt.train(dataset_path="~/.minari/datasets/mujoco/hopper/medium-v0", algo="dt", grad_steps=10_000)

A DT acts on a history of (return-to-go, state, action) tokens, so there is no single-observation ``predict``;
``agent.trainer.play`` plays whole games and ``agent.model`` is the ``DecisionTransformer``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

from core.run.api import EvalResult, RunResult
from core.run.api import train as core_train


def train(config=None, *, resume: Optional[Union[str, Path]] = None, trust_env: bool = False,
          **options: Any) -> RunResult:
    """Train one run of this family (default algorithm: dapo-dt, unless options or a recipe name another); see
    :func:`core.run.api.train`."""
    return core_train(config, resume=resume, family="Decision Transformer", trust_env=trust_env, **options)


def load(run_dir: Union[str, Path], device: str = "cpu", env=None, trust_env: bool = False) -> "DTAgent":
    """The trained model of ``run_dir``; ``env`` replaces the saved env, ``trust_env`` confirms a saved env that
    would import code (core/config/trust.py)."""
    from dapo_dt.runner import load_trainer

    return DTAgent(load_trainer(Path(run_dir), device, env, trust_env))


class DTAgent:
    def __init__(self, trainer):
        self.trainer, self.model, self.config = trainer, trainer.model, trainer.cfg

    def evaluate(self, episodes: int = 8, seed: int = 12345) -> EvalResult:
        """Whole games (raw scores), conditioned on the run's target return."""
        from core.run.evaluation import mean_std

        scores = [ep.score for ep in self.trainer.play(episodes, seed)]
        mean, std = mean_std(scores)
        return EvalResult(mean, std, scores)

    def normalised_score(self, score: float) -> float:
        """D4RL's normalised score of a raw score: ``100 (score - ref_min) / (ref_max - ref_min)`` (0 random, 100
        expert) from the dataset's reference scores; NaN for a dataset without them."""
        from dapo_dt.data import normalised_score

        return normalised_score(score, self.trainer.ref_scores)
