"""grpo-lm / dapo-lm bad inputs: one line on stderr, exit 2, nothing created (the pattern of test_bad_inputs.py);
--help lists the family's options grouped, on one screen or two."""
import os
from pathlib import Path

import pytest

from core.run.cli import main

REPO = Path(__file__).resolve().parents[1]
LM = ["run", "--algo", "dapo-lm"]
# if a refusal regressed, the run it let through would be short
SMALL = ["--warm-start-steps", "0", "--total-steps", "1", "--prompts-per-batch", "1", "--group-size", "2",
         "--num-minibatches", "1", "--eval-problems", "1", "--eval-samples", "0", "--no-progress", "--no-tensorboard"]
CASES = [
    (["run", "--algo", "dapo-lmm"], "did you mean 'dapo-lm'"),
    ([*LM, "--task", "division"], "invalid choice: 'division'"),
    ([*LM, "--group-size", "1"], "--group-size must be >= 2"),
    ([*LM, "--lr", "inf"], "--lr must be a finite number"),
    ([*LM, "--lr=-1e-4"], "--lr must be positive"),
    ([*LM, "--clip-eps-low", "1.5"], "--clip-eps-low must be < 1"),
    ([*LM, "--clip-eps-high", "nan"], "--clip-eps-high must be a finite number"),
    ([*LM, "--total-steps", "0"], "--total-steps must be in 1 .."),
    ([*LM, "--seed", str(2**40)], "--seed must be in 0 .."),
    ([*LM, "--max-new-tokens", "100000"], "beyond the sane limit"),
    ([*LM, "--overlong-buffer", "99"], "must not exceed --max-new-tokens"),
    ([*LM, "--n-embd", "100", "--n-head", "3"], "must be a multiple of --n-head"),
    ([*LM, "--num-minibatches", "1000"], "exceeds the 128 answers of a batch"),
    ([*LM, "--loss-aggregation", "sum"], "invalid choice: 'sum'"),
    ([*LM, "--device", "cuda"], "CUDA is not available"),
    ([*LM, "--model-dir", "/nonexistent/model"], "holds no config.json"),
    (["run", "--algo", "grpo-lm", "--overlong-buffer", "4"], "needs --soft-overlong-penalty"),
    (["run", "--algo", "grpo-lm", "--max-gen-rounds", "5"], "needs --dynamic-sampling"),
    (["run", "--algo", "grpo-lm", "--group-filter", "std"], "needs --dynamic-sampling"),
    (["run", "--algo", "grpo-lm", "--carry-surplus"], "needs --dynamic-sampling"),
    ([*LM, "--group-filter", "spread"], "invalid choice: 'spread'"),
    ([*LM, "--warm-start-steps", "0", "--warm-start-lr", "1e-3"], "needs --warm-start-steps above 0"),
    ([*LM, "--recipe", "lm-nope"], "unknown recipe 'lm-nope'"),
    ([*LM, "--entropy-collapse", "2"], "--entropy-collapse must be < 1"),
    ([*LM, "--zero-variance-alert", "0"], "--zero-variance-alert must be in (0, 1]"),
    (["eval", "/nonexistent/run"], "not a run directory"),
    # 0 is a value, not "unset": refused, never replaced by the task's default (a run that started would be small)
    ([*LM, "--max-new-tokens", "0", *SMALL], "--max-new-tokens must be >= 1, got 0"),
    ([*LM, "--overlong-buffer", "0", *SMALL], "--overlong-buffer must be >= 1, got 0"),
    ([*LM, "--max-new-tokens", "0", "--overlong-buffer", "0", *SMALL], "must be >= 1, got 0"),
]


@pytest.mark.parametrize("argv,expect", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_lm_input_gives_one_line_and_creates_nothing(tmp_path, monkeypatch, capsys, argv, expect):
    one_line_and_nothing_created(tmp_path, monkeypatch, capsys, argv, expect)


def one_line_and_nothing_created(tmp_path, monkeypatch, capsys, argv, expect):
    monkeypatch.chdir(tmp_path)
    repo_before = sorted(os.listdir(REPO))
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2, (code, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert expect in err, err
    assert list(tmp_path.iterdir()) == [], f"created: {list(tmp_path.iterdir())}"
    assert sorted(os.listdir(REPO)) == repo_before


def test_help_lists_the_lm_options_grouped(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--algo", "dapo-lm", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and len(out.splitlines()) <= 150
    for group in ("experiment:", "model:", "warm start:", "rollout:", "optimisation:", "objective:", "health:",
                  "runtime:"):
        assert f"\n{group}" in out, group
    for option in ("--task", "--clip-eps-high", "--loss-aggregation", "--[no-]dynamic-sampling",
                   "--[no-]filter-truncated", "--[no-]soft-overlong-penalty", "--group-size", "--model-dir"):
        assert option in out, option


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    """Broken --model-dir directories, each a copy of a tiny GPT-2 written by save_pretrained."""
    import shutil

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    root = tmp_path_factory.mktemp("models")
    config = GPT2Config(vocab_size=32, n_positions=128, n_embd=16, n_layer=1, n_head=2, bos_token_id=1,
                        eos_token_id=2, pad_token_id=0)
    GPT2LMHeadModel(config).save_pretrained(root / "good")
    for name in ("truncated", "garbage", "mismatch", "nan", "pickled"):
        shutil.copytree(root / "good", root / name)
    weights = (root / "good" / "model.safetensors").read_bytes()
    (root / "truncated" / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    (root / "garbage" / "model.safetensors").write_bytes(bytes(range(256)) * 20)
    (root / "mismatch" / "config.json").write_text((root / "good" / "config.json").read_text()
                                                   .replace('"n_embd": 16', '"n_embd": 32'))
    nan = GPT2LMHeadModel(config)
    with torch.no_grad():
        for p in nan.parameters():
            p.fill_(float("nan"))
    nan.save_pretrained(root / "nan")
    (root / "pickled" / "model.safetensors").unlink()
    torch.save({"x": Pickled()}, root / "pickled" / "pytorch_model.bin")  # not a plain state dict: code on load
    return root


class Pickled:
    def __reduce__(self):
        return (print, ("unpickled code ran",))


MODEL_DIR_CASES = [("truncated", "not a loadable causal LM"), ("garbage", "not a loadable causal LM"),
                   ("mismatch", "not a loadable causal LM"), ("nan", "non-finite weights"),
                   ("pickled", "not a loadable causal LM")]


@pytest.mark.parametrize("name,expect", MODEL_DIR_CASES, ids=[c[0] for c in MODEL_DIR_CASES])
def test_a_broken_model_dir_gives_one_line_and_creates_nothing(tmp_path, monkeypatch, capsys, model_dirs, name,
                                                                 expect):
    """Every way loading can fail is one ConfigError line (dapo_lm.model.load_model_dir), before the run directory
    exists; transformers' loading bar and warnings stay off stderr."""
    argv = [*LM, "--model-dir", str(model_dirs / name), *SMALL]
    one_line_and_nothing_created(tmp_path, monkeypatch, capsys, argv, expect)
    assert "unpickled code ran" not in capsys.readouterr().out


def test_a_good_model_dir_loads_quietly(model_dirs, capfd):
    from dapo_lm.model import load_model_dir

    model = load_model_dir(str(model_dirs / "good"), 23, 80)
    assert model.config.vocab_size == 32 and not model.training
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == "", captured
