"""What a drawn figure shows, read back from its matplotlib artists: each panel's axis labels,
its named series and its marks, with their colours by name. A figure's caption is written from
this (`caption_text`), so it cannot name an axis, a series or a colour the figure does not draw.

An artist is named by its label (what the legend shows) or, for a mark the legend leaves out,
by its gid (`ax.axvline(x, gid="L2 size estimate")`); a text with `gid="note"` says what a
panel lacks. `caption_mismatches` lists what a caption says that its drawing contradicts."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
from matplotlib.collections import Collection, LineCollection, PolyCollection
from matplotlib.colors import rgb_to_hsv, to_rgb
from matplotlib.container import ErrorbarContainer
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

# the words a colour is named with, by hue (degrees, upper bounds) where it has one; seaborn's
# colorblind "red" (vermilion, C3) falls in dark orange, matplotlib's red in red
_HUES = (
    (12, "red"),
    (30, "dark orange"),  # at full brightness: orange
    (45, "orange"),
    (70, "yellow"),
    (170, "green"),
    (255, "blue"),
    (290, "purple"),
    (345, "pink"),
    (360, "red"),
)
# every colour word a caption could use, for the check that it names a drawn colour
COLOUR_VOCABULARY = frozenset(
    {"red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "grey", "gray"}
    | {"black", "white", "cyan", "magenta", "violet", "crimson", "scarlet", "vermilion"}
)
_STYLES = {"-": "", "--": "dashed ", ":": "dotted ", "-.": "dash-dotted ", "None": ""}


def colour_word(colour) -> str:
    """The word for a matplotlib colour, from its hue, saturation and value."""
    h, sat, val = rgb_to_hsv(to_rgb(colour))
    if sat < 0.15 or val < 0.2:
        return "black" if val < 0.25 else "white" if val > 0.95 else "grey"
    word = next(w for bound, w in _HUES if h * 360 < bound)
    if word in ("red", "dark orange", "orange") and sat < 0.6:
        return "brown"
    if word == "dark orange" and val > 0.9:  # matplotlib's bright orange, not vermilion
        return "orange"
    if word == "blue" and sat < 0.75 and val > 0.8:
        return "light blue"
    return word


@dataclass(frozen=True)
class Item:
    """One named series or mark: `kind` is line, band, bars, area, points, vertical line,
    horizontal line, horizontal segments, error bars or map."""

    name: str
    kind: str
    colour: str
    style: str = ""
    error_bars: bool = False  # drawn with error bars of its own (`ax.errorbar`)

    def text(self) -> str:
        bars = " with error bars" if self.error_bars else ""
        return f"{self.name} ({self.colour} {self.style}{self.kind}{bars})"


@dataclass
class Panel:
    title: str
    xlabel: str
    ylabel: str
    log_x: bool = False
    log_y: bool = False
    series: list[Item] = field(default_factory=list)  # named: in the legend, or by gid
    unnamed: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (kind, colour, style)
    notes: list[str] = field(default_factory=list)  # what a panel without data says instead
    right_ylabel: str = ""  # a twin axis sharing the panel
    legend_title: str = ""

    @property
    def colours(self) -> set[str]:
        return {i.colour for i in self.series} | {c for _, c, _ in self.unnamed}

    @property
    def names(self) -> list[str]:
        return [i.name for i in self.series]


def _kind(artist, ax) -> str | None:
    if isinstance(artist, Collection) and not _draws(artist):
        return None  # an empty band (seaborn's interval where each x has one value)
    if isinstance(artist, Line2D):
        transform = artist.get_transform()
        if transform is ax.get_xaxis_transform():
            return "vertical line"
        if transform is ax.get_yaxis_transform():
            return "horizontal line"
        return "line" if artist.get_linestyle() not in ("None", "") else "points"
    if isinstance(artist, LineCollection):
        segs = [s for s in artist.get_segments() if len(s) >= 2]
        if segs and all(np.isclose(s[0][1], s[-1][1]) for s in segs):
            return "horizontal segments"
        if segs and all(np.isclose(s[0][0], s[-1][0]) for s in segs):
            return "vertical line"
        return "line"
    if isinstance(artist, PolyCollection):
        return "band"
    if isinstance(artist, Rectangle):
        return "bars"
    if isinstance(artist, Patch):
        return "area"
    if hasattr(artist, "get_offsets"):
        return "points"
    if isinstance(artist, AxesImage):
        return "map"
    return None


def _draws(collection) -> bool:
    """Whether a collection puts anything on the canvas: paths, and places for them."""
    if not len(collection.get_paths()):
        return False
    return not hasattr(collection, "get_sizes") or len(collection.get_offsets()) > 0


def _named_kind(name: str, handle, ax) -> str:
    """A legend entry's kind: the drawn artist's of that label, else the handle's."""
    for artist, label in _data_artists(ax):
        if label == name:
            return _kind(artist, ax) or "line"
    kind = _kind(handle, ax) or "line"
    return {"bars": "area", "vertical line": "line", "horizontal line": "line"}.get(kind, kind)


