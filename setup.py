"""The one thing pyproject.toml does not say: quant's one-pass kernels, plain C that graph_dap loads with ctypes
(no Python headers needed). Optional: where no C compiler is at hand the install goes on, and compare computes
the same with numpy (graph_dap/runtime/tools/quant/passes.py)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "graph_dap.runtime.tools.quant._passes",
            sources=["graph_dap/runtime/tools/quant/_passes.c"],
            extra_compile_args=["-O3"],
            libraries=["m"],
            optional=True,
        )
    ]
)
