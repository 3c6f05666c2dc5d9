"""experiments/lm_generic_benchmark.py and its parts: the reward module, the data it makes (BPE tokenizer, prompts
files, Llama config), the phase timers and the report from synthetic runs."""
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from experiments.lm_add_reward import final_answer, reward
from experiments.lm_generic_benchmark import MAX_NEW_TOKENS, OVERLONG_BUFFER, make_data
from experiments.lm_generic_report import report
from experiments.lm_phases import Phases


def test_reward_reads_the_text_after_the_last_marker():
    assert final_answer("5+7+0=12,9+0+1=10,>102") == "102"
    assert final_answer("1>2> 33 ") == "33"
    assert final_answer("102") == ""  # no marker, no answer
    assert reward(["95+7="] * 3, ["5+7+0=12,>102", ">103", ""], ["102"] * 3) == [1.0, -1.0, -1.0]


def test_made_data_round_trips_through_the_tokenizer(tmp_path):
    import numpy as np
    from transformers import AutoTokenizer

    from dapo_lm.model import model_from_config
    from dapo_lm.tasks import TASKS

    info = make_data(tmp_path, 200, 64)
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    heldout = [json.loads(line) for line in (tmp_path / "heldout.jsonl").read_text().splitlines()]
    assert len(rows) == info["train_rows"] == 200 and len({r["prompt"] for r in rows}) == 200
    assert len(heldout) == 200 and not {r["prompt"] for r in rows} & {r["prompt"] for r in heldout}
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "tokenizer"), local_files_only=True)
    assert len(tok) == info["vocab"] == 64 and tok.eos_token == "<eos>" and tok.pad_token == "<pad>"
    assert all(r["answer"] == str(sum(int(x) for x in r["prompt"][:-1].split("+"))) for r in rows)
    rng = np.random.default_rng(1)
    for p in (TASKS["add"].sample(rng) for _ in range(50)):  # worked answers, as the warm start learns them
        ids = tok(p.prompt + p.answer, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == p.prompt + p.answer  # byte-level BPE: decoding gives the text back exactly
        assert tok(p.prompt)["input_ids"] == tok(p.prompt, add_special_tokens=False)["input_ids"]  # TRL's encoding
        total = str(sum(int(x) for x in p.prompt[:-1].split("+")))
        assert reward([p.prompt], [p.answer], [total]) == [1.0]
    assert info["answer_tokens_max"] <= MAX_NEW_TOKENS - OVERLONG_BUFFER  # no correct answer is penalised
    model = model_from_config(str(tmp_path / "llama.json"), len(tok), info["prompt_tokens_max"] + MAX_NEW_TOKENS, 0)
    assert model.config.model_type == "llama" and model.get_input_embeddings().num_embeddings == len(tok)


def test_phases_count_only_outside_paused_calls():
    phases = Phases()
    work = phases.timed(lambda: time.sleep(0.01), "generation")
    maybe = phases.timed(lambda: time.sleep(0.01), "scoring", when=lambda: False)
    evaluate = phases.pausing(lambda: [work() for _ in range(3)])
    work()
    evaluate()
    maybe()
    assert 0.01 <= phases.seconds["generation"] < 0.03  # the one call outside the evaluation
    assert phases.seconds["scoring"] == 0.0 and phases.seconds["reward"] == 0.0


def test_report_from_rows(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    (runs / "data").mkdir(parents=True)
    out.mkdir()
    for algo, acc, speed in (("dapo-lm", 0.5, 30.0), ("lm-token-loss", 0.45, 20.0), ("trl-grpo-dapo-loss", 0.4, 10.0)):
        for seed in (1, 2):
            row = {"algo": algo, "seed": seed, "updates": 48, "rl_time_s": 100.0, "answers_per_s": speed,
                   "tokens_per_s": 300.0, "heldout_accuracy": acc + 0.01 * seed, "heldout_accuracy_sampled": acc,
                   "peak_rss_mb": 800.0, "process_wall_s": 150.0, "phase_generation_s": 50.0,
                   "phase_reward_s": 1.0, "phase_scoring_s": 9.0}
            (runs / f"{algo}__s{seed}.row.json").write_text(json.dumps(row))
    (runs / "dapo-lm__s3.row.json").write_text(json.dumps({"algo": "dapo-lm", "seed": 3, "failed": 1}))
    (runs / "data" / "data.json").write_text(json.dumps({"train_rows": 5000, "heldout_rows": 200, "vocab": 96,
                                                         "answer_tokens_mean": 29.0, "char_answer_mean": 32.0}))
    (runs / "data" / "warm_start.json").write_text(json.dumps({"steps": 800, "parameters": 816256,
                                                               "accuracy_greedy": 0.7, "accuracy_sampled": 0.5}))
    args = SimpleNamespace(runs_dir=runs, data=runs / "data", out=out, answers=1536, seeds=2, warm_steps=400,
                           train_rows=5000, vocab=96)
    report(args)
    md = (out / "generic.md").read_text()
    assert "`python -m experiments.lm_generic_benchmark --answers 1536 --seeds 2 --warm-steps 400`" in md
    assert "| dapo-lm | 2 | 0.510, 0.520 | 0.515 +- 0.007 |" in md
    assert "0.82M parameters). Warm start: 800 supervised steps on worked answers (seed 0, in stages of 400), " \
           "greedy held-out accuracy 0.700, sampled 0.500;" in md
    assert "dapo-lm vs TRL: answers/s ratio 3.00x (of the means; per seed, the runs of one seed back to back: " \
           "3.00x, 3.00x); held-out accuracy difference +0.100 [+0.090, +0.110] *." in md  # 2 seeds a side: +-0.005
    assert "| TRL GRPOTrainer, loss_type=dapo | 100.0 | 50.0 s (50%) | 1.0 s (1%) | 9.0 s (9%) | 40.0 s (40%) |" in md
    assert len((out / "generic.csv").read_text().splitlines()) == 7  # the failed run is left out


@pytest.mark.slow
def test_phase_timers_see_every_phase_of_a_dapo_run(tmp_path):
    """The wrapper reaches the functions a run calls (a rename in dapo_lm would leave a phase at 0 s), and the run
    scores no pi_old pass of its own."""
    import subprocess
    import sys

    out = tmp_path / "phases.json"
    cmd = [sys.executable, "-m", "experiments.lm_phases", str(out), "run", "--algo", "grpo-lm", "--task", "add",
           "--warm-start-steps", "0", "--total-steps", "16", "--prompts-per-batch", "2", "--group-size", "4",
           "--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--eval-problems", "2", "--eval-samples", "0",
           "--device", "cpu", "--no-progress", "--no-tensorboard", "--run-dir", str(tmp_path / "run")]
    subprocess.run(cmd, check=True, capture_output=True, cwd=str(Path(__file__).resolve().parents[1]))
    seconds = json.loads(out.read_text())
    assert set(seconds) == {"generation", "reward", "scoring"} and seconds["generation"] > 0 and seconds["reward"] > 0
    assert seconds["scoring"] == 0  # the sampler keeps pi_old: no scoring pass
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert sum(seconds.values()) < summary["rl_time_s"]  # evaluation is not counted: the phases fit in the RL clock
