"""Bad inputs of the generic sequence-generation path, each one line on stderr, exit 2 and nothing written (the
pattern of test_lm_bad_inputs.py); a reward that fails in the middle of a run stops it with a checkpoint and its
error in one line, and the run resumes exactly once the reward is fixed."""
import csv
import json

import pytest

import lm_generic_data as data
from core.run.cli import main
from test_lm_bad_inputs import one_line_and_nothing_created

QUIET = ["--no-progress", "--no-tensorboard", "--device", "cpu"]
BUILTIN = ["--prompts-per-batch", "2", "--group-size", "4", "--num-minibatches", "1", "--eval-problems", "4",
           "--eval-samples", "0", *QUIET]  # a built-in task's own response limit
SMALL = ["--max-new-tokens", "6", *BUILTIN]
MOD = data.REWARD_MODULE


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("generic_bad")
    tok = data.make_tokenizer(root / "tok")
    data.make_tokenizer(root / "big_tok", vocab_size=80)  # more ids than the GPT-2's 48-row embeddings
    data.make_gpt2_dir(root / "gpt", len(tok), root / "tok")
    data.make_gpt2_dir(root / "gpt_no_tok", len(tok))
    data.write_prompts(root / "prompts.jsonl")
    (root / "no_column.jsonl").write_text(json.dumps({"question": "1=", "target": "1"}) + "\n")
    (root / "reserved.jsonl").write_text(json.dumps({"prompt": "1=", "completions": "1"}) + "\n")
    (root / "broken.jsonl").write_text('{"prompt": "1="}\n{"prompt": \n')
    (root / "words.jsonl").write_text("".join(json.dumps({"prompt": f"What is {n}?", "target": str(n)}) + "\n"
                                              for n in range(40)))
    (root / "tiny.jsonl").write_text(json.dumps({"prompt": "1=", "target": "1"}) + "\n")
    data.write_reward_module(root)
    data.write_llama_config(root / "llama_short.json", len(tok), positions=8)
    return root


def cases(root):
    gpt, prompts = ["--model-dir", str(root / "gpt")], ["--prompts", str(root / "prompts.jsonl")]
    run = ["run", "--algo", "dapo-lm"]
    good = [*run, *gpt, *prompts, "--reward", f"{MOD}:has_digit", *SMALL]
    return [
        ([*run, *gpt, "--prompts", str(root / "no_column.jsonl"), "--reward", f"{MOD}:has_digit", *SMALL],
         "has no column 'prompt' (its columns: question, target)"),
        ([*good, "--prompt-column", "question"], "has no column 'question'"),
        ([*run, *gpt, "--prompts", str(root / "reserved.jsonl"), "--reward", f"{MOD}:short", *SMALL],
         "a name the reward call keeps for itself"),
        ([*run, *gpt, "--prompts", str(root / "broken.jsonl"), "--reward", f"{MOD}:has_digit", *SMALL],
         "line 2 is not JSON"),
        ([*run, *gpt, "--prompts", str(root / "tiny.jsonl"), "--reward", f"{MOD}:has_digit", *SMALL],
         "falls in the held-out share"),
        ([*run, *gpt, "--prompts", str(root / "nope.jsonl"), "--reward", f"{MOD}:has_digit", *SMALL],
         "no such file or directory"),
        ([*run, *gpt, *prompts, *SMALL], "--prompts needs --reward"),
        ([*run, *gpt, *prompts, "--reward", "no_such_module_xyz:f", *SMALL], "cannot import 'no_such_module_xyz'"),
        ([*run, *gpt, *prompts, "--reward", f"{MOD}:nope", *SMALL], "has no function 'nope'"),
        ([*run, *gpt, *prompts, "--reward", f"{MOD}:has_digit=x", *SMALL], "the weight 'x' is not a number"),
        ([*run, *gpt, *prompts, "--reward", f"{MOD}:wrong_length", *SMALL], "returned 1 values for 4 completions"),
        ([*run, *gpt, *prompts, "--reward", f"{MOD}:not_finite", *SMALL], "returned a non-finite value (nan)"),
        ([*good, "--correct-reward", "short"], "names none of the rewards"),
        ([*good, "--tokenizer-dir", str(root / "big_tok")], "the tokenizer does not match the model"),
        ([*good, "--chat-template"], "has no chat template"),
        ([*run, "--model-dir", str(root / "gpt_no_tok"), "--prompts", str(root / "words.jsonl"), "--reward",
          f"{MOD}:has_digit", *SMALL], "the character tokenizer (23 ids) cannot encode"),
        ([*run, "--task", "add", "--chat-template", *BUILTIN], "the character tokenizer has no chat template"),
        ([*run, "--model-config", str(root / "llama_short.json"), "--tokenizer-dir", str(root / "tok"), *prompts,
          "--reward", f"{MOD}:has_digit", *SMALL], "positions; this run needs"),
        ([*run, "--model-config", str(root / "nope.json"), *BUILTIN], "no such config.json"),
        ([*good, "--task", "mul"], "--prompts replace the built-in task"),
        ([*good, "--warm-start-steps", "10"], "--warm-start-steps needs a built-in --task"),
        ([*good, "--model-config", str(root / "llama_short.json")], "give one"),
        ([*run, "--eval-prompts", str(root / "prompts.jsonl"), *BUILTIN], "--eval-prompts has no effect"),
        ([*run, "--correct-threshold", "0.5", *BUILTIN], "it needs --reward"),
        ([*good, "--heldout-share", "1.5"], "--heldout-share must be in (0, 1)"),
    ]


