"""graph-dap graph: the graph view's document, overlays from the tools' JSON, and the page drawn in Chromium.

The document is checked against graph-dap's own graph and listing (node ids, listing lines, module
scopes, bodies); the compare overlay against the rows ``graph-dap compare --json`` printed for a
model whose weights were changed, the profile overlay against ``graph-dap profile --json``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from cf_models import function_model, loop_model
from ocr_models import ocr_det

from graph_dap.cli import main
from graph_dap.runtime import load_graph, render_listing
from graph_dap.runtime.tools.graphview.data import NODE_ENTERABLE, VALUE_INITIALIZER, graph_data
from graph_dap.runtime.tools.graphview.overlays import overlay_from

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code = main(list(args))
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def ocr(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The PaddleOCR-style detector, and the same model with one weight scaled by 1.01 (compare's reference)."""
    root = tmp_path_factory.mktemp("ocr")
    onnx.save(ocr_det(32), root / "ocr.onnx")
    other = ocr_det(32)
    for t in other.graph.initializer:
        if t.name == "neck.smooth.weight":
            t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t) * np.float32(1.01), t.name))
    onnx.save(other, root / "other.onnx")
    return {"root": root, "model": root / "ocr.onnx", "other": root / "other.onnx"}


def test_the_document_names_nodes_lines_and_modules_as_the_debugger_and_the_listing_do(ocr):
    graph = load_graph(ocr["model"])
    doc = graph_data(graph)
    listing = render_listing(graph)
    nodes = {row[0]: row for row in doc["nodes"]}
    assert list(nodes) == [n.id for n in graph.all_nodes()]
    assert {i: row[4] for i, row in nodes.items()} == listing.node_lines
    text = listing.text.splitlines()
    for row in doc["nodes"]:  # the line's attributes (and source comment): the rest is in the other columns
        assert row[8] in text[row[4] - 1] and text[row[4] - 1].count("<") == row[8].count("<")
    assert any(row[8].startswith("<pads=") for row in doc["nodes"])
    # Module scopes as runtime/source.py derives them from the node names, nested by path.
    modules = doc["modules"]
    for node in graph.all_nodes():
        row = nodes[node.id]
        chain = []
        m = row[3]
        while m >= 0:
            chain.append(modules[m][0])
            m = modules[m][2]
        assert chain[::-1] == [s.path for s in graph.sources.of(node).modules]
    assert {m[0] for m in modules if m[2] < 0} == {"backbone", "neck", "head"}
    # Values: producers and types as the graph has them; initializers flagged, not produced.
    values = doc["values"]
    for row in doc["nodes"]:
        for v in row[6]:
            assert values[v][2] == doc["nodes"].index(row)
            assert values[v][1] == graph.value_info(values[v][0]).type_text()
    weight = next(v for v in values if v[0] == "backbone.stem.weight")
    assert weight[3] & VALUE_INITIALIZER and weight[2] == -1
    assert doc["scopes"] == [[-1, "", [values.index(next(v for v in values if v[0] == "image"))], [values.index(next(v for v in values if v[0] == "maps"))]]]


def test_bodies_and_functions_are_scopes_owned_by_their_node():
    graph = load_graph(loop_model(trip=3))
    doc = graph_data(graph)
    loop = next(n for n in graph.all_nodes() if n.op_type == "Loop")
    row = next(i for i, r in enumerate(doc["nodes"]) if r[0] == loop.id)
    assert doc["nodes"][row][7] & NODE_ENTERABLE
    body = graph.subscope(loop, "body")
    [scope] = [k for k, s in enumerate(doc["scopes"]) if s[0] == row]
    assert doc["scopes"][scope][1] == "body"
    assert [doc["values"][v][0] for v in doc["scopes"][scope][2]] == list(body.input_names)
    assert [r[0] for r in doc["nodes"] if r[2] == scope] == [n.id for n in body.nodes]
    # a body reads outer values: they are the values of the main graph, the same rows
    for node in body.nodes:
        for name in node.all_inputs:
            if not body.defines(name):
                r = next(r for r in doc["nodes"] if r[0] == node.id)
                assert any(doc["values"][v][0] == name and doc["values"][v][2] != scope for v in r[5])
    fdoc = graph_data(load_graph(function_model()))
    calls = [i for i, r in enumerate(fdoc["nodes"]) if r[7] & NODE_ENTERABLE]
    assert calls and all(any(s[0] == c for s in fdoc["scopes"]) for c in calls)


