"""The report's line charts (pure): inline SVG that fills the page's
column (a ``viewBox``, ``width: 100%``), a series per task, each told
apart by its colour, dash pattern and marker shape, so that a line drawn
under another (two workers that logged the same loss) still shows: the
dash patterns interleave, and the markers, outlines of different sizes,
nest on a shared point or, along a long line, take turns. A
legend above each chart names the series; clicking an entry hides or
shows its series (``TOGGLE_SCRIPT``, a few lines of inline JavaScript:
nothing is fetched, the report stays one file that works offline; without
JavaScript every series is drawn).
"""

import dataclasses
import html
import math
from collections.abc import Sequence

# A series' style is its index's colour, dash pattern and marker: 8 x 7 x 7
# combinations before two series look alike.
COLORS = ("#3b7dd8", "#d1372f", "#2e9d4f", "#e8871e", "#8a4fd1", "#1aa3a3", "#b5479b",
          "#6b7b2e")
DASHES = ("none", "9 4", "2 3", "12 3 3 3", "5 5", "1 6", "14 4 4 4 4 4")
MARKERS = ("circle", "square", "triangle", "diamond", "cross", "plus", "triangle-down")
MAX_MARKERS = 24    # markers on one segment at most: past that, spread along it

WIDTH = 1000        # the viewBox's width; the chart is drawn at the column's
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 12, 30

CSS = """
figure.chart { margin: 12px 0 24px; }
figure.chart figcaption { font-weight: 600; margin-bottom: 4px; }
svg.chart, svg.timeline { display: block; width: 100%; height: auto; }
.toggles button { font: inherit; font-size: 13px; color: #1d2330; background: #fff;
                  border: 1px solid #d5d9e0; border-radius: 4px; padding: 1px 8px 1px 4px;
                  margin: 0 6px 4px 0; cursor: pointer; }
.toggles button[aria-pressed="false"] { opacity: 0.45; text-decoration: line-through; }
.toggles svg { vertical-align: -3px; margin-right: 4px; }
g.series.hidden { display: none; }
"""

# Hides or shows the series of a legend entry, in its chart only.
TOGGLE_SCRIPT = """<script>
document.addEventListener("click", function (event) {
  var button = event.target.closest ? event.target.closest("button[data-series]") : null;
  if (!button) { return; }
  var shown = button.getAttribute("aria-pressed") === "false";
  button.setAttribute("aria-pressed", shown ? "true" : "false");
  var chart = button.closest("figure");
  chart.querySelectorAll('g.series[data-series="' + button.getAttribute("data-series") + '"]')
    .forEach(function (series) { series.classList.toggle("hidden", !shown); });
});
</script>"""

Segment = list[tuple[float, float]]


@dataclasses.dataclass
class Series:
    """One line of a chart: ``name`` (the task), its ``segments`` of (x, y)
    points (a gap between them: a value that was not finite, another
    attempt) and ``note``, said beside its name in the legend."""
    name: str
    segments: list[Segment]
    note: str = ""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def style(index: int) -> tuple[str, str, str]:
    """(colour, dash pattern, marker shape) of the ``index``-th series."""
    return (COLORS[index % len(COLORS)], DASHES[index % len(DASHES)],
            MARKERS[index % len(MARKERS)])


def marker_size(index: int) -> float:
    """The ``index``-th series' marker size: markers of series drawn on the
    same point nest (a circle inside a larger square) rather than hide."""
    return 3.5 + 1.3 * (index % 3)


def marker(shape: str, x: float, y: float, color: str, r: float = 4.0) -> str:
    """An outline of ``shape`` centred on (x, y), not filled: markers drawn
    on the same point show every outline."""
    paint = 'fill="none" stroke="%s" stroke-width="1.6"' % color
    if shape == "circle":
        return '<circle cx="%.1f" cy="%.1f" r="%.1f" %s/>' % (x, y, r, paint)
    if shape == "square":
        d = "M%.1f %.1fh%.1fv%.1fh%.1fZ" % (x - r, y - r, 2 * r, 2 * r, -2 * r)
    elif shape == "triangle":
        d = "M%.1f %.1fL%.1f %.1fL%.1f %.1fZ" % (x, y - r * 1.2, x + r * 1.1, y + r * 0.8,
                                                  x - r * 1.1, y + r * 0.8)
    elif shape == "triangle-down":
        d = "M%.1f %.1fL%.1f %.1fL%.1f %.1fZ" % (x, y + r * 1.2, x + r * 1.1, y - r * 0.8,
                                                  x - r * 1.1, y - r * 0.8)
    elif shape == "diamond":
        d = "M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ" % (
            x, y - r * 1.3, x + r * 1.1, y, x, y + r * 1.3, x - r * 1.1, y)
    elif shape == "cross":
        return ('<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" fill="none" stroke="%s" '
                'stroke-width="2"/>' % (x - r, y - r, x + r, y + r, x - r, y + r, x + r, y - r,
                                        color))
    else:   # plus
        return ('<path d="M%.1f %.1fH%.1fM%.1f %.1fV%.1f" fill="none" stroke="%s" '
                'stroke-width="2"/>' % (x - r * 1.2, y, x + r * 1.2, x, y - r * 1.2, y + r * 1.2,
                                        color))
    return '<path d="%s" %s/>' % (d, paint)