CASE_IDS = [c[1][:40] for c in cases(__import__("pathlib").Path("/x"))]


@pytest.mark.parametrize("index", range(len(CASE_IDS)), ids=CASE_IDS)
def test_bad_generic_input_gives_one_line_and_creates_nothing(tmp_path, monkeypatch, capsys, made, index):
    monkeypatch.syspath_prepend(str(made))
    argv, expect = cases(made)[index]
    one_line_and_nothing_created(tmp_path, monkeypatch, capsys, argv, expect)


def test_a_reward_module_that_fails_to_import_is_one_line(tmp_path, monkeypatch, capsys, made):
    import sys

    monkeypatch.syspath_prepend(str(made))
    monkeypatch.setenv("LM_REWARD_IMPORT_FAILS", "1")
    monkeypatch.delitem(sys.modules, MOD, raising=False)
    argv = ["run", "--algo", "dapo-lm", "--model-dir", str(made / "gpt"), "--prompts", str(made / "prompts.jsonl"),
            "--reward", f"{MOD}:has_digit", *SMALL]
    one_line_and_nothing_created(tmp_path, monkeypatch, capsys, argv, "importing 'lm_test_reward' failed: ImportError")
    monkeypatch.delitem(sys.modules, MOD, raising=False)  # the next test imports the working module again


def test_a_recipe_naming_a_reward_must_be_trusted(tmp_path, monkeypatch, capsys, made):
    monkeypatch.syspath_prepend(str(made))
    recipe = made / "with_reward.yaml"
    recipe.write_text(f"reward: [{MOD}:has_digit]\nprompts: {made / 'prompts.jsonl'}\n")
    argv = ["run", "--algo", "dapo-lm", "--model-dir", str(made / "gpt"), "--recipe", str(recipe), *SMALL]
    one_line_and_nothing_created(tmp_path, monkeypatch, capsys, argv, "pass --trust-env")


def _rows(run_dir):
    with open(run_dir / "metrics.csv") as f:
        return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in csv.DictReader(f)]


@pytest.mark.parametrize("where", ["generation", "evaluation"])
def test_a_reward_that_raises_mid_run_stops_with_a_checkpoint_and_resumes_exactly(tmp_path, monkeypatch, capsys,
                                                                                   made, where):
    """In generation: the checkpoint is the state before the failing iteration, and the run resumed with the reward
    fixed equals one never stopped.  In an evaluation (the first, at step 0): the iteration ends without it."""
    monkeypatch.syspath_prepend(str(made))
    boom = tmp_path / "boom"
    monkeypatch.setenv("LM_REWARD_BOOM", str(boom))
    common = ["run", "--algo", "grpo-lm", "--model-dir", str(made / "gpt"), "--prompts", str(made / "prompts.jsonl"),
              "--reward", f"{MOD}:has_digit", *SMALL]  # no group filter: 8 answers an iteration
    run = tmp_path / "run"
    if where == "generation":
        assert main([*common, "--total-steps", "24", "--run-dir", str(tmp_path / "full")]) == 0
        assert main([*common, "--total-steps", "8", "--run-dir", str(run)]) == 0
        before = json.loads((run / "summary.json").read_text())["answers_generated"]
        assert before == 8
    else:
        before = 0
    boom.write_text("")
    capsys.readouterr()
    argv = (["run", "--resume", str(run), "--total-steps", "24", "--trust-env", *QUIET[:2]] if where == "generation"
            else [*common, "--total-steps", "24", "--run-dir", str(run)])
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "the verifier service is down" in err[0] and f"stopped at {before} answers with a checkpoint" in err[0]
    assert (run / "checkpoint.pt").is_file()
    boom.unlink()
    assert main(["run", "--resume", str(run), "--total-steps", "24", "--trust-env", *QUIET[:2]]) == 0
    assert json.loads((run / "summary.json").read_text())["answers_generated"] >= 24
    if where == "generation":
        assert _rows(run) == _rows(tmp_path / "full")
