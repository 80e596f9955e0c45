"""Checkpoints: torch.save of state_dict() resumes exactly; the wrong metric or a damaged file is refused."""

import pytest
import torch

import nosync_metrics as nm
from nosync_metrics import _C


def _batches(n=6):
    g = torch.Generator().manual_seed(5)
    return [(torch.randn(12, 4, generator=g), torch.randint(0, 4, (12,), generator=g),
             torch.rand(12, generator=g, dtype=torch.float64)) for _ in range(n)]


def _collection():
    return nm.MetricCollection({"loss": nm.MeanMetric(), "acc": nm.MulticlassAccuracy(num_classes=4),
                                "cm": nm.MulticlassConfusionMatrix(num_classes=4)})


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_resuming_from_torch_save_equals_an_uninterrupted_run(tmp_path):
    batches = _batches()
    uninterrupted, first = _collection(), _collection()
    for preds, target, loss in batches:
        uninterrupted.update(value=loss, preds=preds, target=target)
    for preds, target, loss in batches[:3]:
        first.update(value=loss, preds=preds, target=target)
    torch.save(first.state_dict(), tmp_path / "ckpt.pt")
    resumed = _collection()
    resumed.load_state_dict(torch.load(tmp_path / "ckpt.pt"))
    for preds, target, loss in batches[3:]:
        resumed.update(value=loss, preds=preds, target=target)
    assert _same(resumed.state_dict(), uninterrupted.state_dict())
    for key, value in uninterrupted.compute().items():
        assert torch.equal(resumed.compute()[key], value)


def test_state_dicts_record_the_format_version_and_the_metric():
    state = nm.MulticlassAccuracy(num_classes=4).state_dict()
    assert state["_version"].item() == 4
    text = bytes(state["_metric"].tolist()).decode()
    assert text.startswith("MulticlassAccuracy(num_classes=4, top_k=1, average=macro")


def test_another_metric_or_other_options_are_refused_and_change_nothing(tmp_path):
    acc = nm.MulticlassAccuracy(num_classes=4)
    preds, target, _ = _batches(1)[0]
    acc.update(preds, target)
    torch.save(acc.state_dict(), tmp_path / "acc.pt")
    for other, difference in [(nm.MulticlassPrecision(num_classes=4), "MulticlassPrecision"),
                              (nm.MulticlassAccuracy(num_classes=4, average="micro"), "average=micro"),
                              (nm.MulticlassAccuracy(num_classes=4, top_k=2), "top_k=2")]:
        other.update(preds, target)
        before = other.state_dict()
        with pytest.raises(ValueError, match="the state is of another metric"):
            other.load_state_dict(torch.load(tmp_path / "acc.pt"))
        with pytest.raises(ValueError, match=difference):
            _C.load_checkpoint(other, str(tmp_path / "acc.pt"))
        assert _same(other.state_dict(), before)


def test_damaged_files_are_refused_and_change_nothing(tmp_path):
    acc = nm.MulticlassAccuracy(num_classes=4)
    path = tmp_path / "acc.pt"
    _C.save_checkpoint(acc, str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    before = acc.state_dict()
    with pytest.raises(ValueError, match="MulticlassAccuracy.load_checkpoint: .* is not a readable checkpoint"):
        _C.load_checkpoint(acc, str(path))
    with pytest.raises(Exception):
        torch.load(path)
    assert _same(acc.state_dict(), before)


def test_cpp_and_python_checkpoints_are_one_format(tmp_path):
    acc = nm.MulticlassAccuracy(num_classes=4)
    preds, target, _ = _batches(1)[0]
    acc.update(preds, target)
    _C.save_checkpoint(acc, str(tmp_path / "from_cpp.pt"))
    from_cpp = nm.MulticlassAccuracy(num_classes=4)
    # torch 2.6+ loads weights-only by default, which refuses the type tags of torch's C++ pickler.
    from_cpp.load_state_dict(torch.load(tmp_path / "from_cpp.pt", weights_only=False))
    torch.save(acc.state_dict(), tmp_path / "from_python.pt")
    from_python = nm.MulticlassAccuracy(num_classes=4)
    _C.load_checkpoint(from_python, str(tmp_path / "from_python.pt"))
    assert _same(from_cpp.state_dict(), acc.state_dict()) and _same(from_python.state_dict(), acc.state_dict())
