"""Markdown tables for the reports."""

from __future__ import annotations


def table(header: list[str], rows: list[list]) -> list[str]:
    """A pipe table as lines: the header, its rule, then one line per row."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(map(str, row)) + " |" for row in rows]
