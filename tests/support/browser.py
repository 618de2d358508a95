"""Marquez Web in a real browser: Playwright driving Chromium (Debian's; ./run tests installs it).

``browser`` (module fixture) -> a launched Playwright Chromium; ``page`` (fixture) -> a fresh page.
``open_page(page, url, screenshot) -> str`` loads a page, lets it settle, keeps a screenshot under
.run/marquez-web/ and returns the page's text; ``svg_labels(page, url, screenshot)`` the text labels
of the page's lineage graph; ``graph_groups(labels)`` splits them into job names and each dataset's
fields; ``truncated(text, length)`` is Marquez Web's own truncation of long names.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.paths import PROJECT_ROOT
from tests.support.require import chromium_executable

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = PROJECT_ROOT / ".run" / "marquez-web"
# The graph pages keep polling (no network idle) and lay out in a web worker: let them settle.
LAYOUT_SETTLE_MS = 8000
PAGE_TIMEOUT_MS = 60_000
JOB_NAME_CHARS = 40  # the jobs table truncates longer names
GRAPH_JOB_NAME_CHARS = 16  # and a graph's job nodes these


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium_executable()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    opened = context.new_page()
    opened.set_default_timeout(PAGE_TIMEOUT_MS)
    yield opened
    context.close()


def open_page(page: Any, url: str, screenshot: str) -> str:
    """Load `url`, let it settle, save a screenshot; the page's text."""
    page.goto(url, wait_until="load")
    page.wait_for_timeout(LAYOUT_SETTLE_MS)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{screenshot}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return str(page.inner_text("body"))


def truncated(text: str, length: int) -> str:
    """Marquez Web's truncateText."""
    return text if len(text) <= length else text[:length] + "..."


def svg_labels(page: Any, url: str, screenshot: str) -> list[str]:
    """The text labels of the page's graph (its largest SVG: not the minimap repeating it)."""
    open_page(page, url, screenshot)
    labels: list[str] = page.evaluate(
        """() => {
            const area = svg => { const box = svg.getBoundingClientRect(); return box.width * box.height; };
            const graph = [...document.querySelectorAll("svg")].sort((a, b) => area(b) - area(a))[0];
            return graph ? [...graph.querySelectorAll("text")].map(n => n.textContent.trim()) : [];
        }"""
    )
    return labels


def graph_groups(labels: list[str]) -> tuple[list[str], list[frozenset[str]]]:
    """Node labels of a table-lineage graph: the JOB node names and each DATASET node's fields."""
    jobs: list[str] = []
    datasets: list[frozenset[str]] = []
    for kind, name, *rest in _split_nodes(labels):
        if kind == "JOB":
            jobs.append(name)
        else:
            datasets.append(frozenset(label.removeprefix("- ") for label in rest))
    return jobs, datasets


def _split_nodes(labels: list[str]) -> list[list[str]]:
    nodes: list[list[str]] = []
    for label in labels:
        if label in {"JOB", "DATASET"}:
            nodes.append([label])
        elif nodes and label and label != "Job":
            nodes[-1].append(label)
    return [node for node in nodes if len(node) >= 2]
