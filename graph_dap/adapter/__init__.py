"""graph-dap's debug adapter: DAP on stdio or TCP, over a runtime in a worker process."""
