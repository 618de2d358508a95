"""The layered layout and its SVG / DOT text (pure; no Graphviz)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from consumer.query.render import NODE_HEIGHT, NODE_WIDTH, GraphEdge, GraphNode, Picture, layout, to_dot, to_svg


def _chain_with_fanout(width: int, length: int) -> Picture:
    nodes, edges = [], []
    for lane in range(width):
        previous = "root"
        for step in range(length):
            node_id = f"dataset:ns:t{lane}_{step}"
            nodes.append(GraphNode(node_id, node_id.rsplit(":", 1)[1], "DATASET"))
            edges.append(GraphEdge(previous, node_id))
            previous = node_id
    nodes.append(GraphNode("root", "root", "JOB", highlight=True))
    return Picture(tuple(nodes), tuple(edges))


def test_fifty_nodes_get_distinct_non_overlapping_boxes_in_rank_order():
    picture = _chain_with_fanout(width=7, length=7)  # 50 nodes
    positions = layout(picture)
    assert len(positions) == 50
    boxes = sorted(positions.values())
    for (x1, y1), (x2, y2) in zip(boxes, boxes[1:], strict=False):
        assert x1 != x2 or abs(y1 - y2) >= NODE_HEIGHT  # same column: stacked without overlap
    for edge in picture.edges:
        assert positions[edge.source][0] + NODE_WIDTH <= positions[edge.target][0]  # edges point right


def test_cycles_do_not_hang_and_svg_is_well_formed():
    nodes = tuple(GraphNode(f"n{i}", f"<n{i}&>", "DATASET") for i in range(3))
    edges = (GraphEdge("n0", "n1"), GraphEdge("n1", "n2"), GraphEdge("n2", "n0"), GraphEdge("n1", "n1"))
    svg = to_svg(Picture(nodes, edges))
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert "&lt;n0&amp;&gt;" in svg and len(root.findall(".//{http://www.w3.org/2000/svg}rect")) == 3


def test_dot_quotes_ids_and_labels():
    dot = to_dot(Picture((GraphNode('a"b', "x\\y", "JOB"),), (GraphEdge('a"b', 'a"b', "DIRECT/IDENTITY"),)))
    assert '"a\\"b" [label="x\\\\y" shape=box];' in dot and '[label="DIRECT/IDENTITY"]' in dot
