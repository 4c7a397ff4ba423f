"""The digest's chart, one PNG: occurrences per class in each of the last 8 weeks (stacked bars) above
a node x class heatmap of the same 8 weeks.

Drawn with matplotlib's object API on the Agg canvas (no pyplot, so no global figure state and safe in
a server thread), at a fixed size: CHART_SIZE pixels whatever the data. PNG metadata carries no
software version or date, so the same digest always gives the same bytes.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from bot.model.digest import Digest, Grid
from bot.render.safe_text import strip_controls

if TYPE_CHECKING:  # matplotlib is imported when a chart is drawn: it costs half a second
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WIDTH_IN, HEIGHT_IN, DPI = 12.0, 10.0, 100
CHART_SIZE = (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))
LABEL_CHARS = 40


def _label(text: str) -> str:
    text = strip_controls(text, keep_newlines=False)
    # matplotlib reads $...$ as math text; a hostname or class never means that.
    text = text.replace("$", r"\$")
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def digest_chart_png(digest: Digest) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    weekly, heatmap = figure.subplots(2, 1, height_ratios=(1, 1.2))
    _weekly_bars(weekly, digest.weekly)
    _heatmap(figure, heatmap, digest.heatmap)
    figure.suptitle(f"NCCL incidents, 8 weeks to {digest.as_of:%Y-%m-%d} ({digest.week})")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _weekly_bars(axes: Axes, grid: Grid) -> None:
    from matplotlib.ticker import MaxNLocator

    positions = list(range(len(grid.columns)))
    axes.set_title("Occurrences per class per week")
    axes.set_xticks(positions, [_label(c) for c in grid.columns])
    axes.set_ylabel("occurrences")
    if grid.empty:
        axes.text(0.5, 0.5, "no incidents", ha="center", va="center", transform=axes.transAxes)
        return
    bottom = [0] * len(positions)
    colours = _colours(len(grid.rows))
    for row, (class_id, cells) in enumerate(zip(grid.rows, grid.cells, strict=True)):
        axes.bar(positions, cells, bottom=bottom, label=_label(class_id), color=colours[row])
        bottom = [b + c for b, c in zip(bottom, cells, strict=True)]
    axes.legend(loc="upper left", fontsize="small", ncols=2, frameon=False)
    axes.set_ylim(0, max(bottom) * 1.6 + 1)  # room for the legend above the bars
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))


def _heatmap(figure: Figure, axes: Axes, grid: Grid) -> None:
    axes.set_title("Occurrences per culprit node and class (8 weeks)")
    if grid.empty:
        axes.set_axis_off()
        axes.text(0.5, 0.5, "no incident named a culprit node", ha="center", va="center")
        return
    image = axes.imshow(list(grid.cells), cmap="Reds", aspect="auto", vmin=0)
    axes.set_xticks(range(len(grid.columns)), [_label(c) for c in grid.columns], rotation=30, ha="right")
    axes.set_yticks(range(len(grid.rows)), [_label(r) for r in grid.rows])
    peak = max(max(row) for row in grid.cells)
    for y, row in enumerate(grid.cells):
        for x, count in enumerate(row):
            if count:
                colour = "white" if count > peak / 2 else "black"
                axes.text(x, y, str(count), ha="center", va="center", color=colour, fontsize="small")
    figure.colorbar(image, ax=axes, label="occurrences")


def _colours(count: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    palette = colormaps["tab20"]
    return [palette(i % 20) for i in range(count)]
