"""Metrics synced across 2 and 3 gloo processes on 127.0.0.1 equal one process over the union of the data."""

import os
import subprocess
import sys

import pytest
import torch

import nosync_metrics as nm
from nosync_metrics import _C

import distributed_worker as worker

WORKER = os.path.join(os.path.dirname(__file__), "distributed_worker.py")


def run(scenario, world, tmp_path):
    init_file = tmp_path / "init"
    outs = [tmp_path / f"out{rank}.pt" for rank in range(world)]
    procs = [subprocess.Popen([sys.executable, WORKER, scenario, str(rank), str(world), str(init_file), str(outs[rank])],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ))
             for rank in range(world)]
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=120)[0].decode())
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"{scenario}: a rank hung")
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log
    return [torch.load(out) for out in outs]


def single_process_values(order=range(worker.BATCHES)):
    """Every value over the batches in `order` (samplewise values come in that order)."""
    ms, c = worker.metrics(), worker.collection()
    for i in order:
        b = worker.batch(i)
        for metric, keys in ms.values():
            metric.update(*[b[k] for k in keys])
        worker.feed_collection(c, b)
    out = {name: m.compute() for name, (m, _) in ms.items()}
    out.update({"collection/" + k: v for k, v in c.compute().items()})
    return out


@pytest.mark.parametrize("world", [2, 3])
def test_synced_compute_equals_one_process_over_the_union(world, tmp_path):
    # a sync gathers samplewise rows in rank order: the union taken rank by rank
    expected = single_process_values([i for rank in range(world) for i in worker.mine(rank, world)])
    assert expected["samplewise_f1"].shape == (sum(3 + 4 * i for i in range(worker.BATCHES)),)
    for rank, got in enumerate(run("every_metric", world, tmp_path)):
        assert got.pop("local_counts_kept") is True
        assert got.keys() == expected.keys()
        for name, value in expected.items():
            assert torch.allclose(got[name].double(), value.double(), rtol=1e-12, atol=1e-12), (rank, name)


def test_a_collection_sync_costs_one_all_reduce_per_reduction_and_dtype(tmp_path):
    c = worker.collection()
    pairs = {(reduction, buffer.dtype) for reduction, buffer in c._core._pack().buffers}
    # the mean's update count and tally are float64 (packed with its totals), the classifiers' int64
    assert pairs == {("sum", torch.int64), ("sum", torch.float64), ("min", torch.int64), ("min", torch.float64)}
    for counts in run("count_collectives", 2, tmp_path):
        assert counts == {"all_reduce": 4, "all_gather": 1}


def test_samplewise_rows_cost_one_all_gather_of_their_counts_and_one_per_row_tensor(tmp_path):
    # the check, every rank's row counts of tp, fp, tn, fn at once, then each one's rows; the update
    # count and tally are all-reduced (sum and min, int64)
    for counts in run("count_samplewise_collectives", 3, tmp_path):
        assert counts == {"all_reduce": 2, "all_gather": 1 + 1 + 4}


def test_the_tensors_of_a_syncs_collectives_live_until_the_next_sync(tmp_path):
    # (so that PyTorch 2.6's gloo teardown cannot deadlock on them; see nosync_metrics.distributed)
    for got in run("collective_tensors_kept", 2, tmp_path):
        first, second = got["handed"]
        # the check's fingerprints, every rank's row counts, each of tp, fp, tn, fn's rows (an
        # all-gather each: this rank's tensor and one per rank), two all-reduces (sum and min)
        assert first == 3 + 3 + 4 * 3 + 2
        assert second == 3 + 4  # the check; the collection's four (reduction, dtype) buffers
        assert got["alive"] == [[first], [0, second]]