def test_compare_and_profile_json_become_overlays_keyed_by_node(ocr, capsys):
    graph = load_graph(ocr["model"])
    code, report = cli_json(capsys, "compare", str(ocr["model"]), "--against-model", str(ocr["other"]), "--json")
    assert code == 1  # the changed weight diverges
    overlay = overlay_from(report, graph, "cmp.json")
    assert overlay["kind"] == "compare" and overlay["default"] == "snr"
    assert {m["key"]: m["worse"] for m in overlay["metrics"]}["snr"] == "low"
    for row in report["rows"]:
        mine = overlay["values"][row["node"]["id"]]
        for k, v in row["metrics"].items():
            assert mine[k] == (v if isinstance(v, str) else float(v))  # one output per node here
    first = report["first_divergence"]["node"]["id"]
    assert first == "neck/smooth/conv" and overlay["marks"][first] == "the first divergence"

    code, prof = cli_json(capsys, "profile", str(ocr["model"]), "--repeat", "1", "--json")
    assert code == 0
    overlay = overlay_from(prof, graph, "prof.json")
    assert overlay["kind"] == "profile"
    assert set(overlay["values"]) <= {n.id for n in graph.nodes}
    assert sum(v["time_ms"] for v in overlay["values"].values()) == pytest.approx(sum(n["time_ms"] for n in prof["nodes"]))
    slowest = max(prof["nodes"], key=lambda n: n["time_ms"])
    assert overlay["marks"] == {graph.nodes[slowest["index"]].id: "the slowest node"}


def test_scan_json_counts_first_bad_nodes_and_bad_files_are_one_line(ocr, tmp_path, capsys):
    graph = load_graph(ocr["model"])
    scan = {"format": "graph-dap-scan", "version": 1,
            "first_bad_nodes": [{"node": "head/binarize/sqrt", "op_type": "Sqrt", "index": 31, "count": 3, "statuses": {"nan": 3}},
                                {"node": "elsewhere/relu", "count": 1}]}
    overlay = overlay_from(scan, graph, "scan.json")
    assert overlay["values"] == {"head/binarize/sqrt": {"count": 3.0}} and overlay["unmatched"] == 1
    assert overlay["marks"]["head/binarize/sqrt"] == "first bad node of 3 inputs (nan 3)"
    (tmp_path / "other.json").write_text(json.dumps({"rows": []}))
    (tmp_path / "broken.json").write_text("{")
    for name, why in (("other.json", "not the JSON of graph-dap compare --json"), ("broken.json", "not a JSON file"), ("missing.json", "not found")):
        code = main(["graph", str(ocr["model"]), "--json", "--overlay", str(tmp_path / name)])
        err = capsys.readouterr().err
        assert code == 2 and why in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["graph", str(ocr["model"])]) == 2
    assert "--out" in capsys.readouterr().err


def test_the_page_is_self_contained_and_draws_in_chromium_with_an_overlay(ocr, tmp_path, capsys):
    code, report = cli_json(capsys, "compare", str(ocr["model"]), "--against-model", str(ocr["other"]), "--json")
    (tmp_path / "cmp.json").write_text(json.dumps(report))
    page = tmp_path / "graph.html"
    assert main(["graph", str(ocr["model"]), "--out", str(page), "--overlay", str(tmp_path / "cmp.json")]) == 0
    assert "40 nodes, 1 overlay" in capsys.readouterr().out
    html = page.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "the page loads nothing from the network"
    assert "default-src 'none'" in html
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = subprocess.run(
        [CHROMIUM, "--headless", *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--window-size=1200,900", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, env=env,
    )
    body = re.search(r"<body[^>]*>", run.stdout)
    assert body, run.stderr[-2000:]
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(0)))
    assert attrs.get("drawn") == "1" and "error" not in attrs, run.stderr[-2000:]
    assert attrs["nodes"] == "40" and int(attrs["shown"]) > 40  # a small model opens with every module open
    assert attrs["overlay"] == "compare:snr"
    assert "SQNR (dB)" in attrs["legend"] and "where a divergence starts (1)" in attrs["legend"]
    assert not re.search(r"Uncaught|ReferenceError|TypeError", run.stderr)
    assert 'id="gv-legend"' in run.stdout and "best" in run.stdout