def _colour(artist) -> str:
    if isinstance(artist, AxesImage):
        return f"{artist.get_cmap().name}-coloured"
    if isinstance(artist, Line2D):
        return colour_word(artist.get_color())
    if isinstance(artist, Patch):
        face, edge = artist.get_facecolor(), artist.get_edgecolor()
        # a see-through face (a band, a filled histogram) still has its colour; an unfilled
        # outline has only its edge's
        return colour_word(edge if face[3] == 0 else face)
    # a filled mark is the colour of its face (a scatter's points may have black edges); a line
    # collection has no face
    for get in ("get_facecolor", "get_edgecolor", "get_color"):
        colours = np.atleast_2d(getattr(artist, get, lambda: [])())
        if colours.size and colours.shape[1] == 4 and colours[0][3] > 0:
            return colour_word(colours[0])
    return "black"


def _style(artist) -> str:
    get = getattr(artist, "get_linestyle", None)
    style = get() if get else "-"
    if isinstance(style, list):  # collections: a list of (offset, dashes)
        style = "-" if not style or style[0][1] is None else "--"
    return _STYLES.get(style, "")


def _container_labels(ax) -> dict[int, str]:
    """The label each container's first artist is known by: the container's own where it has
    one (`ax.bar(..., label=)`, `ax.errorbar`), else the artist's (`ax.hist` labels its first
    bar). The figure's artists keep their labels."""
    labels = {}
    for container in ax.containers:
        if len(container) and container[0] is not None:
            own = str(container.get_label() or "")
            first = container[0]
            labels[id(first)] = own if own and not own.startswith("_") else first.get_label()
    return labels


def _error_bars(ax) -> set[int]:
    """The artists that draw error bars (the bars and their caps), by id."""
    ids = set()
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer):
            _, caps, bars = container.lines
            ids |= {id(a) for a in (*caps, *bars)}
    return ids


def _data_artists(ax):
    """Each data artist of a panel with the label it is known by; a bar chart's first bar
    stands for its bars."""
    labels = _container_labels(ax)
    for artist in (*ax.get_lines(), *ax.collections):
        yield artist, labels.get(id(artist), artist.get_label())
    seen_bars = set()
    for container in ax.containers:
        if hasattr(container, "patches"):
            seen_bars |= {id(patch) for patch in container.patches}
            if len(container):
                yield container[0], labels[id(container[0])]
    for patch in ax.patches:
        if id(patch) not in seen_bars:
            yield patch, patch.get_label()
    for image in ax.images:
        yield image, image.get_label()


