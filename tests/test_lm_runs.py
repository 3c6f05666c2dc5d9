"""dapo_lm end to end: RL raises held-out accuracy on a tiny task, runs from the CLI and the Python API, dapo eval,
exact resume on the CPU, the group filter's surplus in checkpoints (and that of an older version)."""
import dataclasses
import json

import numpy as np
import pytest

from core.run.cli import main
from dapo_lm import tasks
from dapo_lm.tasks import Problem, Task

TINY_MODEL = ["--n-layer", "2", "--n-head", "2", "--n-embd", "32"]
QUIET = ["--no-progress", "--no-tensorboard", "--device", "cpu"]


class Copy(Task):
    """Repeat a 1-3 digit number: a task a tiny model learns fast, with answers of 1-3 digits."""

    name, max_new_tokens, overlong_buffer = "add", 8, 2

    def draw(self, rng):
        n = int(rng.integers(0, 1000))
        return Problem(f"{n}=", str(n))

    def verify(self, prompt, response):
        return response == prompt[:-1]


@pytest.fixture
def copy_task(monkeypatch):
    monkeypatch.setitem(tasks.TASKS, "add", Copy())


@pytest.mark.slow
def test_rl_raises_heldout_accuracy_on_a_tiny_task(tmp_path, copy_task):
    import dapo_lm

    # 80 supervised steps leave greedy answers mostly right but sampled ones mostly wrong: RL's room
    r = dapo_lm.train(algo="dapo-lm", task="add", total_steps=4096, warm_start_steps=80, warm_start_batch=32,
                      prompts_per_batch=8, group_size=8, num_minibatches=2, lr=1e-3, eval_problems=60,
                      eval_samples=4, n_layer=2, n_head=2, n_embd=32, run_dir=str(tmp_path / "r"), progress=False,
                      tensorboard=False, device="cpu")
    s = r.summary
    assert s["answers_generated"] >= 3072 and s["optimizer_steps"] > 0
    assert s["heldout_accuracy_sampled"] > s["warm_start_accuracy_sampled"] + 0.2, s  # ~0.2 -> ~0.7 (seed 1)
    assert s["heldout_accuracy"] >= s["warm_start_accuracy"] - 0.1, s
    agent = dapo_lm.load(r.run_dir)
    assert agent.evaluate(problems=20).mean == pytest.approx(np.mean(agent.evaluate(problems=20).returns))
    assert isinstance(agent.answer("12="), str)


def _rows(run_dir):
    import csv

    with open(run_dir / "metrics.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_cli_run_eval_and_exact_resume(tmp_path, copy_task, capsys):
    """A run stopped after half its budget and resumed equals an uninterrupted one, row for row (dynamic sampling
    on: the filter's surplus, if any, travels through the checkpoint); dapo eval prints the held-out accuracy."""
    common = ["run", "--algo", "dapo-lm", *TINY_MODEL, *QUIET, "--warm-start-steps", "10", "--warm-start-batch", "16",
              "--prompts-per-batch", "4", "--group-size", "4", "--num-minibatches", "2", "--eval-problems", "20",
              "--eval-samples", "0", "--lr", "1e-3"]
    assert main([*common, "--total-steps", "256", "--run-dir", str(tmp_path / "full")]) == 0
    assert main([*common, "--total-steps", "128", "--run-dir", str(tmp_path / "half")]) == 0
    assert main(["run", "--resume", str(tmp_path / "half"), "--total-steps", "256", *QUIET[:2]]) == 0
    full, resumed = _rows(tmp_path / "full"), _rows(tmp_path / "half")
    skip = ("time/", "warm/")
    assert len(full) == len(resumed)
    for a, b in zip(full, resumed):
        assert {k: v for k, v in a.items() if not k.startswith(skip)} == \
               {k: v for k, v in b.items() if not k.startswith(skip)}
    s = json.loads((tmp_path / "full" / "summary.json").read_text())
    assert {"heldout_accuracy", "warm_start_accuracy", "answers_generated"} <= set(s)
    assert s["heldout_accuracy"] == json.loads((tmp_path / "half" / "summary.json").read_text())["heldout_accuracy"]
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "full")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("heldout_accuracy ") and "of 20 held-out problems" in out
    assert main(["eval", str(tmp_path / "full"), "--episodes", "5", "--stochastic"]) == 0
    assert "of 5 held-out problems" in capsys.readouterr().out


def test_ladder_recipes_switch_one_technique_each():
    from dapo_lm.config import resolve

    keys = ("clip_eps_high", "loss_aggregation", "filter_truncated", "soft_overlong_penalty", "dynamic_sampling")
    ladder = [resolve({"algo": "grpo-lm"})] + [resolve({"algo": "grpo-lm", "recipe": (r,)}) for r in
                                               ("lm-overlong-filter", "lm-clip-higher", "lm-soft-penalty",
                                                "lm-token-loss")] + [resolve({"algo": "dapo-lm"})]
    values = [tuple(getattr(c, k) for k in keys) for c in ladder]
    assert values[0] == (0.2, "seq-mean-token-mean", False, False, False)
    assert values[-1] == (0.28, "token-mean", True, True, True)
    for before, after in zip(values, values[1:]):
        assert sum(x != y for x, y in zip(before, after)) == 1  # each rung adds exactly one technique


