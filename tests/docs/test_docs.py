"""The documentation holds together: every relative link in the repository's Markdown points to a
file that exists and, with `#anchor`, to a heading of it (anchors as GitHub makes them); and the
reference pages hold no timings: measured figures live in benchmarks/README.md only (method and
one current results table per benchmark), history in CHANGELOG.md."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import PROJECT_ROOT

FENCE = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[(?:[^\]\n]|\][^(])*?\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:
# Reference pages: what the project does and how to use it. benchmarks/README.md holds the figures,
# CHANGELOG.md the history; third-party READMEs are not ours.
REFERENCE_PAGES = ("README.md", "docs/*.md", "deploy/README.md", "benchmarks/tpcds/README.md")
# A timing: a duration below the second, a rate, a speed ratio, a percentile or median, "measured on ...".
TIMING = re.compile(
    r"\d(?:[\d.,]*\d)?\s?(?:ns|µs|us|ms)\b"
    r"|\b(?:events|requests|rows)/s\b"
    r"|\d(?:\.\d+)?\s?×"
    r"|\b\d+(?:\.\d+)?\s+times\s+(?:faster|slower)\b"
    r"|\bp(?:50|90|95|99)\b"
    r"|\bmedian\b"
    r"|\bmeasured (?:on|at|with|in)\b"
    r"|\btook \d",
    re.IGNORECASE,
)
# `--*-ms` flags and settings named in milliseconds are names, not figures
NAMED_SETTING = re.compile(r"[\w.-]*_ms\b|[\w.-]*-ms\b|[\w.]*\.ms\b")


def _markdown_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [PROJECT_ROOT / name for name in listed if (PROJECT_ROOT / name).is_file()]


def _prose(text: str) -> str:
    """The text outside code blocks and inline code (a link there is an example, not a link)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: its rendered text lower-cased, punctuation dropped, spaces as '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        anchor = github_anchor(heading)
        count = seen.get(anchor, 0)
        found.add(anchor if count == 0 else f"{anchor}-{count}")
        seen[anchor] = count + 1
    return found


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(path.read_text())):
        if EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no such heading")
    return broken


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda path: str(path.relative_to(PROJECT_ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def _reference_pages() -> list[Path]:
    return sorted({page for pattern in REFERENCE_PAGES for page in PROJECT_ROOT.glob(pattern)})


@pytest.mark.parametrize("path", _reference_pages(), ids=lambda path: str(path.relative_to(PROJECT_ROOT)))
def test_reference_pages_hold_no_timings(path: Path) -> None:
    found = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        for match in TIMING.finditer(NAMED_SETTING.sub("", line)):
            found.append(f"line {number}: {match[0]!r} in {line.strip()[:120]}")
    assert found == [], "timings belong in benchmarks/README.md:\n" + "\n".join(found)


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n## Settings (flag, environment variable, default)\n")
    page.write_text(
        "[ok](other.md#settings-flag-environment-variable-default) [bad](other.md#nothing) [gone](missing.md)\n"
        "`[code](missing.md)` [web](https://example.com/x)\n"
    )
    assert broken_links(page) == ["other.md#nothing: no such heading", "missing.md: no such file"]
    assert TIMING.search("median ≈ 7 µs") and TIMING.search("2.4× faster") and TIMING.search("1,300 events/s")
    assert not TIMING.search(NAMED_SETTING.sub("", "`--session-timeout-ms` 10000, a pause of 5 s"))


SETTING_ROW = re.compile(r"^\| `(--[\w-]+)` \| `(\w+)` \| .*\| ([^|]+) \|$", re.MULTILINE)
ALL_BUT = re.compile(r"all but (.+)")


def _documented_settings() -> dict[str, set[str]]:
    """docs/consumer.md's settings table: flag -> the commands its last column names."""
    commands = _command_options()
    table: dict[str, set[str]] = {}
    for flag, _env, listed in SETTING_ROW.findall((PROJECT_ROOT / "docs" / "consumer.md").read_text()):
        excluded = ALL_BUT.match(listed.strip())
        named = set(re.findall(r"`([\w-]+)`", excluded[1] if excluded else listed))
        table[flag] = (set(commands) - named) if excluded else named
    return table


def _command_options() -> dict[str, set[str]]:
    """Each consumer command and the flags its parser accepts (`lineage` takes --store)."""
    from consumer.cli import _parser

    (subparsers,) = (action for action in _parser()._actions if action.dest == "command")
    options = {
        name: {flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")}
        for name, parser in subparsers.choices.items()
    }
    options["lineage"] = {"--store"}
    return options


def test_the_consumer_settings_table_says_which_commands_take_each_flag() -> None:
    from consumer.settings import documented_options

    table = _documented_settings()
    assert sorted(table) == sorted(flag for flag, *_ in documented_options() if flag)  # secrets have no flag
    for command, accepted in _command_options().items():
        documented = {flag for flag, commands in table.items() if command in commands}
        assert documented == accepted & set(table), command


LIST_ITEM = re.compile(r"^(\s*)(?:[-*]|\d+\.)\s")
MAX_BULLET_LINES = 10  # a bullet holds one point; a longer explanation is a paragraph or a section


def long_bullets(text: str) -> list[str]:
    """The list items (with their continuation lines) longer than MAX_BULLET_LINES, outside code blocks."""
    found: list[str] = []
    item: list[str] = []
    for line in FENCE.sub("", text).splitlines() + [""]:
        starts = LIST_ITEM.match(line)
        continues = item and line.strip() and line.startswith(" ") and not starts
        if continues:
            item.append(line)
            continue
        if len(item) > MAX_BULLET_LINES:
            found.append(f"{len(item)} lines: {item[0].strip()[:80]}")
        item = [line] if starts else []
    return found


@pytest.mark.parametrize("path", _reference_pages(), ids=lambda path: str(path.relative_to(PROJECT_ROOT)))
def test_reference_page_bullets_are_short(path: Path) -> None:
    assert long_bullets(path.read_text()) == []


def test_a_long_bullet_is_found() -> None:
    assert long_bullets("- short\n  two\n- long\n" + "  more\n" * MAX_BULLET_LINES) == [f"{MAX_BULLET_LINES + 1} lines: - long"]
