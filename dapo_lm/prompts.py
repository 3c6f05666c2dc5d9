"""Prompt sources: the rows RL draws prompts from and the held-out rows evaluation answers.

- :class:`TaskPrompts`: a built-in task's generator (:mod:`dapo_lm.tasks`), endless, its held-out tenth by CRC-32.
- :class:`FilePrompts`: the user's ``--prompts FILE``: JSONL (one JSON object a line), CSV (a header row), Parquet
  (with pyarrow installed) or a ``datasets`` dataset saved with ``save_to_disk`` (with ``datasets`` installed; a
  DatasetDict gives its ``train`` split).  ``--prompt-column`` (default ``prompt``) holds the text; every other
  column goes to the reward with each answer.  The held-out rows are ``--eval-prompts FILE``, else the rows whose
  prompt's CRC-32 falls in the lowest ``--heldout-share`` of its range (default 0.1): the same rows on every run
  and machine, whatever their order in the file.  Training draws rows in shuffled passes (a permutation per pass
  from the seed), so a checkpoint needs only the count drawn.

A row is a :class:`dapo_lm.tasks.Problem`: ``prompt``, ``answer`` (a worked answer: built-in tasks only, for the warm
start) and ``columns``.  Nothing is unpickled: Parquet and Arrow files are data only.
"""
from __future__ import annotations

import csv
import json
import zlib
from pathlib import Path
from typing import Any, Optional

import numpy as np

from core.config.errors import ConfigError, shown
from dapo_lm.rewards import RESERVED
from dapo_lm.tasks import Problem

MAX_ROWS = 10_000_000


class TaskPrompts:
    """A built-in task as a prompt source: draws from the run's generator, as before this module existed."""

    def __init__(self, task):
        self.task, self.name, self.columns = task, task.name, ()

    def draw(self, rng: np.random.Generator, n: int) -> list[Problem]:
        return [self.task.sample(rng) for _ in range(n)]

    def heldout_set(self, n: int) -> list[Problem]:
        return self.task.heldout_set(n)

    def train_rows(self, n: int) -> list[Problem]:
        """A few training prompts (the reward's dry run) from a generator of their own."""
        return self.draw(np.random.default_rng(0), n)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def heldout_by_hash(prompt: str, share: float) -> bool:
    """Whether a prompt is held out: its CRC-32 in the lowest ``share`` of the 32-bit range (run-independent)."""
    return zlib.crc32(prompt.encode()) < share * 2**32


