"""Quantized and converted models against their float model: pairing, groups, the three errors, weights, sensitivity.

See :mod:`.pairing` (which tensor stands for which), :mod:`.groups` (the nodes between paired
tensors), :mod:`.errors` (accumulated, local and quantization-only error per group),
:mod:`.weights`, :mod:`.sensitivity` and :mod:`.report`.
"""