def test_a_subclass_with_its_own_update_syncs_as_torchmetrics_metrics_do(tmp_path):
    for rank, got in enumerate(run("subclass_sync", 2, tmp_path)):
        local = 2.0 * (rank + 1)
        assert got["alone_forward"].item() == local  # dist_sync_on_step=False: this rank's batch
        assert (got["forward"]["doubled"].item(), got["forward"]["plain"].item()) == (local, rank + 1)
        assert (got["compute"]["doubled"].item(), got["compute"]["plain"].item()) == (6.0, 3.0)
        assert (got["synced"]["doubled"].item(), got["synced"]["plain"].item()) == (6.0, 3.0)  # reduced once
        assert (got["forward_on_step"]["doubled"].item(), got["forward_on_step"]["plain"].item()) == (6.0, 3.0)


def test_ranks_with_different_metrics_all_raise_naming_the_difference(tmp_path):
    for got in run("mismatch", 2, tmp_path):
        assert "every rank must hold the same metrics" in got["error"]
        assert "num_classes=5" in got["error"] and "num_classes=6" in got["error"] and "on rank 1" in got["error"]


def test_a_metric_on_one_rank_and_a_collection_on_another_raise_on_every_rank(tmp_path):
    # before, the collection's second check met the metric's gather of texts: gloo aborted the process
    for got in run("metric_against_collection", 2, tmp_path):
        assert got["error"] is not None and "every rank must hold the same metrics" in got["error"]


def test_a_nan_extremum_on_any_rank_reaches_every_rank(tmp_path):
    # gloo's MIN and MAX drop a NaN from rank 1 on; one process over every rank's values keeps it
    for got in run("nan_extremes", 3, tmp_path):
        assert got["MinMetric"].isnan() and got["MaxMetric"].isnan()
        assert got["collection"]["min"].isnan() and got["collection"]["max"].isnan()


def test_a_collection_whose_members_name_the_world_group_twice_syncs(tmp_path):
    for got in run("world_group_spelled_twice", 2, tmp_path):
        assert got["a"].item() == 3.0 and got["b"].item() == 3.0


def test_the_metrics_process_group_is_the_one_reduced_over(tmp_path):
    results = run("subgroup", 3, tmp_path)
    for got in results[:2]:
        assert got["sum"].item() == 3.0 and got["collection"].item() == 30.0
    assert results[2] == {}


def test_bad_input_on_one_rank_raises_on_every_rank(tmp_path):
    for got in run("bad_input", 2, tmp_path):
        assert got["error"] is not None and "1 NaN value in 1 update" in got["error"]


def test_forward_on_step_gives_every_ranks_good_values_and_leaves_the_report_to_compute(tmp_path):
    for got in run("bad_input_on_step", 2, tmp_path):
        assert got["metric"].item() == got["subclass"].item() == got["collection"]["mean"].item() == 1.5
        for name in ("metric", "subclass", "collection"):
            assert "1 NaN value in 1 update" in got[name + "_error"]
            assert got[name + "_refused"].startswith("Mean.forward: weight of shape [2] is not broadcastable")


def test_sync_unsync_sync_context_and_dist_sync_on_step(tmp_path):
    for rank, got in enumerate(run("sync_api", 2, tmp_path)):
        assert got["inside_total"][0].item() == 3.0 and got["inside_count"] == 2
        assert got["after_total"][0].item() == rank + 1
        assert got["synced_total"][0].item() == 3.0 and got["unsynced_total"][0].item() == rank + 1
        assert got["double_unsync"] == "The Metric has already been un-synced."
        assert got["step"].item() == 0.5 and got["step_count"] == 1
        assert got["unsynced_compute"].item() == rank
        assert got["collection_step"]["mean"].item() == 2.75 and got["collection_step"]["max"].item() == 10.0
        assert got["collection_step_count"] == 1


def test_samplewise_states_with_no_rows_on_any_rank_sync_to_no_rows(tmp_path):
    # gloo dies (SIGFPE) on an all-gather of empty tensors: there must be none
    for rank, got in enumerate(run("no_rows", 2, tmp_path)):
        assert got["with_rows"].tolist() == [1.0, 1.0]  # a sample on each rank
        assert got["after_reset"].shape == (0,)
        assert got["collection"]["rows"].shape == (0,) and got["collection"]["sum"].item() == 3.0


