"""nbviz.extras.require: an optional library imported, or an error naming the extra."""

from __future__ import annotations

import pytest

from nbviz.extras import require


def test_a_present_module_is_returned():
    import json

    assert require("json", "none", "this") is json


def test_a_missing_package_is_named_with_the_extra_that_installs_it():
    with pytest.raises(ImportError) as info:
        require("nbviz_absent_pkg.event_processing.loader", "tensorboard", "nbviz.from_tensorboard")
    assert str(info.value) == (
        "nbviz.from_tensorboard needs the 'nbviz_absent_pkg' package, which is not installed: "
        "pip install 'nbviz[tensorboard]'"
    )


def test_a_missing_part_of_an_installed_package_says_so():
    with pytest.raises(ImportError) as info:
        require("json.nbviz_absent_part", "tensorboard", "nbviz.from_tensorboard")
    message = str(info.value)
    assert "'json.nbviz_absent_part'" in message and "not installed" not in message
    assert "pip install 'nbviz[tensorboard]'" in message
