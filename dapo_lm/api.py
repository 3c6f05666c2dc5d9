"""The sequence-generation Python API, the same shape as :mod:`core.run.api`:

    import dapo_lm
    result = dapo_lm.train(task="add", algo="dapo-lm", total_steps=12_000)
    agent = dapo_lm.load(result.run_dir)
    agent.evaluate(problems=200)          # held-out accuracy (greedy)
    agent.answer("123+45=")               # the model's greedy answer

Your own model, prompts and reward (docs/algorithms.md, section 8):

    def exact(prompts, completions, answer, **kw):            # TRL's reward_funcs shape
        return [1.0 if c.strip() == a else 0.0 for c, a in zip(completions, answer)]

    dapo_lm.train(model="my-model/", prompts=[{"prompt": "2+2=", "answer": "4"}, ...], reward=exact,
                  eval_prompts="heldout.jsonl", total_steps=4096)

``model``: a model directory (``--model-dir``) or an architecture config.json (``--model-config``); ``tokenizer``: a
tokenizer directory; ``prompts`` / ``eval_prompts``: a file path or a list of dicts; ``reward``: a ``module:function``
string, a callable, or a list of them (``(callable, weight)`` pairs too).  A lambda or local function (and a list of
prompts) lives in this process only: pass it again to resume or load the run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from core.config.errors import ConfigError
from core.run.api import EvalResult, RunResult
from core.run.api import train as core_train


def _prompts_option(value: Any, flag: str) -> Any:
    """A path as it is; a list of dicts kept in this process under a content-addressed name."""
    from dapo_lm.prompts import LOCAL_PROMPTS, local_name

    if value is None or isinstance(value, (str, Path)):
        return None if value is None else str(value)
    if isinstance(value, (list, tuple)) and all(isinstance(r, dict) for r in value):
        name = local_name(list(value))
        LOCAL_PROMPTS[name] = list(value)
        return name
    raise ConfigError(f"{flag} must be a file path or a list of dicts, got {type(value).__name__}")


def _reward_option(value: Any, saved: Sequence[str] = ()) -> Optional[tuple]:
    """``--reward`` strings for a string, a callable, a ``(callable or string, weight)`` pair, or a list of those;
    a callable at the place of a process-local reward of ``saved`` (the run's own) takes that name again."""
    from dapo_lm.rewards import LOCAL, LOCAL_REWARDS, reference, split_spec

    if value is None:
        return None
    pair = isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], (int, float))
    items = [value] if isinstance(value, str) or callable(value) or pair else list(value)
    out = []
    for k, item in enumerate(items):
        fn, weight = item if isinstance(item, tuple) and len(item) == 2 else (item, None)
        old = split_spec(saved[k])[0] if k < len(saved) and len(saved) == len(items) else ""
        if callable(fn) and old.startswith(LOCAL):  # the run's reward given again (maybe redefined): its name
            LOCAL_REWARDS[old] = fn
            fn = old
        elif callable(fn):
            fn = reference(fn)
        if not isinstance(fn, str):
            raise ConfigError(f"reward must be 'module:function', a callable or a list of them, got {fn!r}"[:200])
        out.append(fn if weight is None else f"{fn}={float(weight)}")
    return tuple(out)


def _model_options(model: Any, tokenizer: Any) -> dict:
    out = {}
    if model is not None:
        if not isinstance(model, (str, Path)):
            raise ConfigError("model must be a path: a model directory (save_pretrained) or an architecture "
                              f"config.json, got {type(model).__name__}")
        path = Path(model).expanduser()
        out["model_config" if path.suffix == ".json" else "model_dir"] = str(model)
    if tokenizer is not None:
        if not isinstance(tokenizer, (str, Path)):
            raise ConfigError(f"tokenizer must be a directory path, got {type(tokenizer).__name__}")
        out["tokenizer_dir"] = str(tokenizer)
    return out


