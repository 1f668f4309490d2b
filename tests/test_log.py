"""graph-dap's own logging: per-module levels from GRAPH_DAP_LOG, a prefix on every line, nothing when off."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import onnx
import pytest
from models import chain_model

from graph_dap import log


@pytest.fixture
def stream():
    out = io.StringIO()
    yield out
    log.configure("", None)


def test_levels_follow_the_most_specific_module_prefix(stream):
    log.configure("adapter=2,runtime.engine=3,runtime=1", stream)
    assert log.get_logger("adapter").level == 2
    assert log.get_logger("adapter.server").level == 2
    assert log.get_logger("graph_dap.runtime.engine").level == 3  # __name__ works
    assert log.get_logger("runtime.session").level == 1
    assert log.get_logger("runtime.engineering").level == 1  # a prefix is a dotted part, not a substring
    assert log.get_logger("cli").level == 0


def test_a_bare_level_and_level_names_apply(stream):
    log.configure("debug", stream)
    assert log.get_logger("anything.at.all").level == log.DEBUG
    log.configure("*=1,runtime.dump=trace,adapter=off", stream)
    assert log.get_logger("cli").level == log.INFO
    assert log.get_logger("runtime.dump").level == log.TRACE
    assert log.get_logger("adapter").level == 0


def test_loggers_made_before_configure_follow_it(stream):
    logger = log.get_logger("tests.early")
    log.configure("tests=2", stream)
    assert logger.level == 2
    log.configure("", stream)
    assert logger.level == 0


def test_bad_items_are_reported_once_and_ignored(stream, capsys):
    log.configure("adapter=2,bogus,runtime=loud", stream)
    err = capsys.readouterr().err
    assert "GRAPH_DAP_LOG" in err and "'runtime=loud'" in err
    assert log.get_logger("adapter").level == 2
    # "bogus" alone reads as a level for every module, which it is not: ignored too
    assert "'bogus'" in err and log.get_logger("cli").level == 0


class _Counting:
    def __init__(self) -> None:
        self.formatted = 0

    def __str__(self) -> str:
        self.formatted += 1
        return "counted"


def test_disabled_calls_write_nothing_and_format_nothing(stream):
    log.configure("tests.quiet=1", stream)
    logger = log.get_logger("tests.quiet")
    arg = _Counting()
    logger.debug("value %s", arg)
    logger.trace("value %s", arg)
    logger.log(3, "value %s", arg)
    assert arg.formatted == 0 and stream.getvalue() == ""
    logger.info("value %s", arg)
    assert arg.formatted == 1 and "value counted" in stream.getvalue()


def test_every_line_carries_the_prefix_and_the_context(stream):
    log.configure("tests=3", stream)
    logger = log.get_logger("tests.ctx")
    with log.context("req=7"), log.context("node=conv"):
        logger.debug("first line\nsecond line")
    logger.info("outside")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    for line in lines[:2]:
        assert line.startswith(f"[graph-dap {os.getpid()} +") and "tests.ctx req=7 node=conv] D " in line
    assert lines[0].endswith("first line") and lines[1].endswith("second line")
    assert "tests.ctx] I outside" in lines[2]


def test_a_bad_format_string_does_not_raise(stream):
    log.configure("tests=1", stream)
    log.get_logger("tests.fmt").info("%d items", "many")
    assert "format failed" in stream.getvalue()


def _dump_cli(tmp_path, env_extra):
    model = tmp_path / "chain.onnx"
    onnx.save(chain_model(), str(model))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPH_DAP_LOG")}
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-m", "graph_dap", "dump", str(model), "--out", str(tmp_path / "run.npz")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_environment_variable_turns_on_one_module(tmp_path):
    r = _dump_cli(tmp_path, {"GRAPH_DAP_LOG": "runtime.tools.dump=3"})
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("[graph-dap ")]
    assert any(" runtime.tools.dump] T node conv: " in ln for ln in lines)
    assert any(" runtime.tools.dump] I dump " in ln for ln in lines)
    assert all(" runtime.tools.dump] " in ln for ln in lines)


def test_logging_is_off_by_default(tmp_path):
    r = _dump_cli(tmp_path, {})
    assert r.returncode == 0, r.stderr
    assert "[graph-dap " not in r.stderr


def test_the_log_file_variable_sends_lines_to_a_file(tmp_path):
    target = tmp_path / "graph-dap.log"
    r = _dump_cli(tmp_path, {"GRAPH_DAP_LOG": "runtime=1", "GRAPH_DAP_LOG_FILE": str(target)})
    assert r.returncode == 0, r.stderr
    assert "[graph-dap " not in r.stderr
    assert " runtime.tools.dump] I dump " in target.read_text()
