"""Imported at start-up by every Python process of ``gpu_check.sh --dry-run`` (this folder is put first on
PYTHONPATH): only the distributions of the GPU image (``packages.txt``), the wheels installed into
``$DAPO_WHEEL_SITE`` and this repository can be imported; any other installed package raises
ModuleNotFoundError, as it would on the bare image."""
import os
import re
import sys
from importlib import metadata
from pathlib import Path


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class _Hidden:
    """A meta-path finder that refuses the top-level modules of hidden distributions."""

    def __init__(self, hidden: set):
        self.hidden = hidden

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.hidden:
            raise ModuleNotFoundError(f"No module named '{name}' (not on the GPU image; gpu_check --dry-run)",
                                      name=name)
        return None


def _install() -> None:
    listed = Path(__file__).with_name("packages.txt").read_text().splitlines()
    allowed = {_norm(x) for x in listed if x and not x.startswith("#")} | {"dapo-toolkit"}
    site = Path(os.environ["DAPO_WHEEL_SITE"])
    carried = {p.name.partition(".")[0] for p in site.iterdir()} if site.is_dir() else set()
    hidden = {top for top, dists in metadata.packages_distributions().items()
              if top not in carried and not any(_norm(d) in allowed for d in dists)}
    sys.meta_path.insert(0, _Hidden(hidden))


if os.environ.get("DAPO_WHEEL_SITE"):
    _install()
