"""A character-level tokenizer made locally: one token per character of a fixed alphabet, plus PAD, BOS, EOS.

Every task writes its prompts and answers in this alphabet, so one vocabulary serves them all and nothing is
downloaded.  :meth:`CharTokenizer.to_transformers` gives the same vocabulary as a ``transformers`` fast tokenizer
for libraries that want one (the TRL comparison in experiments/lm_trl.py).
"""
from __future__ import annotations

from typing import Iterable

ALPHABET = "0123456789+-*=,>:() "
SPECIALS = ("<pad>", "<bos>", "<eos>")


class CharTokenizer:
    pad_id, bos_id, eos_id = 0, 1, 2

    def __init__(self, alphabet: str = ALPHABET):
        if len(set(alphabet)) != len(alphabet):
            raise ValueError("alphabet has repeated characters")
        self.alphabet = alphabet
        self.index = {ch: i + len(SPECIALS) for i, ch in enumerate(alphabet)}

    @property
    def vocab_size(self) -> int:
        return len(SPECIALS) + len(self.alphabet)

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        try:
            ids = [self.index[ch] for ch in text]
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the alphabet {self.alphabet!r}") from None
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def encode_prompt(self, text: str) -> list[int]:
        """A prompt's ids: BOS, then its characters (the interface :class:`dapo_lm.hf_tokenizer.HFTokenizer` shares)."""
        return self.encode(text, bos=True)

    def encode_answer(self, text: str) -> list[int]:
        """A worked answer's ids, EOS last (the warm start's targets)."""
        return self.encode(text, eos=True)

    def describe(self) -> str:
        return f"the character tokenizer ({self.vocab_size} ids)"

    def decode(self, ids: Iterable[int]) -> str:
        """Text up to the first EOS; PAD and BOS are skipped; an id beyond the vocabulary (a --model-dir's larger
        one) is U+FFFD, which no verifier accepts."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i >= self.vocab_size:
                out.append("\ufffd")
            elif i >= len(SPECIALS):
                out.append(self.alphabet[i - len(SPECIALS)])
        return "".join(out)

    def to_transformers(self, bos_first: bool = False):
        """The same ids as a ``transformers.PreTrainedTokenizerFast`` (word-level over single characters); with
        ``bos_first`` it puts BOS before every text it encodes with special tokens (as prompts start here)."""
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
        from transformers import PreTrainedTokenizerFast

        vocab = {name: i for i, name in enumerate(SPECIALS)} | self.index
        tok = Tokenizer(models.WordLevel(vocab, unk_token=SPECIALS[0]))
        tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
        tok.decoder = decoders.Fuse()  # characters joined without spaces
        if bos_first:
            tok.post_processor = processors.TemplateProcessing(single=f"{SPECIALS[1]} $A",
                                                               special_tokens=[(SPECIALS[1], self.bos_id)])
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=SPECIALS[0], bos_token=SPECIALS[1],
                                       eos_token=SPECIALS[2], padding_side="left")
