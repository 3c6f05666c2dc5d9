"""The sequence-generation Python API, the same shape as :mod:`core.run.api`:

    import dapo_lm
    result = dapo_lm.train(task="add", algo="dapo-lm", total_steps=12_000)
    agent = dapo_lm.load(result.run_dir)
    agent.evaluate(problems=200)          # held-out accuracy (greedy)
    agent.answer("123+45=")               # the model's greedy answer
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

from core.run.api import EvalResult, RunResult
from core.run.api import train as core_train


def train(config=None, *, resume: Optional[Union[str, Path]] = None, trust_env: bool = False,
          **options: Any) -> RunResult:
    """Train one run of this family (default algorithm: dapo-lm, unless options or a recipe name another); see
    :func:`core.run.api.train`."""
    return core_train(config, resume=resume, family="Sequence generation", trust_env=trust_env, **options)


def load(run_dir: Union[str, Path], device: str = "cpu", env=None, trust_env: bool = False) -> "LMAgent":
    from dapo_lm.runner import load_trainer

    return LMAgent(load_trainer(Path(run_dir), device))


class LMAgent:
    """A trained policy: ``model`` (the transformers causal LM), ``tokenizer``, ``task`` and ``config``."""

    def __init__(self, trainer):
        self.trainer, self.model, self.tokenizer = trainer, trainer.model, trainer.tok
        self.task, self.config = trainer.task, trainer.cfg

    def answer(self, prompt: str) -> str:
        """The greedy answer to one prompt of the run's task (e.g. ``"123+45="``)."""
        from dapo_lm.model import left_pad, sample

        ids, mask = left_pad([self.tokenizer.encode(prompt, bos=True)], self.tokenizer.pad_id, self.trainer.device)
        out = sample(self.model.eval(), ids, mask, self.config.max_new_tokens, self.tokenizer.eos_id,
                     self.tokenizer.pad_id, greedy=True)
        return self.tokenizer.decode(out.tokens[0])

    def evaluate(self, problems: Optional[int] = None, seed: int = 12345, deterministic: bool = True) -> EvalResult:
        """Held-out accuracy: mean (the accuracy) and sample std (ddof=1) of 1/0 per problem."""
        from core.run.evaluation import mean_std
        from dapo_lm.runner import evaluate_run

        hits = evaluate_run(self.trainer.run_dir, problems, seed, str(self.trainer.device), deterministic)
        mean, std = mean_std(hits)
        return EvalResult(mean, std, hits)
