"""The one thing pyproject.toml does not say: the one-pass kernels of tensor statistics and compare's metrics, plain C
that graph_dap loads with ctypes (no Python headers needed). Optional: where no C compiler is at hand the install goes
on, and the same numbers come from numpy (graph_dap/runtime/passes/__init__.py)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "graph_dap.runtime.passes._passes",
            sources=["graph_dap/runtime/passes/_passes.c"],
            # no fused multiply-adds: each operation rounded on its own, as numpy's are
            extra_compile_args=["-O3", "-ffp-contract=off"],
            libraries=["m"],
            optional=True,
        )
    ]
)