def marked(count: int, index: int, series: int) -> list[int]:
    """Which of a segment's ``count`` points carry a marker: every one of
    a short segment; of a long one MAX_MARKERS spread along it, those of
    the ``index``-th of ``series`` shifted by its share of the spacing, so
    that lines drawn over each other show their markers in turn."""
    if count <= MAX_MARKERS:
        return list(range(count))
    step = count / MAX_MARKERS
    shift = step * (index % max(series, 1)) / max(series, 1)
    return sorted({min(count - 1, int(shift + k * step)) for k in range(MAX_MARKERS)})


def nice_ticks(low: float, high: float, count: int = 7) -> list[float]:
    """Round values from ``low`` to ``high`` (about ``count`` of them)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    # (high - low) overflows to inf for values near the float's bounds.
    raw = high / max(count - 1, 1) - low / max(count - 1, 1)
    if not math.isfinite(raw) or raw <= 0:
        return [low, high]
    power = 10.0 ** math.floor(math.log10(raw))   # a float: an int past 1e308 overflows below
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks: list[float] = []
    value = first
    while value <= high + step * 1e-6 and len(ticks) < 50:
        ticks.append(0.0 if abs(value) < step * 1e-9 else value)
        value = first + step * len(ticks)
    return ticks


def _legend(caption: str, series: Sequence[Series]) -> str:
    entries = []
    for index, line in enumerate(series):
        color, dash, shape = style(index)
        sample = ('<svg width="48" height="14" viewBox="0 0 48 14" aria-hidden="true">'
                  '<path d="M1 7H16M32 7H47" fill="none" stroke="%s" stroke-width="2" '
                  'stroke-dasharray="%s"/>%s</svg>'
                  % (color, dash, marker(shape, 24, 7, color, min(marker_size(index), 5.5))))
        entries.append('<button type="button" data-series="%d" aria-pressed="true" '
                       'title="hide or show %s">%s%s%s</button>'
                       % (index, _e(line.name), sample, _e(line.name),
                          ' <span class="muted">%s</span>' % _e(line.note) if line.note else ""))
    return ('<div class="toggles" role="group" aria-label="%s">%s</div>'
            % (_e("series of %s" % caption), "".join(entries)))


def line_chart(label: str, caption: str, kind: str, series: Sequence[Series],
               x_range: tuple[float, float], x_ticks: Sequence[tuple[float, str]],
               y_range: tuple[float, float], y_unit: str = "", height: int = 220) -> str:
    """A ``<figure>``: ``caption``, the legend, and the chart (``label``: its
    aria-label) of ``series`` over ``x_range`` (ticks ``x_ticks``: (x,
    text)) and ``y_range``; each segment a ``<polyline class="KIND"
    data-task="NAME">``, a series' segments and markers in a ``<g
    class="series" data-series="INDEX">``."""
    (x_low, x_high), (y_low, y_high) = x_range, y_range
    # Halves: a span near the float's bounds (a diverging loss, 1e308) was
    # inf, and its points' coordinates inf or nan, the line not drawn.
    x_half, y_half = max(x_high / 2 - x_low / 2, 5e-13), max(y_high / 2 - y_low / 2, 5e-13)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, height - TOP - BOTTOM

    def x(value: float) -> float:
        return LEFT + plot_w * ((min(max(value, x_low), x_high) / 2 - x_low / 2) / x_half)

    def y(value: float) -> float:
        return TOP + plot_h * ((y_high / 2 - min(max(value, y_low), y_high) / 2) / y_half)

    parts = ['<svg class="chart" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s">'
             % (WIDTH, height, _e(label)),
             '<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#e3e6eb"/>'
             % (LEFT, TOP, plot_w, plot_h)]
    for value in nice_ticks(y_low, y_high):
        parts.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#f0f1f4"/>'
                     '<text x="%d" y="%.1f" font-size="11" fill="#5b6475" text-anchor="end">'
                     '%s</text>' % (LEFT, y(value), WIDTH - RIGHT, y(value), LEFT - 6,
                                    y(value) + 4, _e("%.4g%s" % (value, y_unit))))
    for value, text in x_ticks:
        parts.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#f0f1f4"/>'
                     '<text x="%.1f" y="%d" font-size="11" fill="#5b6475" '
                     'text-anchor="middle">%s</text>'
                     % (x(value), TOP, x(value), TOP + plot_h, x(value), height - 10, _e(text)))
    for index, line in enumerate(series):
        color, dash, shape = style(index)
        parts.append('<g class="series" data-series="%d"><title>%s</title>'
                     % (index, _e(line.name)))
        for segment in line.segments:
            points = " ".join("%.1f,%.1f" % (x(a), y(b)) for a, b in segment)
            parts.append('<polyline class="%s" data-task="%s" points="%s" fill="none" '
                         'stroke="%s" stroke-width="2" stroke-dasharray="%s" '
                         'stroke-linejoin="round"/>' % (kind, _e(line.name), points, color, dash))
            parts += [marker(shape, x(segment[i][0]), y(segment[i][1]), color,
                             marker_size(index))
                      for i in marked(len(segment), index, len(series))]
        parts.append("</g>")
    parts.append("</svg>")
    return ('<figure class="chart"><figcaption>%s</figcaption>%s%s</figure>'
            % (_e(caption), _legend(caption, series), "".join(parts)))


__all__ = ["Series", "CSS", "TOGGLE_SCRIPT", "style", "marker", "marker_size", "marked",
           "nice_ticks",
           "line_chart"]
