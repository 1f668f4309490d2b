"""The folder ``graph-dap capture`` puts first on ``PYTHONPATH``: its ``sitecustomize`` records the run calls."""
