"""LoRA through peft (dapo_lm/lora.py): only the adapters train, the base weights stay as they were, the wrapped
model starts equal to the base one, a run resumes exactly, and without peft the option is one line."""
import sys

import pytest
import torch

from core.config.errors import ConfigError
from core.run.cli import main

pytest.importorskip("peft")

TINY = ["--n-layer", "2", "--n-head", "2", "--n-embd", "32", "--no-progress", "--no-tensorboard", "--device", "cpu"]
RUN = ["run", "--algo", "dapo-lm", *TINY, "--lora-rank", "4", "--warm-start-steps", "4", "--warm-start-batch", "8",
       "--prompts-per-batch", "4", "--group-size", "4", "--num-minibatches", "2", "--eval-problems", "8",
       "--eval-samples", "0", "--lr", "1e-3"]


def _base_and_adapters(state: dict) -> tuple[dict, dict]:
    base = {k: v for k, v in state.items() if "lora_" not in k}
    return base, {k: v for k, v in state.items() if "lora_" in k}


def test_wrapped_model_starts_as_the_base_and_trains_only_adapters():
    from dapo_lm.lora import trainable, with_lora
    from dapo_lm.model import build_model

    base = build_model(23, 2, 2, 32, 40, seed=0)
    ids = torch.tensor([[1, 5, 6, 7]])
    before = base(input_ids=ids).logits.detach().clone()
    frozen = {k: v.clone() for k, v in base.state_dict().items()}
    model = with_lora(base, rank=4, seed=0)
    assert torch.equal(model(input_ids=ids).logits, before)  # B = 0: no change until the first step
    params = trainable(model)
    assert params and all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)
    assert sum(p.numel() for p in params) < sum(p.numel() for p in model.parameters()) / 5
    opt = torch.optim.AdamW(params, lr=1e-2)
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    assert not torch.equal(model(input_ids=ids).logits, before)
    inner = model.get_base_model().state_dict()
    for k, v in frozen.items():  # peft renames the wrapped projections' weights base_layer.*
        key = k if k in inner else k.replace(".weight", ".base_layer.weight").replace(".bias", ".base_layer.bias")
        assert torch.equal(inner[key], v), k


def test_adapters_are_drawn_from_the_seed():
    from dapo_lm.lora import with_lora
    from dapo_lm.model import build_model

    a, b, c = (with_lora(build_model(23, 2, 2, 32, 40, seed=0), 4, seed) for seed in (1, 1, 2))
    sa, sb, sc = (_base_and_adapters(m.state_dict())[1] for m in (a, b, c))
    assert all(torch.equal(sa[k], sb[k]) for k in sa) and any(not torch.equal(sa[k], sc[k]) for k in sa)


@pytest.mark.slow
def test_lora_run_freezes_the_base_and_resumes_exactly(tmp_path):
    assert main([*RUN, "--total-steps", "64", "--run-dir", str(tmp_path / "full")]) == 0
    assert main([*RUN, "--total-steps", "32", "--run-dir", str(tmp_path / "half")]) == 0
    assert main(["run", "--resume", str(tmp_path / "half"), "--total-steps", "64", *TINY[-4:-2]]) == 0
    full = torch.load(tmp_path / "full" / "checkpoint.pt", weights_only=True)["model"]
    resumed = torch.load(tmp_path / "half" / "checkpoint.pt", weights_only=True)["model"]
    assert full.keys() == resumed.keys() and all(torch.equal(full[k], resumed[k]) for k in full)
    from dapo_lm.runner import load_run_config
    from dapo_lm.setup import prepare

    initial = prepare(load_run_config(tmp_path / "full"), dry_run=False).model.state_dict()  # as the run began
    base, adapters = _base_and_adapters(full)
    assert adapters and any(v.abs().sum() > 0 for k, v in adapters.items() if "lora_B" in k)  # B has moved from 0
    assert base.keys() == _base_and_adapters(initial)[0].keys()
    assert all(torch.equal(base[k], initial[k]) for k in base)  # the warm start and RL moved the adapters only


def test_without_peft_the_option_is_one_line(monkeypatch):
    from dapo_lm.lora import with_lora
    from dapo_lm.model import build_model

    monkeypatch.setitem(sys.modules, "peft", None)  # import peft raises ImportError
    with pytest.raises(ConfigError, match=r"--lora-rank needs peft.*pip install"):
        with_lora(build_model(23, 2, 2, 32, 40, seed=0), 4, 0)


def test_rank_below_one_is_refused(tmp_path, capsys):
    assert main([*RUN, "--lora-rank", "0", "--total-steps", "32", "--run-dir", str(tmp_path / "r")]) == 2
    assert "--lora-rank must be at least 1" in capsys.readouterr().err and not (tmp_path / "r").exists()