def test_surplus_groups_survive_a_checkpoint(tmp_path):
    import torch

    from core.training.checkpoint import load_checkpoint, save_checkpoint
    from dapo_lm.group_filter import GroupFilter

    f = GroupFilter(target=1, max_rounds=1, carry=True)
    group = {"prompt": torch.tensor([1, 5, 6]), "tokens": torch.zeros(2, 3, dtype=torch.long),
             "rewards": torch.tensor([1.0, -1.0]), "logp_old": torch.full((2, 3), -0.5)}
    f.pending = [group]
    save_checkpoint(tmp_path / "c.pt", {"filter": f.state_dict()})
    g = GroupFilter(target=1, max_rounds=1, carry=True)
    g.load_state_dict(load_checkpoint(tmp_path / "c.pt")["filter"])
    assert len(g.pending) == 1 and torch.equal(g.pending[0]["rewards"], group["rewards"])
    assert torch.equal(g.pending[0]["logp_old"], group["logp_old"])
    h = GroupFilter(target=1, max_rounds=1)  # not carrying (the default): a saved surplus is discarded
    h.load_state_dict(load_checkpoint(tmp_path / "c.pt")["filter"])
    assert h.pending == []


def test_family_api_and_routing():
    import dapo_lm
    from core.run.cli import pick_family
    from core.run.registry import plugins

    assert {"train", "load"} <= set(dapo_lm.__all__) and all(hasattr(dapo_lm, n) for n in dapo_lm.__all__)
    assert pick_family(["run", "--algo", "dapo-lm"], plugins()).name == "Sequence generation"
    assert pick_family(["run", "--algo=grpo-lm"], plugins()).name == "Sequence generation"


def test_health_monitors_fire_once_per_excursion():
    from dapo_lm.config import resolve
    from dapo_lm.health import LMHealth

    h = LMHealth(resolve({}))  # collapse below 0.2x, explosion above 3x the first update's entropy; drift 50%
    assert h.check(1.0, 30.0, 0.1, 0.0, 0.0) == []
    assert h.check(0.1, 30.0, 0.1, 0.0, 0.0) == ["entropy_collapse"]
    assert h.check(0.1, 30.0, 0.1, 0.0, 0.0) == []  # still collapsed: not a new event
    assert h.check(1.0, 50.0, 0.95, 0.3, 0.0) == ["length_drift", "zero_variance_groups", "clip_low_saturated"]
    assert h.check(0.15, 30.0, 0.1, 0.0, 0.25) == ["entropy_collapse", "clip_high_saturated"]  # a second excursion
    assert h.check(3.5, 30.0, 0.1, 0.0, 0.0) == ["entropy_explosion"]


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_trainer_update_is_the_same_with_gradient_accumulation(tmp_path, aggregation):
    """One RL update on the same batch, whole minibatches vs micro-batches of 3 answers: the same weights after."""
    import copy

    import torch

    from dapo_lm.config import resolve
    from dapo_lm.trainer import LMTrainer

    cfg = resolve({"algo": "grpo-lm", "n_layer": 1, "n_head": 2, "n_embd": 16, "warm_start_steps": 0,
                   "prompts_per_batch": 4, "group_size": 4, "num_minibatches": 2, "loss_aggregation": aggregation,
                   "device": "cpu", "eval_problems": 4})
    trainer = LMTrainer(cfg, tmp_path)
    trainer._generated = []
    groups, _, _ = trainer._round()
    for g in groups:  # rewards with spread, so that every group carries a gradient
        g["rewards"] = torch.tensor([1.0, -1.0, -1.0, 1.0])
    results = []
    for micro in (None, 3):
        t = copy.deepcopy(trainer)
        t.cfg = dataclasses.replace(cfg, micro_batch_size=micro)
        torch.manual_seed(0)  # the same minibatch permutation
        t.update(groups)
        results.append(torch.cat([p.detach().flatten() for p in t.model.parameters()]))
    assert torch.allclose(results[0], results[1], atol=1e-6)