def train(config=None, *, resume: Optional[Union[str, Path]] = None, trust_env: bool = False,
          model: Union[None, str, Path] = None, tokenizer: Union[None, str, Path] = None,
          prompts: Union[None, str, Path, Sequence[dict]] = None,
          eval_prompts: Union[None, str, Path, Sequence[dict]] = None,
          reward: Union[None, str, Callable, Sequence[Any]] = None, **options: Any) -> RunResult:
    """Train one run of this family (default algorithm: dapo-lm, unless options or a recipe name another); see
    :func:`core.run.api.train`.  ``model``, ``tokenizer``, ``prompts``, ``eval_prompts`` and ``reward``: see the module
    docstring.  To resume a run of Python objects, pass the same ones again (they confirm its saved rewards)."""
    saved = None
    if resume is not None and any(v is not None for v in (model, tokenizer, prompts, eval_prompts, reward)):
        from dapo_lm.runner import load_run_config

        saved = load_run_config(Path(resume), trust_env=True)
    given = {"prompts": _prompts_option(prompts, "prompts"),
             "eval_prompts": _prompts_option(eval_prompts, "eval_prompts"),
             "reward": _reward_option(reward, saved.reward if saved is not None else ()),
             **_model_options(model, tokenizer)}
    given = {k: v for k, v in given.items() if v is not None}
    if saved is not None:  # given again: they must be the run's own (and confirm its rewards)
        changed = sorted(k for k, v in given.items() if getattr(saved, k) != v)
        if changed:
            raise ConfigError(f"{changed[0]} cannot change when resuming; pass the run's own (or leave it out)")
        trust_env, given = trust_env or "reward" in given, {}
    return core_train(config, resume=resume, family="Sequence generation", trust_env=trust_env, **given, **options)


def load(run_dir: Union[str, Path], device: str = "cpu", env=None, trust_env: bool = False,
         reward: Union[None, str, Callable, Sequence[Any]] = None,
         prompts: Union[None, Sequence[dict]] = None) -> "LMAgent":
    """The trained policy of ``run_dir``; ``reward`` / ``prompts``: the Python objects the run was trained with,
    where they live in no file (a lambda, a list of dicts); ``trust_env`` confirms a --reward its config.yaml names."""
    from dapo_lm.runner import load_trainer

    from dapo_lm.runner import load_run_config

    _prompts_option(prompts, "prompts")
    if reward is not None:
        _reward_option(reward, load_run_config(Path(run_dir), trust_env=True).reward)
        trust_env = True
    return LMAgent(load_trainer(Path(run_dir), device, trust_env))


class LMAgent:
    """A trained policy: ``model`` (the transformers causal LM), ``tokenizer``, ``task`` (None for your prompts),
    ``reward`` and ``config``."""

    def __init__(self, trainer):
        self.trainer, self.model, self.tokenizer = trainer, trainer.model, trainer.tok
        self.task, self.reward, self.config = trainer.task, trainer.reward, trainer.cfg

    def answer(self, prompt: str) -> str:
        """The greedy answer to one prompt (e.g. ``"123+45="``)."""
        from dapo_lm.model import left_pad, sample

        ids, mask = left_pad([self.tokenizer.encode_prompt(prompt)], self.tokenizer.pad_id, self.trainer.device)
        out = sample(self.model.eval(), ids, mask, self.config.max_new_tokens, self.tokenizer.eos_id,
                     self.tokenizer.pad_id, greedy=True)
        return self.tokenizer.decode(out.tokens[0])

    def evaluate(self, problems: Optional[int] = None, seed: int = 12345, deterministic: bool = True) -> EvalResult:
        """Held-out accuracy: mean (the accuracy) and sample std (ddof=1) of 1/0 per problem."""
        from core.run.evaluation import mean_std
        from dapo_lm.runner import evaluate_trainer

        hits = evaluate_trainer(self.trainer, problems, seed, deterministic)
        mean, std = mean_std(hits)
        return EvalResult(mean, std, hits)
