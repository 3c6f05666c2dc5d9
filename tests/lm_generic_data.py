"""Made-in-the-test material for the generic sequence-generation path (tests/test_lm_generic*.py): a BPE tokenizer
trained in-process with ``tokenizers``, tiny GPT-2 and Llama-style models, a prompts file and a reward module.
Nothing is downloaded."""
import json
from pathlib import Path

REWARD_MODULE = "lm_test_reward"
REWARD_SOURCE = '''
import os
from pathlib import Path


def has_digit(prompts, completions, target, **kwargs):
    """1 when the completion shares a digit with the target (a random model gets it sometimes: groups mixed)."""
    boom = os.environ.get("LM_REWARD_BOOM")
    if boom and Path(boom).exists() and set(completions) - {"", "0"}:  # not on the dry call: in the middle of a run
        raise RuntimeError("the verifier service is down")
    return [1.0 if any(ch in c for ch in t) else 0.0 for c, t in zip(completions, target)]


def short(completions):
    """Named arguments only: gets the completions and nothing else."""
    return [-len(c) / 10 for c in completions]


def wrong_length(prompts, completions, **kwargs):
    return [0.0]


def not_finite(prompts, completions, **kwargs):
    return [float("nan")] * len(completions)


raise_on_import = os.environ.get("LM_REWARD_IMPORT_FAILS")
if raise_on_import:
    raise ImportError("this module needs a package that is not installed")
'''
CHAT_TEMPLATE = ("{% for m in messages %}Q:{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}A:"
                 "{% endif %}")


def corpus(n: int = 400) -> list[str]:
    import random

    rng = random.Random(0)
    return [f"Q:{a}={a} A:{a}" for a in (rng.randint(0, 999) for _ in range(n))]


def make_tokenizer(path: Path, chat: bool = False, vocab_size: int = 48):
    """A BPE tokenizer trained here on digit strings, saved as a transformers tokenizer directory."""
    from tokenizers import Tokenizer, decoders, models, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.decoder = decoders.Fuse()
    tok.train_from_iterator(corpus(), trainers.BpeTrainer(vocab_size=vocab_size,
                                                          special_tokens=["<pad>", "<eos>", "<unk>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    return fast


def make_gpt2_dir(path: Path, vocab_size: int, tokenizer_from: Path = None):
    """A tiny GPT-2 written by save_pretrained, with the tokenizer of ``tokenizer_from`` beside it."""
    import shutil

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=vocab_size, n_positions=64, n_embd=32, n_layer=2, n_head=2)
    GPT2LMHeadModel(config).save_pretrained(path)
    if tokenizer_from is not None:
        for f in Path(tokenizer_from).iterdir():
            shutil.copy(f, path / f.name)
    return path


def write_llama_config(path: Path, vocab_size: int, positions: int = 64) -> Path:
    path.write_text(json.dumps({"model_type": "llama", "vocab_size": vocab_size, "hidden_size": 32,
                                "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                                "num_key_value_heads": 1, "max_position_embeddings": positions,
                                "tie_word_embeddings": True}))
    return path


def write_prompts(path: Path, numbers=range(0, 200, 3)) -> Path:
    path.write_text("".join(json.dumps({"prompt": f"{n}=", "target": str(n)}) + "\n" for n in numbers))
    return path


def write_reward_module(folder: Path) -> str:
    (folder / f"{REWARD_MODULE}.py").write_text(REWARD_SOURCE)
    return REWARD_MODULE
