"""Text tables for the terminal and Markdown tables for READMEs and notes."""

from __future__ import annotations


def render_table(header: list[str], rows: list[list[str]]) -> str:
    """Fixed-width text table; first column left-aligned, the others right-aligned."""
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"row {row!r} does not match header {header!r}")
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]

    def line(cells: list[str]) -> str:
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def render_markdown(header: list[str], rows: list[list[str]]) -> str:
    """Markdown table, cells right-aligned to the widest in their column."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).rjust(w) for c, w in zip(cells, widths)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), sep, *(line(r) for r in rows)])


def fixed_point(value: float) -> str:
    """No decimals from 100 up, one from 10, two below."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"
