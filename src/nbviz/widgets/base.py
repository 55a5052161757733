"""What every nbviz widget shares: the base class, with the front-end and the wire format.

A widget is one Python class here plus one ESM entry ``js/<name>.js``, which the
build bundles into ``src/nbviz/static/<name>.js``::

    class ConfusionMatrix(NbvizWidget):
        _esm = esm("confusion")

Arrays travel to the browser as binary buffers, never JSON lists: put
``array_trait_payload(a)`` into a ``traitlets.Dict`` trait and decode it in JS
with ``decodeArray`` from ``js/lib/wire.js`` (see :mod:`nbviz.widgets.wire`).
The bundles' folder and ``esm`` live in :mod:`nbviz.widgets.frontend`. Both
modules' names are also importable from here, where widget code found them first.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import ipywidgets as W
import traitlets

from nbviz.widgets.export import save_html
from nbviz.widgets.frontend import STATIC, FrontendNotBuiltError, esm
from nbviz.widgets.wire import array_from_payload, array_trait_payload, steps_payload

__all__ = [
    "STATIC",
    "FrontendNotBuiltError",
    "NbvizWidget",
    "array_from_payload",
    "array_trait_payload",
    "child_view",
    "esm",
    "steps_payload",
]


# Shared look of nbviz views; JupyterLab's theme variables with plain fallbacks
# so the same CSS works in Notebook 7, VS Code and a static HTML export.
_BASE_CSS = """
.nbviz {
  font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px);
  color: var(--jp-ui-font-color1, #1f1f1f);
}
.nbviz .nbviz-nonfinite { color: #c4103f; }
.nbviz-message {
  display: flex;
  align-items: center;
  gap: 0.5em;
  padding: 0.5em 0.75em;
  border-radius: 4px;
  border-left: 4px solid var(--jp-border-color1, #bdbdbd);
  background: var(--jp-layout-color2, #f5f5f5);
  white-space: pre-wrap;
}
.nbviz-message-empty { color: var(--jp-ui-font-color2, #616161); font-style: italic; }
.nbviz-message-warning { border-left-color: var(--jp-warn-color0, #e65100); }
.nbviz-message-error {
  border-left-color: var(--jp-error-color0, #c62828);
  color: var(--jp-error-color0, #b71c1c);
}
.nbviz-message-text { flex: 1; }
.nbviz-dismiss {
  border: none;
  background: transparent;
  color: inherit;
  cursor: pointer;
  font-size: 1.1em;
  line-height: 1;
}
"""


class NbvizWidget(anywidget.AnyWidget):
    """Base of every nbviz view.

    ``error`` holds a readable message the view shows in place of its content
    (for example "this run has no predictions for split 'val'"); empty means
    no error. Subclasses set ``_esm = esm("<name>")`` and may extend the shared
    style with ``_css = NbvizWidget._css + "..."``.
    """

    _css = _BASE_CSS
    error = traitlets.Unicode("", help="Readable error shown instead of the view.").tag(sync=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refuse_unknown_keywords(self, kwargs)
        # every synced text trait (and list of texts) refuses text the browser cannot
        # be sent (a lone surrogate), after the trait's own validator if it has one
        for name, trait in self.traits(sync=True).items():
            if _holds_text(trait):
                checked = _sendable_text(self._trait_validators.get(name))
                self._register_validator(checked, [name])
        super().__init__(*args, **kwargs)

    def save_html(self, path: str | Path, **kwargs: Any) -> Any:
        """Write this view as one self-contained HTML file that opens offline, no kernel.

        The page embeds the front-end and the data, and plays back what the
        kernel would answer for a sampled set of steps and selections; see
        :func:`nbviz.widgets.export.offline_page` for the options (``title``,
        ``max_steps``, ``max_bytes``). Returns a ``PageInfo`` (path, size, notes).
        """
        return save_html(self, path, **kwargs)


def _refuse_unknown_keywords(view: Any, kwargs: dict[str, Any]) -> None:
    """``TypeError`` for a keyword that is neither the view's argument nor a trait.

    traitlets passes such keywords on with a DeprecationWarning, so a misspelt
    argument (``ConfusionMatrix(run, spilt="test")``) would build a view of
    something else without a word.
    """
    unknown = [k for k in kwargs if not view.has_trait(k)]
    if unknown:
        cls = type(view)
        params = inspect.signature(cls.__init__).parameters.values()
        named = [p.name for p in params if p.name != "self" and p.kind not in _VARIADIC]
        raise TypeError(
            f"{cls.__name__}: unknown argument {', '.join(map(repr, unknown))}; "
            f"{cls.__name__} takes {', '.join(named) or 'no arguments'}, or a keyword "
            "naming one of its traits (view.trait_names())"
        )


_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _holds_text(trait: traitlets.TraitType) -> bool:
    """A text trait, or a list/tuple/set trait of texts."""
    if isinstance(trait, traitlets.Unicode):
        return True
    return isinstance(trait, traitlets.Container) and isinstance(
        getattr(trait, "_trait", None), traitlets.Unicode
    )


def _sendable_text(
    validator: Callable[[Any, Any], Any] | None,
) -> Callable[[Any, Any], Any]:
    """A trait validator: ``validator``'s value, refused if it cannot be sent as UTF-8."""

    def validate(owner: Any, proposal: Any) -> Any:
        value = proposal["value"] if validator is None else validator(owner, proposal)
        texts = value if isinstance(value, (list, tuple, set, frozenset)) else (value,)
        for text in texts:
            if isinstance(text, str) and not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise traitlets.TraitError(
                        f"{type(owner).__name__}.{proposal['trait'].name}: {text!r} holds "
                        f"{text[exc.start]!r}, a lone surrogate the browser cannot be sent"
                    ) from None
        return value

    return validate


def child_view(cls: type[W.Widget]) -> traitlets.Instance:
    """A synced trait holding a view shown inside another (``None`` until there is one).

    The browser gets a reference to the child's model and renders it in place
    (``js/lib/child.js``); the page writer follows the reference.
    """
    return traitlets.Instance(cls, allow_none=True).tag(sync=True, **W.widget_serialization)
