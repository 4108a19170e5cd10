"""HTML pieces for `page`: every string from outside escaped in one place, tables, sections,
and matplotlib's SVG made fit to sit inline in a page that is also well-formed XML.

A page is one file that a colleague opens from a mail: no script, no style sheet, font or
image fetched from anywhere, and nothing from a record (tags, host names, paths, commands)
read as markup.  `esc` is the one way text enters the page; the SVG of a plot comes from
matplotlib's XML writer (which escapes its text) and is checked again here.
"""

from __future__ import annotations

import html
import re
from typing import Iterable, Sequence

from mpiwrite.text import printable


def esc(text) -> str:
    """Text from anywhere as HTML text or an attribute value: control and invisible
    characters made visible (text.printable), then & < > " ' escaped."""
    return html.escape(printable(text), quote=True)


def table(head: Sequence[str], rows: Iterable[Sequence[str]], right: Iterable[int] = (),
          cls: str = "") -> str:
    """A table of plain-text cells (each escaped here); columns in `right` right-aligned."""
    right = set(right)

    def cell(tag: str, i: int, text) -> str:
        align = ' class="num"' if i in right else ""
        return f"<{tag}{align}>{esc(text)}</{tag}>"

    out = [f'<table{f" class={chr(34)}{cls}{chr(34)}" if cls else ""}>', "<thead><tr>"
           + "".join(cell("th", i, h) for i, h in enumerate(head)) + "</tr></thead>", "<tbody>"]
    out += ["<tr>" + "".join(cell("td", i, c) for i, c in enumerate(r)) + "</tr>" for r in rows]
    out.append("</tbody></table>")
    return "\n".join(out)


def para(text, cls: str = "") -> str:
    return f'<p{f" class={chr(34)}{cls}{chr(34)}" if cls else ""}>{esc(text)}</p>'


def items(lines: Iterable) -> str:
    return "<ul>\n" + "\n".join(f"<li>{esc(x)}</li>" for x in lines) + "\n</ul>"


def pre(text) -> str:
    """Text of several lines as the terminal shows it: each line escaped (a line's own
    control characters made visible), the line breaks kept."""
    return "<pre>" + "\n".join(esc(line) for line in str(text).split("\n")) + "</pre>"


def section(anchor: str, title: str, body: str) -> str:
    """A section with a heading; `anchor` is ours (letters and dashes), never a record's."""
    if not re.fullmatch(r"[a-z][a-z0-9-]*", anchor):
        raise ValueError(f"section anchor {anchor!r}")
    return f'<section id="{anchor}">\n<h2>{esc(title)}</h2>\n{body}\n</section>'


STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 75em; padding: 0 1em;
       color: #111; background: #fff; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left;
         vertical-align: top; }
