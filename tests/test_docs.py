"""Documentation that is generated or that the code relies on stays current."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_options_md_is_current():
    from core.run.docs import options_markdown
    assert (REPO / "docs" / "options.md").read_text() == options_markdown(), "run: python -m core.run.docs"


def test_no_reference_to_a_spec_that_does_not_ship():
    """The algorithms are defined in docs/algorithms.md; nothing points to a SPEC file outside the repository."""
    for path in [*REPO.glob("*.md"), *(REPO / "docs").glob("*.md"), *REPO.glob("core/**/*.py"),
                 *REPO.glob("dapo_*/**/*.py"), *REPO.glob("experiments/**/*.py"), *REPO.glob("experiments/**/*.md"),
                 *REPO.glob("experiments/**/*.yaml"), *REPO.glob("tests/*.py")]:
        if path.name == "test_docs.py":
            continue
        assert not re.search(r"\bSPEC\b", path.read_text()), path


def test_the_readme_is_short_and_carries_no_lab_history():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    hashes = re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", readme)
    assert not hashes, f"commit hashes belong in experiments/results/: {hashes}"
    assert "dapo-v7" not in readme and "docs/algorithms.md" in readme
    assert (REPO / "LICENSE").is_file()
