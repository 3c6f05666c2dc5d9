"""Your tokenizer: a ``transformers`` tokenizer read from a local directory, behind the character tokenizer's
interface (``encode_prompt``, ``decode``, ``pad_id``, ``eos_id``, ``vocab_size``), so that rollouts, losses and
evaluation do not care which one a run uses.

Which tokenizer a run uses (:func:`pick_tokenizer`): ``--tokenizer-dir``; else the ``--model-dir``'s own, when it holds
one (``tokenizer.json`` or ``tokenizer_config.json``); else the character tokenizer of the built-in tasks.  Prompts are
encoded as TRL encodes them (no special tokens added), or, with ``--chat-template``, as one user message through the
tokenizer's chat template with the generation prompt (the template adds what special tokens it wants).  Answers end
at the tokenizer's EOS; its pad token (EOS when it has none) only fills masked places.  Nothing is downloaded.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from core.config.errors import ConfigError
from dapo_lm.tokenizer import CharTokenizer

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def has_tokenizer(path: Optional[str]) -> bool:
    return path is not None and any((Path(path).expanduser() / f).is_file() for f in TOKENIZER_FILES)


class HFTokenizer:
    """A ``transformers`` tokenizer as the trainer uses one."""

    def __init__(self, tok, source: str, chat_template: bool = False):
        self.tok, self.source, self.chat_template = tok, source, chat_template
        if tok.eos_token_id is None:
            raise ConfigError(f"the tokenizer of {source} has no EOS token, so answers could never end; give one "
                              "with an eos_token")
        self.eos_id = int(tok.eos_token_id)
        self.pad_id = int(tok.pad_token_id) if tok.pad_token_id is not None else self.eos_id
        self.vocab_size = len(tok)

    def describe(self) -> str:
        return f"the tokenizer of {self.source} ({self.vocab_size} ids)"

    def encode_prompt(self, text: str) -> list[int]:
        if self.chat_template:
            text = self.tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                tokenize=False)
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def encode_answer(self, text: str) -> list[int]:
        """A worked answer's ids, EOS last (the warm start on a built-in task's answers)."""
        return [*self.tok(text, add_special_tokens=False)["input_ids"], self.eos_id]

    def decode(self, ids: Iterable[int]) -> str:
        """Text up to the first EOS, special tokens skipped."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            out.append(i)
        return self.tok.decode(out, skip_special_tokens=True)


def load_tokenizer(path: str, flag: str, chat_template: bool) -> HFTokenizer:
    """The tokenizer saved in ``path``, or one line saying why not (absent, unreadable, no chat template asked for)."""
    from transformers import AutoTokenizer

    from dapo_lm.model import load_failure, quiet_transformers

    if not has_tokenizer(path):
        raise ConfigError(f"{flag} {path} holds no tokenizer ({' or '.join(TOKENIZER_FILES)}); save one with "
                          "tokenizer.save_pretrained (nothing is downloaded)")
    try:
        with quiet_transformers():
            tok = AutoTokenizer.from_pretrained(str(Path(path).expanduser()), local_files_only=True)
    except Exception as e:  # noqa: BLE001 - every loading failure is one line, named by its type
        raise ConfigError(f"{flag} {path}: the tokenizer does not load ({load_failure(e)})") from e
    if chat_template and not getattr(tok, "chat_template", None):
        raise ConfigError(f"--chat-template: the tokenizer of {path} has no chat template; drop --chat-template "
                          "(prompts are then encoded as they are) or give a tokenizer with one")
    return HFTokenizer(tok, path, chat_template)


def pick_tokenizer(cfg):
    """The run's tokenizer (see the module docstring); one line for a --chat-template that has none to apply."""
    if cfg.tokenizer_dir is not None:
        return load_tokenizer(cfg.tokenizer_dir, "--tokenizer-dir", cfg.chat_template)
    if has_tokenizer(cfg.model_dir):
        return load_tokenizer(cfg.model_dir, "--model-dir", cfg.chat_template)
    if cfg.chat_template:
        raise ConfigError("--chat-template: the character tokenizer has no chat template; give --tokenizer-dir (or a "
                          "--model-dir holding its tokenizer)")
    return CharTokenizer()
