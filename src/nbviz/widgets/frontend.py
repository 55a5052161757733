"""The built front-end: where the bundles are, and the error when one is missing.

Each view's ESM entry ``js/<name>.js`` is bundled into ``src/nbviz/static/<name>.js``
by the build; a view class points at its bundle with ``_esm = esm("<name>")`` and
the offline page embeds ``report_runtime.js`` from the same folder.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["STATIC", "FrontendNotBuiltError", "esm"]

STATIC = Path(__file__).parent.parent / "static"
"""Where the build writes the bundled front-end (``src/nbviz/static``)."""


class FrontendNotBuiltError(FileNotFoundError):
    """A widget's JS bundle is missing from the installed package."""


def esm(name: str) -> Path:
    """Path of the bundled ESM for widget entry ``js/<name>.js``.

    Raises ``FrontendNotBuiltError`` when the bundle is missing, which happens in a
    source checkout before the front-end is built.
    """
    path = STATIC / f"{name}.js"
    if not path.is_file():
        raise FrontendNotBuiltError(
            f"nbviz front-end not built: {path} is missing "
            f"(bundle of js/{name}.js); run `make js` or reinstall nbviz"
        )
    return path
