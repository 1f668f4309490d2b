"""The graph view as one self-contained HTML page: the renderer's bundle, the graph and its overlays inlined.

The bundle (``graphview.js`` beside this module) is the renderer of the VS Code graph view,
built from ``vscode-ext/src/graphview`` by ``vscode-ext/scripts/build.mjs`` and shipped as package
data, so that ``graph-dap graph MODEL --out graph.html`` works from a pip install without Node.
The page loads nothing from the network.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path
from typing import Any

from graph_dap.errors import GraphDapError
from graph_dap.files import write_text_atomic

BUNDLE = "graphview.js"


def bundle() -> str:
    """The renderer's JavaScript."""
    try:
        return resources.files(__package__).joinpath(BUNDLE).read_text(encoding="utf-8")
    except OSError as error:
        raise GraphDapError(f"the graph view's renderer ({BUNDLE}) is missing from this install of graph-dap: {error}") from None


def _inline_json(value: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``</script>``, no ``<!--``."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")


def page_html(data: dict[str, Any], overlays: list[dict[str, Any]]) -> str:
    """The page of a graph document (:func:`~.data.graph_data`) and its overlays."""
    script = bundle().replace("</script", "<\\/script")
    title = html.escape(f"{data.get('model', 'model')}: graph-dap graph")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
        "style-src 'unsafe-inline'; img-src data: blob:\">\n"
        f"<title>{title}</title>\n</head>\n<body class=\"graph-page\">\n"
        f"<script type=\"application/json\" id=\"graph-data\">{_inline_json(data)}</script>\n"
        f"<script type=\"application/json\" id=\"graph-overlays\">{_inline_json(overlays)}</script>\n"
        f"<script>{script}</script>\n</body>\n</html>\n"
    )


def write_page(out: str | Path, data: dict[str, Any], overlays: list[dict[str, Any]]) -> int:
    """Writes the page to ``out`` (to a temporary name, then renamed); returns its size in bytes."""
    text = page_html(data, overlays)
    write_text_atomic(out, text)
    return len(text.encode("utf-8"))
