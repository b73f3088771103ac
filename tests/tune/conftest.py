"""Tune tests need torch (the `tune` extra); skip the folder with a reason without it."""

import pytest

pytest.importorskip("torch", reason="shapeshift.tune needs torch (pip install -e '.[tune]')")
pytest.importorskip("optuna", reason="shapeshift.tune needs optuna (pip install -e '.[tune]')")
