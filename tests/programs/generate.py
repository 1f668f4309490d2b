"""A program for the language-model tests: greedy generation with a decoder's key/value cache.

``python generate.py MODEL STEPS``: the prompt (tokens 5, 17, 42) runs first with an empty cache, then each
decode step feeds the token chosen last and the cache the step before returned; each step prints its token.
The model is tests/data/llm/tiny_llama.onnx (``past_key_{i}``/``past_value_{i}`` in, ``present_*`` out).
"""

import sys

import numpy as np
import onnxruntime as ort


def generate(path: str, steps: int) -> list[int]:
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    past_names = [i.name for i in session.get_inputs() if i.name.startswith("past_")]
    heads, size = (session.get_inputs()[2].shape[k] for k in (1, 3))
    cache = {name: np.zeros((1, heads, 0, size), np.float32) for name in past_names}
    tokens = [5, 17, 42]
    ids = np.array([tokens], np.int64)
    for step in range(1, steps + 1):
        mask = np.ones((1, len(tokens)), np.int64)
        logits, *present = session.run(None, {"input_ids": ids, "attention_mask": mask, **cache})
        token = int(logits[0, -1].argmax())
        tokens.append(token)
        print(f"step {step}: token {token}", flush=True)
        cache = dict(zip(past_names, present))
        ids = np.array([[token]], np.int64)
    return tokens


if __name__ == "__main__":
    print("tokens:", " ".join(map(str, generate(sys.argv[1], int(sys.argv[2])))), flush=True)