th { background: #f0f0f0; } td.num, th.num { text-align: right; }
tr.real td { background: #fff3d6; }
pre { background: #f6f6f6; padding: 0.5em; font-size: 0.85em; white-space: pre-wrap;
      overflow-wrap: anywhere; }
td, th { overflow-wrap: anywhere; }
figure { margin: 0.5em 1% 1em 0; display: inline-block; vertical-align: top; width: 48%;
         min-width: 28em; } figcaption { font-size: 0.9em; color: #444; }
figure svg { max-width: 100%; height: auto; display: block; border: 1px solid #eee; }
figure svg * { stroke-linejoin: round; stroke-linecap: butt; }
.chart svg { width: 100%; max-width: 60em; height: auto; display: block; }
.note { color: #555; font-size: 0.9em; }
"""


def document(title: str, body: Sequence[str]) -> str:
    """The whole page: HTML5 that is also well-formed XML (every element closed, only the
    five XML entities), its style inline, no script and no reference out of the file."""
    return "\n".join(['<!DOCTYPE html>', '<html lang="en">', "<head>",
                      '<meta charset="utf-8" />',
                      '<meta name="viewport" content="width=device-width, initial-scale=1" />',
                      # what a page from a record may do: nothing beyond its own inline style
                      '<meta http-equiv="Content-Security-Policy" content="default-src '
                      "'none'; style-src 'unsafe-inline'; img-src data:\" />",
                      f"<title>{esc(title)}</title>", f"<style>{STYLE}</style>", "</head>",
                      "<body>", f"<h1>{esc(title)}</h1>", *body, "</body>", "</html>", ""])


def _nice_step(top: float) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) giving about five ticks to `top`."""
    import math

    raw = top / 5 if top > 0 else 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def dots(rows: Sequence[tuple], axis: str, label: str) -> str:
    """A dot-and-whisker chart drawn here (no plotting library: every install has it), one
    line per row in the order given: (label, mean, lo, hi, mark), mark one of "base",
    "real", "noise" or ""; the whisker is the row's interval, the axis starts at zero.
    Every text escaped; numbers only from the rows' floats."""
    finite = [x for _l, m, lo, hi, _k in rows for x in (m, lo, hi) if x == x and x is not None]
    top = max(finite + [0.0]) or 1.0
    step = _nice_step(top)
    top = step * -(-top // step)
    left, width, line, head = 300, 700, 26, 30
    height = head + line * len(rows) + 34
    x = lambda v: left + (width - left - 20) * max(v, 0.0) / top  # noqa: E731
    colour = {"base": "#111", "real": "#c05800", "noise": "#777"}
    out = [f'<svg viewBox="0 0 {width} {height}" '
           f'role="img" aria-label="{esc(label)}" font-family="sans-serif" font-size="12">']
    ticks, v = [], 0.0
    while v <= top + step / 2:
        ticks.append(v)
        v += step
    for t in ticks:
        out.append(f'<line x1="{x(t):.1f}" y1="{head - 8}" x2="{x(t):.1f}" '
                   f'y2="{height - 30}" stroke="#e4e4e4" />')
        out.append(f'<text x="{x(t):.1f}" y="{height - 16}" text-anchor="middle" '
                   f'fill="#444">{t:g}</text>')
    out.append(f'<text x="{left}" y="{height - 2}" fill="#444">{esc(axis)}</text>')
    for i, (name, mean, lo, hi, mark) in enumerate(rows):
        y = head + line * i + line / 2
        shown = str(name) if len(str(name)) <= 44 else str(name)[:43] + "…"
        tail = " (base)" if mark == "base" else ""
        weight = ' font-weight="bold"' if mark == "base" else ""
        out.append(f'<text x="{left - 10}" y="{y + 4:.1f}" text-anchor="end"{weight}>'
                   f'<title>{esc(name)}</title>{esc(shown + tail)}</text>')
        if mean is None or mean != mean:
            continue
        c = colour.get(mark, "#1f5fa8")
        if lo is not None and hi is not None and lo == lo and hi == hi:
            out.append(f'<line x1="{x(lo):.1f}" y1="{y:.1f}" x2="{x(hi):.1f}" y2="{y:.1f}" '
                       f'stroke="{c}" stroke-width="2" />')
            for end in (lo, hi):
                out.append(f'<line x1="{x(end):.1f}" y1="{y - 6:.1f}" x2="{x(end):.1f}" '
                           f'y2="{y + 6:.1f}" stroke="{c}" stroke-width="2" />')
        out.append(f'<circle cx="{x(mean):.1f}" cy="{y:.1f}" r="5" fill="{c}" />')
    out.append("</svg>")
    return '<div class="chart">' + "\n".join(out) + "</div>"


class UnsafeSvg(ValueError):
    """matplotlib's SVG held something a page must not carry (never seen: a guard)."""


# what must never reach a page from a plot: scripts, foreign markup, event attributes,
# references out of the document (href to anything but an id of its own)
_UNSAFE = re.compile(r"<\s*(script|foreignObject|iframe|image|a)\b|<[^>]*\son[a-z]+\s*=|"
                     r"href\s*=\s*\"(?!#)|url\(\s*(?!#)", re.IGNORECASE)


def inline_svg(svg: str, prefix: str, label: str) -> str:
    """matplotlib's SVG as an element of the page: the XML prolog, DOCTYPE, comments, style
    and namespace declarations dropped (HTML's parser puts <svg> in its namespace; the
    page's style holds the one rule), xlink:href as SVG 2's href, and every id prefixed so
    that the plots of one page do not share ids.  `label` becomes its accessible name."""
    if not re.fullmatch(r"[a-z][a-z0-9-]*", prefix):
        raise ValueError(f"svg prefix {prefix!r}")
    start = svg.find("<svg")
    if start < 0:
        raise UnsafeSvg("no <svg> element")
    s = svg[start:]
    s = re.sub(r"<!--.*?-->", "", s, flags=re.DOTALL)
    s = re.sub(r'<style type="text/css">[^<]*</style>', "", s)
    s = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", s)
    s = s.replace("xlink:href=", "href=")
    s = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}-{m.group(1)}"', s)
    s = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}-{m.group(1)}"', s)
    s = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}-{m.group(1)})", s)
    if _UNSAFE.search(s):
        raise UnsafeSvg(f"plot {prefix}: markup a page must not carry")
    s = s.replace("<svg ", f'<svg role="img" aria-label="{esc(label)}" class="plot" ', 1)
    return s.strip()


def figure(svg: str, prefix: str, caption: str) -> str:
    return (f'<figure id="{prefix}">\n{inline_svg(svg, prefix, caption)}\n'
            f"<figcaption>{esc(caption)}</figcaption>\n</figure>")