def describe_axes(ax) -> Panel:
    panel = Panel(
        ax.get_title(),
        ax.get_xlabel(),
        ax.get_ylabel(),
        log_x=ax.get_xscale() == "log",
        log_y=ax.get_yscale() == "log",
    )
    legend = ax.get_legend()
    named = set()
    error_bars = _error_bars(ax)
    with_errors = {
        str(c.get_label())
        for c in ax.containers
        if isinstance(c, ErrorbarContainer) and any(id(b) in error_bars for b in c.lines[2])
    }
    if legend is not None:
        panel.legend_title = legend.get_title().get_text()
        for text, handle in zip(legend.texts, legend.legend_handles, strict=False):
            name = text.get_text()
            kind = _named_kind(name, handle, ax)
            errors = name in with_errors
            panel.series.append(Item(name, kind, _colour(handle), _style(handle), errors))
            named.add(name)
    drew = False
    for artist, label in _data_artists(ax):
        kind = _kind(artist, ax)
        if kind is None or not artist.get_visible():
            continue
        drew = True
        if id(artist) in error_bars:
            kind = "error bars"
        label = str(label or "")
        name = label if label and not label.startswith("_") else artist.get_gid()
        if name in named:  # in the legend
            continue
        colour, style = _colour(artist), _style(artist)
        item = Item(name, kind, colour, style, name in with_errors) if name else None
        if item in panel.series:  # one named mark drawn several times
            continue
        if item:
            panel.series.append(item)
        else:
            key = (kind, colour, style)
            panel.unnamed[key] = panel.unnamed.get(key, 0) + 1
    if not drew:
        panel.notes = [t.get_text() for t in ax.texts if t.get_text().strip()]
    else:  # what a panel says where it draws nothing (`gid="note"`)
        panel.notes = [t.get_text() for t in ax.texts if t.get_gid() == "note"]
    return panel


def describe(fig) -> list[Panel]:
    """The panels a figure draws, in reading order; a twin axis joins its panel."""
    panels: list[Panel] = []
    at: dict[tuple[float, ...], Panel] = {}
    for ax in fig.axes:
        if not ax.get_visible() or hasattr(ax, "_colorbar"):
            continue
        box = tuple(np.round(ax.get_position().bounds, 3))
        panel = describe_axes(ax)
        if box in at and not panel.xlabel and panel.ylabel:  # a twinx() axis
            host = at[box]
            host.right_ylabel = panel.ylabel
            host.series += [i for i in panel.series if i.name not in host.names]
            for key, n in panel.unnamed.items():
                host.unnamed[key] = host.unnamed.get(key, 0) + n
            continue
        at.setdefault(box, panel)
        panels.append(panel)
    return panels


def colourbar_labels(fig) -> list[str]:
    return [ax.get_ylabel() for ax in fig.axes if hasattr(ax, "_colorbar") and ax.get_ylabel()]


def _plural(kind: str, n: int) -> str:
    return kind if n == 1 or kind.endswith("s") else kind + "s"


def _axes_text(p: Panel) -> str:
    def axis(label: str, log: bool) -> str:
        return f"{label} (log scale)" if log and label else label

    y, x = axis(p.ylabel, p.log_y), axis(p.xlabel, p.log_x)
    if p.right_ylabel:
        y = f"{y} (left) and {p.right_ylabel} (right)"
    if y and x:
        return f"{y} against {x}"
    return y or x


def panel_text(p: Panel) -> str:
    if p.notes and not p.series and not p.unnamed:  # a panel that draws nothing
        said = "no data drawn: " + "; ".join(" ".join(n.split()) for n in p.notes)
        return f"{_axes_text(p)}; {said}" if _axes_text(p) else said
    parts = [_axes_text(p)] if _axes_text(p) else []
    if p.series:
        by = f"by {p.legend_title}: " if p.legend_title else ""
        parts.append(by + ", ".join(i.text() for i in p.series))
    if p.notes:
        parts.append("; ".join(" ".join(n.split()) for n in p.notes))
    for (kind, colour, style), n in _unnamed_marks(p):
        count = "" if n == 1 else f"{n} "
        parts.append(f"{count}{colour} {style}{_plural(kind, n)}".strip())
    return "; ".join(parts)