def test_each_member_of_a_collection_syncs_by_its_own_flags(tmp_path):
    for rank, got in enumerate(run("mixed_flags", 2, tmp_path)):
        assert got["compute"]["global"].item() == 3.0 and got["compute"]["local"].item() == rank + 1
        assert got["forward"]["step"].item() == 3.0 and got["forward"]["nostep"].item() == rank + 1
        assert got["forward_counts"] == [1, 1]


def test_collections_that_do_not_sync_issue_no_collective(tmp_path):
    for rank, got in enumerate(run("local_collections", 2, tmp_path)):
        if rank == 0:
            assert {k: v.item() for k, v in got["local"].items()} == {"sum": 1.0, "max": 1.0}
        assert {k: v.item() for k, v in got["unavailable"].items()} == {"global": 3.0, "local": rank + 1}
        assert got["empty"] == {}


def test_a_collection_and_its_metrics_see_each_others_sync(tmp_path):
    tail = " is synced (sync() or sync_context()), and holds every rank's state; call unsync() there first"
    collection_synced = "{}.{}: a MetricCollection holding it" + tail
    member_synced = "MetricCollection.{}: its metric 's'" + tail
    other_synced = "MetricCollection.{}: a MetricCollection holding its metric 'm'" + tail
    for rank, got in enumerate(run("synced_together", 2, tmp_path)):
        assert {k: v.item() for k, v in got["collection"].items()} == {"s": 3.0, "t": 3.0}
        assert got["member"].item() == 3.0  # reduced once, not twice
        for call in ("forward", "reset", "sync"):
            assert got["member_" + call] == collection_synced.format("Sum", call)
        assert got["in_member"] == member_synced.format("compute")
        assert got["sync_in_member"] == member_synced.format("sync")
        assert got["forward_in_member"] == member_synced.format("forward")
        assert {k: v.item() for k, v in got["after"].items()} == {"s": 3.0, "t": 3.0}
        assert got["reset_count"] == 0
        assert got["two_member"].item() == got["nested_member"].item() == 3.0
        assert [v.item() for v in got["copy_member"]] == [3.0, 3.0]
        assert got["two_count_in_sync"] == 2  # every rank's update, and no reset let through
        assert got["add_in_sync"] == ("MetricCollection.add_metrics: the collection is synced (sync() or "
                                      "sync_context()); call unsync() first")
        assert got["two_other"] == other_synced.format("compute")
        assert got["two_other_sync"] == other_synced.format("sync")
        assert got["two_other_reset"] == other_synced.format("reset")
        assert got["two_reset"] == collection_synced.format("Sum", "reset")
        assert got["copy_forward"] == collection_synced.format("Sum", "forward")
        assert [v.item() for v in got["alone_in_sync"][:3]] == [3.0] * 3  # reduced once, not twice
        assert got["alone_in_sync"][3] == ("Sum.forward: the metric shouldn't be synced when performing forward; "
                                           "call unsync() first")
        assert [v.item() for v in got["alone_after"]] == [3.0] * 3  # its local state back, reduced on compute
        assert [v.item() for v in got["mate_copy"]] == [3.0, 3.0]
        assert got["two_after"].item() == 3.0
        assert got["shallow_in_sync"] == [True, other_synced.format("compute")]
        assert got["shallow_after"][0].item() == 3.0  # reduced: the copy's sync ended with first's
        assert got["shallow_after"][1] == "The Metric has already been un-synced."
        assert got["nested_outer"] == other_synced.format("compute")
        assert got["mate_shares"] and got["mate"].item() == 3.0  # reduced once
        assert got["mate_forward"] == collection_synced.format("Sum", "forward")
        assert got["mate_after_reset"][:2] == [0, 1] and got["mate_after_reset"][2].item() == 3.0
        assert got["nested_reset"] == collection_synced.format("Sum", "reset")
        assert got["apart_member"].item() == 1.5 and got["apart_after"]["own"].item() == 1.5  # (1 + 2) / 2
        assert got["apart_forward"] == collection_synced.format("Mean", "forward")
        assert [v.item() for v in got["apart_copy"]] == [1.5, 1.5]
        assert torch.equal(*got["grouped_in_sync"])  # (a copy of p raised KeyError: 'cm.fn')
        p_copy, p_clone, p, cm_copy, cm = got["grouped_after"]
        assert torch.equal(p_copy, p) and torch.equal(p_clone, p) and torch.equal(cm_copy, cm)
        assert cm.sum().item() == 8  # both ranks' rows
        assert {k: v.item() for k, v in got["mixed_in_sync"].items()} == {"global": 3.0, "local": 3.0}
        assert {k: v.item() for k, v in got["mixed_after"].items()} == {"global": 3.0, "local": rank + 1}
        assert got["mixed_groups_kept"]


