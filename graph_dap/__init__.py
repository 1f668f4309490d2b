"""graph-dap: a debugger for ONNX computation graphs."""

__version__ = "0.1.0"