def _unnamed_marks(p: Panel) -> list[tuple[tuple[str, str, str], int]]:
    """The unnamed marks a panel's text names: not the pieces or repeats of a named series."""
    marks = []
    for (kind, colour, style), n in p.unnamed.items():
        if kind in ("line", "points", "band", "error bars") and colour in {
            i.colour for i in p.series
        }:
            continue  # a named series' own pieces (a histogram's fill, a line's markers)
        if any(i.kind == kind and i.colour == colour for i in p.series):
            continue  # more of a named mark (only the first is in the legend)
        marks.append(((kind, colour, style), n))
    return marks


def _signature(p: Panel) -> tuple:
    """What panels must share to be described once: their axes, named series, notes and
    unnamed marks (a panel with a mark of its own is described on its own)."""
    marks = tuple(sorted(_unnamed_marks(p)))
    return (p.xlabel, p.ylabel, p.right_ylabel, tuple(p.names), tuple(p.notes), marks)


def _share_labels(panels: list[Panel]) -> None:
    """Panels of shared axes label only the outer ones: an inner panel drawing the same series
    takes the label of one that has it, and one with the same x axis its y label."""

    def drawn(p: Panel) -> tuple:
        return (tuple(p.names), tuple(sorted(p.unnamed)))

    for p in panels:
        for q in panels:
            if q is not p and drawn(q) == drawn(p):
                p.xlabel = p.xlabel or q.xlabel
                p.ylabel = p.ylabel or q.ylabel
    # a row's inner panels, whatever they draw, take the y label of a panel with their x label
    # (cache_instances labels only the row's first y axis)
    for p in panels:
        if p.xlabel and not p.ylabel:
            p.ylabel = next((q.ylabel for q in panels if q.xlabel == p.xlabel and q.ylabel), "")


def caption_text(fig, stem: str, prose: str = "") -> str:
    """The caption of a drawn figure: what each panel draws, then the prose that explains it.
    Panels that draw the same axes and series are described once."""
    panels = describe(fig)
    _share_labels(panels)
    groups: list[list[Panel]] = []
    for p in panels:
        for g in groups:
            if _signature(g[0]) == _signature(p):
                g.append(p)
                break
        else:
            groups.append([p])
    sentences = []
    for g in groups:
        text = panel_text(g[0])
        if len(g) > 1:
            head = f"each of {len(g)} panels"
        elif len(panels) > 1 and g[0].title:
            head = g[0].title
        else:
            head = ""
        sentences.append(f"{head}: {text}" if head and text else head or text)
    for label in colourbar_labels(fig):
        sentences.append(f"colour: {label}")
    body = ". ".join(s for s in sentences if s)
    out = f"``{stem}.png``: {body}."
    if all(p.notes and not p.series and not p.unnamed for p in panels):
        return out  # the prose explains data that this drawing does not have
    return f"{out} {prose.strip()}" if prose.strip() else out


def _words(text: str, vocabulary) -> set[str]:
    return {w for w in vocabulary if re.search(rf"\b{w}\b", text, re.I)}


def caption_mismatches(fig, text: str) -> list[str]:
    """What a caption says that the drawn figure contradicts or leaves out: an axis label or a
    named series missing from it, a colour or line style it names that nothing drawn has."""
    panels = describe(fig)
    wrong = [
        f"{what} {label!r} is not in the caption"
        for p in panels
        for what, label in (
            ("x label", p.xlabel),
            ("y label", p.ylabel),
            ("right y label", p.right_ylabel),
            *(("series", n) for n in p.names),
        )
        if label and label not in text
    ]
    drawn = {w for p in panels for c in p.colours for w in c.split()}
    wrong += [f"the caption names {w}, which nothing drawn is" for w in sorted(
        _words(text, COLOUR_VOCABULARY) - drawn)]  # fmt: skip
    styles = {i.style.strip() for p in panels for i in p.series}
    styles |= {s.strip() for p in panels for _, _, s in p.unnamed}
    wrong += [f"the caption names {w} lines, which nothing drawn is" for w in sorted(
        _words(text, {"dashed", "dotted"}) - styles)]  # fmt: skip
    return wrong
