"""CUDA: every update sync-free under torch.cuda.set_sync_debug_mode("error"), values equal to the
CPU's, and a collection update captured in a CUDA graph and replayed. Skipped without a GPU (CI
has none); run where one is, e.g. on a machine with a CUDA PyTorch."""

import warnings

import pytest
import torch

import nosync_metrics as nm

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _sync_free(update, *batches):
    """Runs update(*batch) for each batch (already on the GPU) with any synchronization an error."""
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for batch in batches:
            update(*batch)
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def _gen():
    return torch.Generator().manual_seed(0)


def _multiclass(g, n=64, c=10):
    return torch.randn(n, c, generator=g), torch.randint(0, c, (n,), generator=g)


def _binary(g, n=64):
    return torch.rand(n, generator=g), torch.randint(0, 2, (n,), generator=g)


def _multilabel(g, n=64, labels=5):
    return torch.rand(n, labels, generator=g), torch.randint(0, 2, (n, labels), generator=g)


CLASSIFICATION = [
    (lambda **k: nm.MulticlassAccuracy(num_classes=10, **k), _multiclass),
    (lambda **k: nm.MulticlassF1Score(num_classes=10, average="micro", top_k=2, **k), _multiclass),
    (lambda **k: nm.MulticlassPrecision(num_classes=10, average=None, ignore_index=3, **k), _multiclass),
    (lambda **k: nm.MulticlassConfusionMatrix(num_classes=10, **k), _multiclass),
    (lambda **k: nm.BinaryRecall(**k), _binary),
    (lambda **k: nm.BinaryStatScores(**k), _binary),
    (lambda **k: nm.MultilabelFBetaScore(0.5, num_labels=5, **k), _multilabel),
    (lambda **k: nm.MultilabelConfusionMatrix(num_labels=5, **k), _multilabel),
]


@pytest.mark.parametrize("make, batch", CLASSIFICATION)
def test_classification_updates_are_sync_free_and_equal_the_cpu_cuda(make, batch):
    g = _gen()
    batches = [batch(g) for _ in range(4)]
    cpu, gpu = make(), make(device="cuda")
    for b in batches:
        cpu.update(*b)
    _sync_free(gpu.update, *[tuple(t.cuda() for t in b) for b in batches])
    assert torch.allclose(gpu.compute().cpu().double(), cpu.compute().double(), atol=1e-6)


@pytest.mark.parametrize("strategy", ["error", "warn", "ignore", "disable", 0.5])
@pytest.mark.parametrize("cls", [nm.MeanMetric, nm.SumMetric, nm.MinMetric, nm.MaxMetric])
def test_aggregator_updates_are_sync_free_in_every_nan_strategy_cuda(cls, strategy):
    x = torch.randn(100, dtype=torch.float64, generator=_gen())
    if strategy != "error":
        x[7] = float("nan")
    cpu, gpu = cls(nan_strategy=strategy), cls(nan_strategy=strategy, device="cuda")
    cpu.update(x)
    cpu.update(2.0)
    _sync_free(gpu.update, (x.cuda(),), (2.0,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.allclose(gpu.compute().cpu(), cpu.compute(), equal_nan=True)


def test_weights_and_bad_targets_are_counted_on_the_gpu_cuda():
    g = _gen()
    preds, target = _multiclass(g)
    weight = torch.rand(64, generator=g)
    cpu = nm.MulticlassRecall(num_classes=10, weighted=True)
    gpu = nm.MulticlassRecall(num_classes=10, weighted=True, device="cuda")
    cpu.update(preds, target, weight)
    _sync_free(gpu.update, (preds.cuda(), target.cuda(), weight.cuda()))
    assert torch.allclose(gpu.compute().cpu(), cpu.compute())
    target[0] = 42
    bad = nm.MulticlassAccuracy(num_classes=10, device="cuda")
    _sync_free(bad.update, (preds.cuda(), target.cuda()), (preds.cuda(), target.cuda()))
    with pytest.raises(ValueError, match=r"2 targets outside \[0, 10\) in 2 updates, first at update 0"):
        bad.compute()


def _mixed(device):
    return nm.MetricCollection({"loss": nm.MeanMetric(device=device),
                                "acc": nm.MulticlassAccuracy(num_classes=10, device=device),
                                "cm": nm.MulticlassConfusionMatrix(num_classes=10, device=device)})


def test_a_mixed_collection_by_keyword_is_sync_free_cuda():
    g = _gen()
    cpu, gpu = _mixed("cpu"), _mixed("cuda")
    for _ in range(3):
        (preds, target), loss = _multiclass(g), torch.rand(64, generator=g)
        cpu.update(value=loss, preds=preds, target=target)
        on_gpu = loss.cuda(), preds.cuda(), target.cuda()  # copies from the host are syncs of their own
        _sync_free(lambda l, p, t: gpu.update(value=l, preds=p, target=t), on_gpu)
    expected = cpu.compute()
    for key, value in gpu.compute().items():
        assert torch.allclose(value.cpu().double(), expected[key].double()), key


def test_a_collection_update_captured_in_a_cuda_graph_replays_like_eager_updates_cuda():
    graphed, eager = _mixed("cuda"), _mixed("cuda")
    preds = torch.zeros(64, 10, device="cuda")
    target = torch.zeros(64, dtype=torch.long, device="cuda")
    loss = torch.zeros(64, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture, as PyTorch's CUDA-graph docs do
        for _ in range(3):
            graphed.update(value=loss, preds=preds, target=target)
    torch.cuda.current_stream().wait_stream(side)
    graphed.reset()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed.update(value=loss, preds=preds, target=target)
    g = _gen()
    batches = [_multiclass(g) + (torch.rand(64, generator=g),) for _ in range(5)]
    batches[2][1][0] = 99  # bad input in the third replay: its index must be 2, not the captured one
    for p, t, l in batches:
        preds.copy_(p)
        target.copy_(t)
        loss.copy_(l)
        graph.replay()
        eager.update(value=l.cuda(), preds=p.cuda(), target=t.cuda())
    torch.cuda.synchronize()
    assert graphed["acc"].update_count == 5
    assert graphed["acc"].bad_input() == eager["acc"].bad_input()
    assert graphed["acc"].bad_input()["first_update"] == 2
    replayed, expected = graphed.state_dict(), eager.state_dict()
    assert all(torch.equal(replayed[k], expected[k]) for k in expected)
