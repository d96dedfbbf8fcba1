"""Turning session data into HTML: the Jinja environment, Markdown, and display helpers.

Design constraint: every text in a session came from an alert, a tool or a
model, so none of it is trusted. Templates autoescape everything; the one
place that emits markup, :func:`markdown_html`, parses with raw HTML off
(``<script>`` stays text) and then passes the result through an allow-list
sanitizer (nh3, the Ammonia crate), so a link to ``javascript:`` or an image
to a foreign host cannot survive either.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import nh3
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup

from tarsy.money import format_usd
from tarsy.web.charts import metric_chart

# What Markdown may produce once sanitized: structure and emphasis, links, no images
# (the page's policy would block a foreign image anyway), no attributes but a link's.
_ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code",
        "pre", "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
_ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"style"}, "td": {"style"}}
_URL_SCHEMES = frozenset({"http", "https", "mailto"})


@cache
def _parser() -> MarkdownIt:
    # html=False: raw HTML in the text is escaped by the parser, not passed through.
    return MarkdownIt("commonmark", {"html": False}).enable("table").enable("strikethrough")


def markdown_html(text: str) -> Markup:
    """Render model text as sanitized HTML.

    Args:
        text: Markdown from a model (an analysis, a summary, an answer).

    Returns:
        HTML safe to put in the page as is.
    """
    rendered = _parser().render(text)
    clean = nh3.clean(
        rendered,
        tags=set(_ALLOWED_TAGS),
        attributes={tag: set(names) for tag, names in _ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(_URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
    )
    return Markup(clean)


def pretty_json(value: object) -> str:
    """Tool arguments as indented JSON: a JSON string is parsed first, other text kept."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return str(value)
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def short_span(span: timedelta | None) -> str:
    """A span in its two largest units: ``42s``, ``3m 05s``, ``2h 10m``; ``-`` for None."""
    if span is None:
        return "-"
    seconds = max(0, int(span.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    while len(parts) > 1 and parts[0][0] == 0:
        parts.pop(0)
    head = f"{parts[0][0]}{parts[0][1]}"
    return head if len(parts) == 1 else f"{head} {parts[1][0]:02d}{parts[1][1]}"


def when(value: datetime | None) -> str:
    """A time as UTC to the second, for a ``title``; empty for None."""
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def cost(value: int) -> str:
    """Nano-dollars as dollars, with the precision small model bills need."""
    return format_usd(value)


@cache
def environment() -> Environment:
    """The template environment: package templates, autoescape always, undefined is an error."""
    env = Environment(
        loader=PackageLoader("tarsy.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        markdown=markdown_html,
        pretty_json=pretty_json,
        span=short_span,
        when=when,
        cost=cost,
        metric_chart=metric_chart,
    )
    return env


def render(template: str, **context: Any) -> str:
    """Render one template of the package."""
    return environment().get_template(template).render(**context)
