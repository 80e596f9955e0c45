"""pytest setup: nosync_metrics is imported from the build (PYTHONPATH=<build>/python); the
benchmark scripts in bench/ import as modules (launch_bench, cuda_launches)."""

import pathlib
import sys

import pytest
import torch

import nosync_metrics

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))


@pytest.fixture(scope="session")
def build_dir():
    """The CMake build directory the package was imported from."""
    return pathlib.Path(nosync_metrics.__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo_dir():
    return pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(params=[torch.float32, torch.float64], ids=["default_float32", "default_float64"])
def default_dtype(request):
    """torch's default dtype for the test's length: float32 and float64, or (indirect
    parametrization) the test's own."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(request.param)
    try:
        yield request.param
    finally:
        torch.set_default_dtype(before)
