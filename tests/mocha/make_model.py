"""Builds the chain model (tests/models.py) for the mocha test and prints what the test checks, as JSON.

Expected values come from onnxruntime (tests/models.reference), lines from the
runtime's own listing.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from models import chain_files, reference  # noqa: E402

from graph_dap.runtime import load_graph, render_listing

folder = Path(sys.argv[1])
model, inputs, feeds = chain_files(folder)
values = reference(model, feeds)
listing = render_listing(load_graph(model))
print(
    json.dumps(
        {
            "model": str(model),
            "inputs": str(inputs),
            "listing": str(model.with_suffix(".onnxtxt")),
            "lines": listing.node_lines,
            "aMax": float(values["a"].max()),
            "rMin": float(values["r"].min()),
        }
    )
)
