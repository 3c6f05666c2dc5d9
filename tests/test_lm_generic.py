"""Your own model, tokenizer, prompts and reward (issue #56, items 1-3): a BPE tokenizer trained here, tiny GPT-2 and
Llama-style models, prompts from a JSONL file, a module:function reward; the CLI and the Python API train,
checkpoint, resume exactly and evaluate; the built-in tasks go through the same prompt-source + reward path."""
import csv
import json

import numpy as np
import pytest

import lm_generic_data as data
from core.run.cli import main

QUIET = ["--no-progress", "--no-tensorboard", "--device", "cpu"]
SMALL = ["--max-new-tokens", "8", "--prompts-per-batch", "2", "--group-size", "4", "--num-minibatches", "2",
         "--eval-problems", "6", "--eval-samples", "2", "--lr", "1e-3"]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Tokenizer (with a chat template), a GPT-2 directory holding it, a Llama config, prompts, a reward module."""
    root = tmp_path_factory.mktemp("generic")
    tok = data.make_tokenizer(root / "tok", chat=True)
    data.make_gpt2_dir(root / "gpt", len(tok), root / "tok")
    data.write_llama_config(root / "llama.json", len(tok))
    data.write_prompts(root / "prompts.jsonl")
    data.write_reward_module(root)
    return root


@pytest.fixture
def reward_path(made, monkeypatch):
    monkeypatch.syspath_prepend(str(made))
    return f"{data.REWARD_MODULE}:has_digit"


def _rows(run_dir):
    with open(run_dir / "metrics.csv") as f:
        return [{k: v for k, v in r.items() if not k.startswith(("time/", "warm/sps"))} for r in csv.DictReader(f)]


def test_cli_trains_checkpoints_resumes_exactly_and_evaluates(tmp_path, made, reward_path, capsys):
    """--model-dir with its own tokenizer, --prompts JSONL, two weighted rewards: a run stopped at half its budget
    and resumed equals an uninterrupted one row for row; dapo eval needs --trust-env for the saved reward."""
    common = ["run", "--algo", "dapo-lm", "--model-dir", str(made / "gpt"), "--prompts", str(made / "prompts.jsonl"),
              "--reward", reward_path, f"{data.REWARD_MODULE}:short=0.1", *SMALL, *QUIET]
    assert main([*common, "--total-steps", "32", "--run-dir", str(tmp_path / "full")]) == 0
    assert main([*common, "--total-steps", "16", "--run-dir", str(tmp_path / "half")]) == 0
    assert main(["run", "--resume", str(tmp_path / "half"), "--total-steps", "32", "--trust-env", *QUIET[:2]]) == 0
    full, resumed = _rows(tmp_path / "full"), _rows(tmp_path / "half")
    assert len(full) == len(resumed) >= 3 and full == resumed
    s = json.loads((tmp_path / "full" / "summary.json").read_text())
    assert s["task"] == "prompts" and s["optimizer_steps"] > 0 and s["answers_generated"] >= 32
    assert s["heldout_problems"] == 6 and 0 <= s["heldout_accuracy"] <= 1
    assert s["heldout_accuracy"] == json.loads((tmp_path / "half" / "summary.json").read_text())["heldout_accuracy"]
    rewards = [float(r["rollout/reward_mean"]) for r in full[1:]]
    assert all(np.isfinite(rewards)) and any(r != int(r) for r in rewards)  # the 0.1-weighted length term is in
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "full")]) == 2  # the saved reward imports code: confirm it
    assert "names reward 'lm_test_reward:has_digit'" in capsys.readouterr().err
    assert main(["eval", str(tmp_path / "full"), "--trust-env"]) == 0
    assert capsys.readouterr().out.startswith("heldout_accuracy ")


def test_python_api_with_a_fresh_llama_prompts_as_dicts_and_a_callable_reward(tmp_path, made):
    """dapo_lm.train(model=config.json, tokenizer=dir, prompts=list of dicts, reward=callable); load and resume with
    the same objects; the chat template shapes the prompts."""
    import dapo_lm

    rows = [{"prompt": f"{n}=", "target": str(n)} for n in range(40)]
    heldout = [{"prompt": f"{n}=", "target": str(n)} for n in range(500, 505)]
    seen = []

    def reward(prompts, completions, target, truncated):
        seen.append((prompts[0], target[0], len(truncated)))
        return [1.0 if c[:1] == t[:1] else 0.0 for c, t in zip(completions, target)]

    options = dict(model=str(made / "llama.json"), tokenizer=str(made / "tok"), prompts=rows, eval_prompts=heldout,
                   reward=reward, chat_template=True, algo="grpo-lm", max_new_tokens=6, prompts_per_batch=2,
                   group_size=4, num_minibatches=1, eval_problems=5, eval_samples=0, progress=False,
                   tensorboard=False, device="cpu")
    r = dapo_lm.train(total_steps=8, run_dir=str(tmp_path / "r"), **options)
    assert r.config.model_config and r.config.prompts.startswith("dapo-local/prompts-")
    assert r.config.reward[0].startswith("dapo-local/") and r.summary["optimizer_steps"] == 1
    assert seen and all(p.endswith("=") and p[:-1] == t for p, t, _ in seen)
    agent = dapo_lm.load(r.run_dir, reward=reward, prompts=rows)
    assert agent.model.config.model_type == "llama" and agent.task is None
    prompt_ids = agent.tokenizer.encode_prompt("12=")
    assert agent.tokenizer.tok.decode(prompt_ids) == "Q:12=A:"  # the chat template, with the generation prompt
    assert len(agent.evaluate().returns) == 5 and isinstance(agent.answer("7="), str)
    from dapo_lm.rewards import LOCAL_REWARDS

    LOCAL_REWARDS.clear()  # as in a new process: the function given again (redefined) takes the run's name
    again = dapo_lm.train(resume=r.run_dir, total_steps=16, reward=lambda **kw: reward(**kw), prompts=rows,
                          eval_prompts=heldout)
    assert again.summary["answers_generated"] == 16
    from core.config.errors import ConfigError

    with pytest.raises(ConfigError, match="prompts cannot change when resuming"):
        dapo_lm.train(resume=r.run_dir, total_steps=24, reward=reward, prompts=rows[:-1])


def test_a_builtin_task_is_a_prompt_source_and_a_reward(tmp_path):
    """The built-in tasks go through the same path: TaskPrompts + the verifier as a +1/-1 reward, correct at >= 1."""
    from dapo_lm.config import resolve
    from dapo_lm.rewards import Reward
    from dapo_lm.setup import prepare
    from dapo_lm.tasks import TASKS

    s = prepare(resolve({"task": "add", "device": "cpu", "n_layer": 1, "n_head": 2, "n_embd": 16}))
    assert s.source.name == "add" and s.task is TASKS["add"]
    rewards, correct = s.reward.score(["12+3=", "12+3=", "12+3="], ["2+3+0=5,1+0+0=1,>15", ">16", ">15"],
                                      [False, False, True])
    assert rewards.tolist() == [1.0, -1.0, -1.0] and correct.tolist() == [True, False, False]  # truncated: never
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    assert s.source.draw(rng_a, 5) == [TASKS["add"].sample(rng_b) for _ in range(5)]  # the draws of before
    assert isinstance(Reward.of_task(TASKS["countdown"]), Reward)


def test_prompt_files_split_by_a_stable_hash_and_draw_resumable_passes(tmp_path):
    from dapo_lm.prompts import file_prompts, heldout_by_hash

    path = data.write_prompts(tmp_path / "p.jsonl", range(300))
    with open(tmp_path / "p.csv", "w", newline="") as f:
        w = csv.DictWriter(f, ["prompt", "target"])
        w.writeheader()
        w.writerows({"prompt": f"{n}=", "target": str(n)} for n in reversed(range(300)))
    a = file_prompts(str(path), "prompt", None, 0.1, seed=1)
    b = file_prompts(str(tmp_path / "p.csv"), "prompt", None, 0.1, seed=1)
    assert {p.prompt for p in a.heldout} == {p.prompt for p in b.heldout}  # the order of the file does not matter
    assert 10 <= len(a.heldout) <= 50 and not {p.prompt for p in a.heldout} & {p.prompt for p in a.train}
    assert all(heldout_by_hash(p.prompt, 0.1) for p in a.heldout)
    assert a.heldout[0].columns == {"target": a.heldout[0].prompt[:-1]}
    first = [p.prompt for p in a.draw(None, len(a.train))]
    assert sorted(first) == sorted(p.prompt for p in a.train)  # one pass: every training row once
    state = a.state_dict()
    later = [p.prompt for p in a.draw(None, 7)]
    c = file_prompts(str(path), "prompt", None, 0.1, seed=1)
    c.load_state_dict(state)
    assert [p.prompt for p in c.draw(None, 7)] == later and later != first[:7]


def test_parquet_and_saved_datasets_are_read(tmp_path):
    from dapo_lm.prompts import read_rows

    rows = [{"prompt": "1=", "target": "1"}, {"prompt": "2=", "target": "2"}]
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "p.parquet")
    assert read_rows(str(tmp_path / "p.parquet"), "--prompts") == rows
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "ds"))
    assert read_rows(str(tmp_path / "ds"), "--prompts") == rows


def test_rewards_take_weights_named_arguments_and_columns(made, reward_path):
    from dapo_lm.rewards import Reward, split_spec

    assert split_spec("m:f=0.5") == ("m:f", 0.5) and split_spec("dir/x.py:f") == ("dir/x.py:f", 1.0)
    r = Reward.load([f"{data.REWARD_MODULE}:short=-2", reward_path], correct="has_digit", threshold=1.0)
    total, correct = r.score(["12=", "12="], ["12", "xyz"], [False, False], {"target": ["12", "12"]})
    assert total.tolist() == pytest.approx([1.0 + 0.4, 0.0 + 0.6]) and correct.tolist() == [True, False]
    file_reward = Reward.load([f"{made / (data.REWARD_MODULE + '.py')}:short"])
    assert file_reward.score(["a"], ["abcd"], [False])[0].tolist() == pytest.approx([-0.4])


def test_the_character_tokenizer_decodes_ids_beyond_its_vocabulary_as_wrong_text():
    """A --model-dir with a larger vocabulary can sample ids the character tokenizer lacks: never a crash, and never
    a verified answer."""
    from dapo_lm.tasks import TASKS
    from dapo_lm.tokenizer import CharTokenizer

    tok = CharTokenizer()
    text = tok.decode([*tok.encode(">15"), tok.vocab_size + 3])
    assert text == ">15\ufffd" and not TASKS["add"].verify("12+3=", text)


def test_lm_health_events_carry_the_detail_the_console_prints(tmp_path, monkeypatch):
    from core.algo.health import event_lines
    from dapo_lm.config import resolve
    from dapo_lm.trainer import LMTrainer

    cfg = resolve({"algo": "grpo-lm", "n_layer": 1, "n_head": 2, "n_embd": 16, "warm_start_steps": 0,
                   "prompts_per_batch": 1, "group_size": 2, "num_minibatches": 1, "eval_problems": 2,
                   "eval_samples": 0, "device": "cpu"})
    trainer = LMTrainer(cfg, tmp_path)
    monkeypatch.setattr(trainer.health, "check", lambda *stats: ["length_drift"])
    trainer.rl_iterate()
    assert "length_drift at step 2 (mean answer length" in event_lines(trainer.health_events)[0]
