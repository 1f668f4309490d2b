"""The graph view: the graph as data, overlays from the tools' JSON, and the self-contained page."""