def test_reset_in_a_sync_context_stays_and_forward_on_a_synced_state_raises(tmp_path):
    for rank, got in enumerate(run("synced_state_changes", 2, tmp_path)):
        assert got["reset_count"] == 0
        for name in ("metric", "collection"):
            assert "shouldn't be synced when performing forward" in got[name], name
        assert got["total"].item() == 3.0  # the update after the reset, over both ranks; the refused forwards counted nothing


def test_ranks_that_group_the_same_metrics_otherwise_still_sync(tmp_path):
    expected = single_process_values()
    for rank, got in enumerate(run("groups_differ", 2, tmp_path)):
        assert len(got["groups"][0]) == (2 if rank == 0 else 1), got["groups"]
        for values in (got["split"], got["flat"], got["synced"]):
            assert torch.allclose(values["accuracy"], expected["collection/accuracy"]), rank
            assert torch.allclose(values["f1"], expected["collection/f1"]), rank


def test_collective_device_moves_cpu_state_for_nccl_only():
    assert _C.collective_device("nccl", "cpu").type == "cuda"
    assert _C.collective_device("nccl", "cuda:1") == torch.device("cuda:1")
    assert _C.collective_device("gloo", "cpu") == torch.device("cpu")
    assert _C.collective_device("gloo", "cuda:0") == torch.device("cuda:0")


def test_without_torch_distributed_nothing_syncs():
    m = nm.SumMetric()
    m.update(torch.tensor([2.0]))
    assert m.compute().item() == 2.0
    m.sync()  # not initialized: a no-op, as in TorchMetrics
    with m.sync_context():
        assert m.compute().item() == 2.0


def test_sync_benchmark_runs_and_counts_one_all_reduce_per_reduction_and_dtype(build_dir, repo_dir):
    env = dict(os.environ, PYTHONPATH=str(build_dir / "python"))
    out = subprocess.run([sys.executable, str(repo_dir / "bench" / "sync_bench.py"), "--ranks", "2", "--repeats", "2"],
                         env=env, capture_output=True, text=True, check=True, timeout=900).stdout
    assert "| 2 |" in out and "all_reduce 4, all_gather 1 |" in out, out


def test_a_nested_collection_sharing_its_outer_ones_state_computes_over_every_rank_while_it_lives_and_after(
        tmp_path):
    whole = [worker.batch(i) for i in range(worker.BATCHES)]
    preds = torch.cat([b["preds"] for b in whole]).argmax(1)
    target = torch.cat([b["target"] for b in whole])
    expected = {"prec": nm.MulticlassPrecision(num_classes=worker.CLASSES, average=None),
                "rec": nm.MulticlassRecall(num_classes=worker.CLASSES, average=None)}
    for metric in expected.values():
        metric.update(preds, target)
    step = nm.MulticlassPrecision(num_classes=worker.CLASSES, average=None)
    step.update(torch.cat([worker.batch(r)["preds"] for r in range(2)]),
                torch.cat([worker.batch(r)["target"] for r in range(2)]))
    for got in run("nested_sync", 2, tmp_path):
        for name, metric in expected.items():
            assert torch.allclose(got["alive"][name], metric.compute()), name
            assert torch.allclose(got["gone"][name], metric.compute()), name
        assert torch.allclose(got["step"]["prec"], step.compute())
        assert got["step_count"] == 1
