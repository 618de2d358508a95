"""A lineage graph as Graphviz DOT text or as a self-contained SVG, laid out here (no Graphviz binary).

Layout is the classic layered (Sugiyama-style) recipe kept small: ranks by longest path from the
sources (back edges of cycles ignored), a few barycenter sweeps to reduce crossings, then a fixed grid,
left to right. Good enough to read 50 nodes; not a general graph drawer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from html import escape

import attrs

NODE_WIDTH = 220
NODE_HEIGHT = 34
COLUMN_GAP = 90
ROW_GAP = 18
MARGIN = 20
BARYCENTER_SWEEPS = 4
MAX_LABEL_CHARS = 32


@attrs.frozen
class GraphNode:
    id: str
    label: str
    kind: str  # "DATASET" | "JOB" | "FIELD" | "SNAPSHOT"
    highlight: bool = False


@attrs.frozen
class GraphEdge:
    source: str
    target: str
    label: str = ""


@attrs.frozen
class Picture:
    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]


def to_dot(picture: Picture, title: str = "lineage") -> str:
    lines = [f"digraph {_dot_quote(title)} {{", "  rankdir=LR;", "  node [fontname=Helvetica fontsize=10];"]
    for node in picture.nodes:
        shape = "box" if node.kind == "JOB" else "ellipse"
        style = ' style=filled fillcolor="#ffe08a"' if node.highlight else ""
        lines.append(f"  {_dot_quote(node.id)} [label={_dot_quote(node.label)} shape={shape}{style}];")
    for edge in picture.edges:
        label = f" [label={_dot_quote(edge.label)}]" if edge.label else ""
        lines.append(f"  {_dot_quote(edge.source)} -> {_dot_quote(edge.target)}{label};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_svg(picture: Picture) -> str:
    positions = layout(picture)
    width = max((x for x, _ in positions.values()), default=0) + NODE_WIDTH + 2 * MARGIN
    height = max((y for _, y in positions.values()), default=0) + NODE_HEIGHT + 2 * MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica,Arial,sans-serif" font-size="11">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
    ]
    parts += [_svg_edge(edge, positions) for edge in picture.edges if edge.source in positions and edge.target in positions]
    parts += [_svg_node(node, positions[node.id]) for node in picture.nodes]
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def layout(picture: Picture) -> dict[str, tuple[int, int]]:
    """Top-left corner of each node's box."""
    ids = [node.id for node in picture.nodes]
    edges = [(e.source, e.target) for e in picture.edges if e.source in set(ids) and e.target in set(ids)]
    rank = _ranks(ids, _forward_edges(ids, edges))
    layers = _order_layers(ids, edges, rank)
    positions: dict[str, tuple[int, int]] = {}
    for column, layer in enumerate(layers):
        for row, node_id in enumerate(layer):
            positions[node_id] = (MARGIN + column * (NODE_WIDTH + COLUMN_GAP), MARGIN + row * (NODE_HEIGHT + ROW_GAP))
    return positions


def _forward_edges(ids: Sequence[str], edges: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Edges minus the back edges found by an iterative DFS, so ranking terminates on cycles."""
    successors: dict[str, list[str]] = defaultdict(list)
    for source, target in edges:
        successors[source].append(target)
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    back: set[tuple[str, str]] = set()
    for root in ids:
        if root in state:
            continue
        stack = [(root, iter(successors[root]))]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                back.add((node, child))
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(successors[child])))
    return [edge for edge in edges if edge not in back and edge[0] != edge[1]]


def _ranks(ids: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    indegree = {node_id: 0 for node_id in ids}
    successors: dict[str, list[str]] = defaultdict(list)
    for source, target in edges:
        successors[source].append(target)
        indegree[target] += 1
    rank = {node_id: 0 for node_id in ids}
    ready = [node_id for node_id in ids if indegree[node_id] == 0]
    while ready:
        node = ready.pop()
        for child in successors[node]:
            rank[child] = max(rank[child], rank[node] + 1)
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    return rank


def _order_layers(ids: Sequence[str], edges: Sequence[tuple[str, str]], rank: dict[str, int]) -> list[list[str]]:
    layers: list[list[str]] = [[] for _ in range(max(rank.values(), default=-1) + 1)]
    for node_id in ids:
        layers[rank[node_id]].append(node_id)
    neighbours: dict[str, list[str]] = defaultdict(list)
    for source, target in edges:
        neighbours[source].append(target)
        neighbours[target].append(source)
    for _ in range(BARYCENTER_SWEEPS):
        for index, layer in enumerate(list(layers)):
            row_of = {node_id: row for other in layers if other is not layer for row, node_id in enumerate(other)}
            current = {node_id: row for row, node_id in enumerate(layer)}
            layers[index] = sorted(layer, key=lambda node_id: _barycenter(node_id, neighbours, row_of, current[node_id]))
    return layers


def _barycenter(node_id: str, neighbours: dict[str, list[str]], row_of: dict[str, int], current: int) -> float:
    rows = [row_of[n] for n in neighbours[node_id] if n in row_of]
    return sum(rows) / len(rows) if rows else float(current)


def _svg_node(node: GraphNode, position: tuple[int, int]) -> str:
    x, y = position
    fill = "#ffe08a" if node.highlight else ("#dbe9ff" if node.kind == "JOB" else "#e6f4e6")
    radius = 4 if node.kind == "JOB" else 16
    label = node.label if len(node.label) <= MAX_LABEL_CHARS else "…" + node.label[-(MAX_LABEL_CHARS - 1) :]
    return (
        f'<g class="node {node.kind.lower()}"><title>{escape(node.id)}</title>'
        f'<rect x="{x}" y="{y}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="{radius}" fill="{fill}" stroke="#444"/>'
        f'<text x="{x + NODE_WIDTH // 2}" y="{y + NODE_HEIGHT // 2 + 4}" text-anchor="middle">{escape(label)}</text></g>'
    )


def _svg_edge(edge: GraphEdge, positions: dict[str, tuple[int, int]]) -> str:
    sx, sy = positions[edge.source]
    tx, ty = positions[edge.target]
    x1, y1 = sx + NODE_WIDTH, sy + NODE_HEIGHT // 2
    x2, y2 = tx, ty + NODE_HEIGHT // 2
    bend = max(COLUMN_GAP // 2, abs(x2 - x1) // 3)
    title = f"<title>{escape(edge.label)}</title>" if edge.label else ""
    return (
        f'<path class="edge" d="M {x1} {y1} C {x1 + bend} {y1}, {x2 - bend} {y2}, {x2} {y2}" '
        f'fill="none" stroke="#555" marker-end="url(#arrow)">{title}</path>'
    )


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
