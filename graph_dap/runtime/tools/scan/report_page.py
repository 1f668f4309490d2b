"""The report page's HTML, style and script: package data files in ``page/``, kept apart from the Python that fills them in.

``report.html`` has the places ``{title}``, ``{style}``, ``{data}`` and ``{script}``
(:meth:`str.format`); ``report.js`` reads the embedded JSON, draws the plots into SVG and
fills the tables; when it is done, ``<body data-drawn="1">`` (and ``data-error`` if
something threw): what a test in a real browser waits for.
"""

from __future__ import annotations

import functools
from importlib import resources


@functools.cache
def _text(name: str) -> str:
    return resources.files("graph_dap.runtime.tools.scan").joinpath("page", name).read_text(encoding="utf-8")


def page(title: str, data: str) -> str:
    """The whole page: ``title`` (escaped already) and ``data`` (the JSON, made safe inside a ``<script>``)."""
    return _text("report.html").format(title=title, style=_text("report.css"), data=data, script=_text("report.js"))
