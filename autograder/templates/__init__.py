"""The files the bundle generates, kept as files (``$name`` placeholders, :class:`string.Template`):
the Gradescope zip's entry point and its lines of ``setup.sh``, and nbgrader's configuration."""

from __future__ import annotations

from pathlib import Path
from string import Template

HERE = Path(__file__).parent


def render(name: str, **values) -> str:
    """The template ``name`` (a file beside this module) with every placeholder filled; a missing
    value is an error, never an empty gap."""
    return Template((HERE / name).read_text(encoding="utf-8")).substitute({k: str(v) for k, v in values.items()})