class FilePrompts:
    """Rows of the user's prompts: ``train`` drawn in shuffled passes, ``heldout`` for evaluation in file order."""

    def __init__(self, name: str, train: list[Problem], heldout: list[Problem], seed: int):
        self.name, self.train, self.heldout, self.seed = name, train, heldout, seed
        self.columns = tuple(sorted({k for p in train + heldout for k in p.columns}))
        self.drawn = 0  # rows drawn so far; row k is pass k // n's permutation at k % n
        self._order: tuple = (-1, None)  # (pass, its permutation), the one in use

    def draw(self, rng: np.random.Generator, n: int) -> list[Problem]:
        out, size = [], len(self.train)
        for k in range(self.drawn, self.drawn + n):
            if self._order[0] != k // size:
                self._order = (k // size, np.random.default_rng([self.seed, k // size]).permutation(size))
            out.append(self.train[int(self._order[1][k % size])])
        self.drawn += n
        return out

    def heldout_set(self, n: int) -> list[Problem]:
        return self.heldout[:n]

    def train_rows(self, n: int) -> list[Problem]:
        return self.train[:n]

    def state_dict(self) -> dict:
        return {"drawn": self.drawn}

    def load_state_dict(self, state: dict) -> None:
        self.drawn = int(state.get("drawn", 0))


def read_rows(path: str, flag: str) -> list[dict]:
    """The rows of a prompts file or dataset directory as dicts, or one line saying why not."""
    p = Path(path).expanduser()
    if p.is_dir():
        return _dataset_rows(p, flag)
    if not p.is_file():
        raise ConfigError(f"{flag} {path}: no such file or directory")
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return _jsonl_rows(p, flag)
    if suffix in (".csv", ".tsv"):
        with open(p, newline="", encoding="utf-8") as f:
            try:
                return list(csv.DictReader(f, delimiter="\t" if suffix == ".tsv" else ","))
            except (csv.Error, UnicodeDecodeError) as e:
                raise ConfigError(f"{flag} {path} is not a readable CSV file ({type(e).__name__}: {e})") from e
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError(f"{flag} {path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
        try:
            return pq.read_table(p).to_pylist()
        except Exception as e:  # noqa: BLE001 - any unreadable file is one line
            raise ConfigError(f"{flag} {path} is not a readable Parquet file ({type(e).__name__})") from e
    raise ConfigError(f"{flag} {path}: give a .jsonl, .csv or .parquet file, or a dataset directory written by "
                      "datasets' save_to_disk")


def _jsonl_rows(p: Path, flag: str) -> list[dict]:
    rows = []
    with open(p, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ConfigError(f"{flag} {p} line {i} is not JSON ({e.__class__.__name__}); one object a line") \
                    from e
            if not isinstance(row, dict):
                raise ConfigError(f"{flag} {p} line {i} is not a JSON object (got {shown(row)})")
            rows.append(row)
            if len(rows) > MAX_ROWS:
                raise ConfigError(f"{flag} {p} has more than {MAX_ROWS} rows")
    return rows


def _dataset_rows(p: Path, flag: str) -> list[dict]:
    if not any((p / name).is_file() for name in ("dataset_info.json", "state.json", "dataset_dict.json")):
        raise ConfigError(f"{flag} {p} is a directory but not a dataset saved by datasets' save_to_disk")
    try:
        import datasets
    except ImportError:
        raise ConfigError(f"{flag} {p}: reading a saved dataset needs datasets (pip install datasets)") from None
    try:
        data = datasets.load_from_disk(str(p))
    except Exception as e:  # noqa: BLE001
        raise ConfigError(f"{flag} {p} is not a loadable dataset ({type(e).__name__})") from e
    if isinstance(data, datasets.DatasetDict):
        if "train" not in data:
            raise ConfigError(f"{flag} {p} holds splits {sorted(data)} and no 'train'; save the split to use")
        data = data["train"]
    return data.to_list()


def to_problems(rows: list[dict], column: str, flag: str, path: str) -> list[Problem]:
    """Rows -> problems: the prompt column as text, the other columns for the reward."""
    if not rows:
        raise ConfigError(f"{flag} {path} holds no rows")
    if column not in rows[0]:
        raise ConfigError(f"{flag} {path} has no column '{column}' (its columns: {', '.join(map(str, rows[0]))}); "
                          "name the prompt column with --prompt-column")
    clash = sorted(set(rows[0]) & set(RESERVED))
    if clash:
        raise ConfigError(f"{flag} {path} has a column '{clash[0]}', a name the reward call keeps for itself "
                          f"({', '.join(RESERVED)}); rename it")
    out = []
    for i, row in enumerate(rows, 1):
        text = row.get(column)
        if not isinstance(text, str) or not text:
            raise ConfigError(f"{flag} {path} row {i}: '{column}' must be non-empty text, got {shown(text)}")
        out.append(Problem(text, "", {k: v for k, v in row.items() if k != column}))
    return out


def file_prompts(path: str, column: str, eval_path: Optional[str], share: float, seed: int,
                 rows: Optional[list[dict]] = None, eval_rows: Optional[list[dict]] = None) -> FilePrompts:
    """The user's prompts split into training and held-out rows (``rows``/``eval_rows``: already read, e.g. the
    Python API's list of dicts); one line when either part is empty."""
    train = to_problems(read_rows(path, "--prompts") if rows is None else rows, column, "--prompts", path)
    if eval_path is not None:
        heldout = to_problems(read_rows(eval_path, "--eval-prompts") if eval_rows is None else eval_rows, column,
                              "--eval-prompts", eval_path)
    else:
        heldout = [p for p in train if heldout_by_hash(p.prompt, share)]
        train = [p for p in train if not heldout_by_hash(p.prompt, share)]
        if not heldout:
            raise ConfigError(f"--prompts {path}: none of its {len(train)} prompts falls in the held-out share "
                              f"{share}; give --eval-prompts FILE or a larger --heldout-share")
    if not train:
        raise ConfigError(f"--prompts {path}: no training prompts are left after the held-out split; give "
                          "--eval-prompts FILE or a smaller --heldout-share")
    return FilePrompts(Path(path).stem if not path.startswith("dapo-local/") else "prompts", train, heldout, seed)


def local_name(rows: Any) -> str:
    """A content-addressed name for prompts given as a Python list of dicts (so a resume with the same list in
    another process finds them again)."""
    text = json.dumps(rows, sort_keys=True, default=str)
    return f"dapo-local/prompts-{zlib.crc32(text.encode()):08x}-{len(rows)}"


LOCAL_PROMPTS: dict[str, list[dict]] = {}
