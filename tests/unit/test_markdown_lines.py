"""We test these aspects of the repository's Markdown:

- no line of prose in a tracked `*.md` file is longer than 120 characters, so every document reads
  in a terminal and a side-by-side diff without wrapping;
- what is not prose is left out: fenced code blocks (commands are copied as they are), table rows
  (a row is one line by Markdown's syntax), and the reports bench/stress_e2e.py writes (GENERATED);
  the documents hack/gen_*.py generate are held to the rule (their generators wrap);
- the rule itself finds a long prose line and skips a long table row and a long code line;
- the README stays a page for users (at most README_LINES lines): the rest belongs in docs/.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 120
README_LINES = 150

# bench/stress_e2e.py's reports quote each failure's assertion message verbatim: a record, not prose.
GENERATED = re.compile(r"bench/results/stress-e2e-[^/]*\.md$")
FENCE = re.compile(r"^\s*(```|~~~)")
TABLE_ROW = re.compile(r"^\s*\|")


def long_prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) for each prose line over LIMIT characters, outside code and tables."""
    found = []
    in_code = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_code = not in_code
            continue
        if in_code or TABLE_ROW.match(line):
            continue
        if len(line) > LIMIT:
            found.append((number, line))
    return found


def tracked_markdown() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return [name for name in listed.split("\0") if name]


def test_no_prose_line_is_over_120_characters() -> None:
    names = tracked_markdown()
    assert "README.md" in names and "docs/architecture.md" in names
    offences = []
    for name in names:
        path = ROOT / name
        if not path.is_file():
            continue
        if GENERATED.search(name):
            continue
        offences += [
            f"{name}:{number}: {len(line)} characters" for number, line in long_prose_lines(path.read_text())
        ]
    assert offences == [], "wrap these lines at 120 characters or less:\n" + "\n".join(offences)


@pytest.mark.parametrize(
    ("text", "long_lines"),
    [
        ("short\n" + "word " * 30 + "\n", [2]),
        ("| " + "cell " * 40 + "|\n", []),
        ("```bash\n" + "x" * 200 + "\n```\n" + "y" * 121 + "\n", [4]),
        ("  | indented row " + "z" * 150 + "\n", []),
        ("~~~\n" + "x" * 200 + "\n~~~\n", []),
    ],
)
def test_the_rule_finds_long_prose_and_skips_code_and_tables(text: str, long_lines: list[int]) -> None:
    assert [number for number, _ in long_prose_lines(text)] == long_lines


def test_the_readme_is_at_most_150_lines() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_LINES, (
        f"README.md has {len(lines)} lines (at most {README_LINES}): move detail to docs/ and link it"
    )