def test_python_train_picks_the_family_from_a_config_object_and_keeps_a_recipes_algo(tmp_path, monkeypatch):
    """dapo_lm.train(LMConfig()) trains sequence generation (a default config names no algorithm), and a recipe that
    says grpo-lm is not overridden by the family's default algorithm."""
    import dapo_lm
    import dapo_lm.runner
    from dapo_lm.config import LMConfig

    seen = []
    monkeypatch.setattr(dapo_lm.runner, "run_experiment", lambda cfg, resume=False: seen.append(cfg) or None)
    dapo_lm.train(LMConfig(), run_dir=str(tmp_path / "a"))
    import core
    core.train(LMConfig(task="mul"), run_dir=str(tmp_path / "b"))
    recipe = tmp_path / "r.yaml"
    recipe.write_text("algo: grpo-lm\n")
    dapo_lm.train(recipe=(str(recipe),), run_dir=str(tmp_path / "c"))
    assert [(type(c).__name__, c.algo, c.task) for c in seen] == [
        ("LMConfig", "dapo-lm", "add"), ("LMConfig", "dapo-lm", "mul"), ("LMConfig", "grpo-lm", "add")]


def test_a_checkpoint_from_another_device_type_loads(tmp_path):
    """A run trained on CUDA has a 16-byte generator state; on the CPU (dapo eval's default) it cannot be restored,
    so the trainer reseeds its sampling stream instead of refusing the checkpoint."""
    import torch

    from dapo_lm.config import resolve
    from dapo_lm.trainer import LMTrainer

    cfg = resolve({"algo": "grpo-lm", "n_layer": 1, "n_head": 2, "n_embd": 16, "warm_start_steps": 0, "device": "cpu",
                   "run_dir": str(tmp_path)})
    state = LMTrainer(cfg, tmp_path).state_dict()
    state["generator"] = torch.zeros(16, dtype=torch.uint8)  # the size of a CUDA generator's state
    loaded = LMTrainer(cfg, tmp_path, state)
    fresh = torch.Generator().manual_seed(cfg.seed)
    assert torch.equal(loaded.gen.get_state(), fresh.get_state())


def test_resume_refuses_options_this_family_does_not_have_in_one_line():
    from core.config.errors import ConfigError
    from core.run.runner import resume_config
    from dapo_lm.config import LMConfig, resolve

    saved = resolve({"run_dir": "x"})
    with pytest.raises(ConfigError, match="--eval-episodes cannot change when resuming") as e:
        resume_config(LMConfig, saved, {"eval_episodes": 5})
    assert "--total-steps" in str(e.value) and "--eval-episodes," not in str(e.value)
    assert resume_config(LMConfig, saved, {"total_steps": 99}).total_steps == 99


def test_a_run_of_the_previous_version_resumes(tmp_path, copy_task, capsys):
    """A run written before --group-filter and --carry-surplus existed (its config.yaml lacks them) resumes under
    the published rules: acc filter, surplus discarded (its saved surplus, rescored then at the next update, has no
    behaviour log-probs: dropped; with --carry-surplus it is dropped with one warning)."""
    import torch

    from core.training.checkpoint import load_checkpoint, save_checkpoint
    from dapo_lm.config import resolve
    from dapo_lm.trainer import LMTrainer

    run = tmp_path / "old"
    common = ["run", "--algo", "dapo-lm", *TINY_MODEL, *QUIET, "--warm-start-steps", "0", "--prompts-per-batch", "2",
              "--group-size", "4", "--num-minibatches", "1", "--eval-problems", "4", "--eval-samples", "0"]
    assert main([*common, "--total-steps", "8", "--run-dir", str(run)]) == 0
    config = run / "config.yaml"
    config.write_text("".join(line for line in config.read_text().splitlines(keepends=True)
                              if not line.startswith(("group_filter:", "carry_surplus:"))))
    state = load_checkpoint(run / "checkpoint.pt")
    old_group = {"prompt": torch.tensor([1, 5, 6]), "tokens": torch.full((4, 2), 5), "lengths": torch.full((4,), 2),
                 "truncated": torch.zeros(4, dtype=torch.bool), "correct": torch.tensor([True, False, False, False]),
                 "rewards": torch.tensor([1.0, -1.0, -1.0, -1.0])}
    state["filter"]["pending"] = [old_group]
    save_checkpoint(run / "checkpoint.pt", state)
    before = json.loads((run / "summary.json").read_text())["answers_generated"]
    assert main(["run", "--resume", str(run), "--total-steps", str(before + 8), *QUIET[:2]]) == 0
    assert json.loads((run / "summary.json").read_text())["answers_generated"] > before
    from dapo_lm.runner import load_run_config

    resumed = load_run_config(run)
    assert (resumed.group_filter, resumed.carry_surplus) == ("acc", False)
    cfg = resolve({"algo": "dapo-lm", "n_layer": 2, "n_head": 2, "n_embd": 32, "warm_start_steps": 0, "device": "cpu",
                   "prompts_per_batch": 2, "group_size": 4, "num_minibatches": 1, "carry_surplus": True,
                   "eval_problems": 4})
    with pytest.warns(UserWarning, match="1 carried surplus groups of an older version"):
        trainer = LMTrainer(cfg, tmp_path / "t", state)
    assert trainer.filter.pending == []
