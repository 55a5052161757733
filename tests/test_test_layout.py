"""The test tree itself: pytest imports test files by basename (the rootdir's
``prepend`` import mode, which lets browser tests import ``notebook_page`` and
``training``), so two test modules with one basename stop the whole collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).parent


def test_no_two_test_modules_share_a_basename() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py") if "_artifacts" not in p.parts)
    assert [n for n, c in names.items() if c > 1] == []
