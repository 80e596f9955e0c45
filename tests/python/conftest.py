"""pytest setup: nosync_metrics is imported from the build (PYTHONPATH=<build>/python)."""

import pathlib

import pytest

import nosync_metrics


@pytest.fixture(scope="session")
def build_dir():
    """The CMake build directory the package was imported from."""
    return pathlib.Path(nosync_metrics.__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo_dir():
    return pathlib.Path(__file__).resolve().parents[2]
