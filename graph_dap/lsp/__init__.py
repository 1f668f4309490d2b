"""The language server of graph listings (``graph-dap lsp``): a pygls 2 server over the runtime.

It serves ``.onnxtxt`` listings: each names its model in its header; the model is
loaded with :func:`graph_dap.runtime.loading.load_graph` and rendered with
:func:`graph_dap.runtime.listing.render_listing`, whose line and token maps are what
every feature reads. It never runs the model: live values come from the editor,
which asks the debug adapter (see ``vscode-ext/PROTOCOL.md``).
"""
