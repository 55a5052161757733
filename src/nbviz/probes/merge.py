"""Several probes in one run: their "model", "probe" and "optimizer" meta, merged into one each.

A run that watches two models (a GAN's generator and discriminator, a teacher
and a student) keeps one model summary and one probe description, as readers
expect: each probe's part is kept under its ``name`` ("" when it has none) and
the merged value is written whenever a part changes. A later probe with the same
name (the model watched again, or rebuilt in a notebook) replaces that part.
"""

from __future__ import annotations

from typing import Any

#: The meta keys that each probe writes for its own model.
MERGED = ("model", "probe", "optimizer")


class ProbeMeta:
    """The parts of the merged meta of one run, by probe name."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer
        # key -> probe name -> (the sink that wrote it, value)
        self._parts: dict[str, dict[str, tuple[ProbeSink, Any]]] = {key: {} for key in MERGED}

    def sink(self, name: str | None) -> ProbeSink:
        """What the probe called ``name`` writes through."""
        return ProbeSink(self, name or "")

    def set(self, key: str, sink: ProbeSink, value: Any) -> None:
        self._parts[key][sink.name] = (sink, value)
        self._write(key)

    def discard(self, sink: ProbeSink) -> None:
        """Forget what ``sink`` wrote (a probe closed before it recorded any step)."""
        for key, parts in self._parts.items():
            owner = parts.get(sink.name)
            if owner is not None and owner[0] is sink:
                del parts[sink.name]
                self._write(key)

    def _write(self, key: str) -> None:
        parts = {name: value for name, (_, value) in self._parts[key].items()}
        if not parts:
            return  # nothing recorded by any probe: the run keeps what it had
        merged = next(iter(parts.values())) if len(parts) == 1 else _MERGE[key](parts)
        self._writer.set_meta(key, merged)


class ProbeSink:
    """The run's writer, as one probe sees it: its model meta goes through the merge."""

    def __init__(self, meta: ProbeMeta, name: str) -> None:
        self._meta = meta
        self.name = name

    def insert(self, table: str, rows: list[tuple]) -> None:
        self._meta._writer.insert(table, rows)

    def set_meta(self, key: str, value: Any) -> None:
        if key in MERGED:
            self._meta.set(key, self, value)
        else:
            self._meta._writer.set_meta(key, value)

    def discard(self) -> None:
        """Take this probe's part out of the merged meta."""
        self._meta.discard(self)

    def __getattr__(self, attr: str) -> Any:  # run_dir, flush, ...
        if attr.startswith("__") or "_meta" not in self.__dict__:
            raise AttributeError(attr)  # copy/pickle protocol lookups, a half-built object
        return getattr(self._meta._writer, attr)


def _merge_model(parts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": ", ".join(
            f"{n}: {v.get('type', '?')}" if n else v.get("type", "?") for n, v in parts.items()
        ),
        "params": sum(v.get("params", 0) for v in parts.values()),
        "trainable": sum(v.get("trainable", 0) for v in parts.values()),
        "modules": [row for v in parts.values() for row in v.get("modules", [])],
        "forward_order": [n for v in parts.values() for n in v.get("forward_order", [])],
    }


def _merge_probe(parts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    first = next(iter(parts.values()))
    return {
        **first,  # every, hist_every, bins, device: the first probe's
        "signals": list(dict.fromkeys(x for v in parts.values() for x in v.get("signals", []))),
        "layers": [n for v in parts.values() for n in v.get("layers", [])],
        "params": [p for v in parts.values() for p in v.get("params", [])],
        "compiled": any(v.get("compiled") for v in parts.values()),
        "notes": [
            f"{n}: {note}" if n else note for n, v in parts.items() for note in v.get("notes", [])
        ],
        "probes": [
            {"name": n, **{k: v.get(k) for k in ("every", "hist_every", "bins", "signals")}}
            for n, v in parts.items()
        ],
    }


def _merge_optimizer(parts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per probe's optimizer, named by the probe."""
    return [{"probe": n, **v} for n, v in parts.items()]


_MERGE = {"model": _merge_model, "probe": _merge_probe, "optimizer": _merge_optimizer}
