"""Export a Llama-architecture decoder with ``torch.onnx.export(..., dynamo=True)``: the tests' language model.

The tests read what this writes and need neither torch nor transformers. To make the files again
(neither is a dependency of graph-dap; use a venv of your own):

    python3 -m venv /tmp/llm && /tmp/llm/bin/pip install torch==2.13.0 onnxscript transformers
    /tmp/llm/bin/python tests/data/make_llm_models.py

It writes ``tests/data/llm/tiny_llama.onnx`` and its external data ``tiny_llama.onnx.data``: a
``transformers`` ``LlamaForCausalLM`` of two layers (hidden size 16, 2 query heads and 1 key/value
head of size 8, MLP of 32, vocabulary 64), random weights (seed 0), with a key/value cache:

- inputs ``input_ids`` (int64 [batch, seq]), ``attention_mask`` (int64 [batch, past + seq]) and
  ``past_key_{i}``, ``past_value_{i}`` (float32 [batch, 1, past, 8]) for each layer ``i``;
  ``past = 0`` (empty tensors) for the prompt, then one token per decode step;
- outputs ``logits`` (float32 [batch, seq, 64]) and ``present_key_{i}``, ``present_value_{i}``.

As a real export, its nodes carry module paths and stack traces (``model.layers.1.mlp.gate_proj``,
``modeling_llama.py``), its weights are ``val_N`` where the exporter folded a transpose, the causal
mask is built once with ``finfo(float32).min``, and the attention is ``scaled_dot_product_attention``
decomposed (MatMul, Add of the mask, Softmax, IsNaN, Where, MatMul). The stack traces' paths are
rewritten to a made-up exporting machine's (``/home/exporter/venv/lib/python3.11/site-packages``).

:func:`export_llama` is also what ``benchmarks/bench_llm.py`` exports its real-size model with.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "llm"
REMOTE_SITE = "/home/exporter/venv/lib/python3.11/site-packages"
TRACE = "pkg.torch.onnx.stack_trace"

#: The fixture's configuration (``transformers.LlamaConfig`` keywords).
TINY = {
    "vocab_size": 64,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 128,
}


def past_names(layers: int) -> list[str]:
    return [f"past_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]


def export_llama(config: dict[str, Any], path: Path, with_past: bool = True, seed: int = 0) -> None:
    """Export a random-initialized ``LlamaForCausalLM`` of ``config`` to ``path`` (weights in ``path.data``).

    ``with_past``: the model takes and returns the key/value cache (one decode step); without, it takes
    ``input_ids`` and ``attention_mask`` and returns the logits (a whole prompt, no cache).
    """
    import onnx
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.cache_utils import DynamicCache

    cfg = LlamaConfig(**config)
    torch.manual_seed(seed)
    llama = LlamaForCausalLM(cfg).eval()
    layers = cfg.num_hidden_layers
    head = cfg.hidden_size // cfg.num_attention_heads

    class Decoder(torch.nn.Module):
        """The model's own submodules under their own names, so that module paths read ``model.layers.0.mlp``."""

        def __init__(self) -> None:
            super().__init__()
            self.model = llama.model
            self.lm_head = llama.lm_head

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *past: torch.Tensor) -> Any:
            cache = None
            if past:
                cache = DynamicCache(config=cfg)
                for i in range(layers):
                    cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=bool(past))
            logits = self.lm_head(out.last_hidden_state)
            if not past:
                return logits
            present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
            return (logits, *present)

    batch, prompt, seq = 1, 3, 2
    ids = torch.randint(0, cfg.vocab_size, (batch, seq))
    names = ["input_ids", "attention_mask"]
    outputs = ["logits"]
    dims: dict[str, Any] = {"input_ids": {1: torch.export.Dim("seq")}}
    if with_past:
        past = tuple(torch.randn(batch, cfg.num_key_value_heads, prompt, head) for _ in range(2 * layers))
        mask = torch.ones(batch, prompt + seq, dtype=torch.int64)
        args: tuple[Any, ...] = (ids, mask, *past)
        names += past_names(layers)
        outputs += [n.replace("past_", "present_") for n in past_names(layers)]
        dims["attention_mask"] = {1: torch.export.Dim("total")}
        dims["past"] = tuple({2: torch.export.Dim("past")} for _ in past)
    else:
        args = (ids, torch.ones(batch, seq, dtype=torch.int64))
        dims["attention_mask"] = {1: torch.export.Dim("seq")}
    with torch.no_grad():
        program = torch.onnx.export(Decoder().eval(), args, dynamo=True, dynamic_shapes=dims, input_names=names, output_names=outputs)
    assert program is not None
    model = program.model_proto
    site = str(Path(torch.__file__).resolve().parent.parent)
    for node in model.graph.node:
        for prop in node.metadata_props:
            if prop.key == TRACE:
                prop.value = prop.value.replace(site, REMOTE_SITE)
    tmp = path.with_name(path.name + ".tmp")
    data = path.name + ".data"
    # as torch.onnx saves: the weights (1 KB and more) in the side file, the shapes and scalars inline
    onnx.save_model(model, str(tmp), save_as_external_data=True, all_tensors_to_one_file=True, location=data, size_threshold=1024)
    os.replace(tmp, path)


def main() -> None:
    import onnx

    HERE.mkdir(exist_ok=True)
    path = HERE / "tiny_llama.onnx"
    (HERE / "tiny_llama.onnx.data").unlink(missing_ok=True)
    export_llama(TINY, path)
    m = onnx.load(str(path), load_external_data=False)
    print(f"{path.name}: {len(m.graph.node)} nodes, {os.path.getsize(path)} + {os.path.getsize(HERE / 'tiny_llama.onnx.data')} bytes")


if __name__ == "__main__":
    sys.exit(main())
