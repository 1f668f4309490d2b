"""Builds the chain model for the mocha test and prints what the test checks, as JSON.

Expected values come from onnxruntime (tests/dap_client.reference), lines from the
runtime's own listing.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dap_client import chain_model, reference  # noqa: E402

from graph_dap.runtime import load_graph, render_listing

folder = Path(sys.argv[1])
model, inputs, feeds = chain_model(folder)
values = reference(model, feeds)
listing = render_listing(load_graph(model))
print(
    json.dumps(
        {
            "model": str(model),
            "inputs": str(inputs),
            "listing": str(model.with_suffix(".onnxtxt")),
            "lines": listing.node_lines,
            "sumMax": float(values["sum"].max()),
            "reluMin": float(values["relu_out"].min()),
        }
    )
)
