"""Repository wiring: CI runs exactly the README's test command."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"\*\*Install and run the tests\*\*.*?```bash\n(.+?)\n```", readme, re.S)
    assert block, "README lost its 'Run the tests' command"
    assert block.group(1).strip() in (ROOT / ".ci" / "run").read_text()
