#!/usr/bin/env python3
"""The device path on a GPU: kernels, copies and syncs per update, and CUDA-graph replay.

launch_bench.py counts launching ATen ops on meta, on the premise that each one is a kernel on a
GPU. This script checks that premise where a GPU is. Each configuration of launch_bench.py
(forward() rows aside) is made on CUDA and given real inputs of the same shapes and dtypes: scores
in [0, 1), labels in range. After one warm-up update, two updates are measured:
  * launches: the kernels, memsets and copies within the device that torch.profiler's CUDA activity
    shows, per update (an ATen op may launch more than one: a reduction that casts its input first,
    masked_fill's copy); and copies between host and device, which must be none;
  * syncs: what torch.cuda's sync debug mode reports (each one a synchronizing call), and the
    sync-class ATen ops and host reads that nosync_metrics.count_syncs counts;
  * host time per update (the launch cost a training step pays), the mean of 200 eager updates.
Then a twin is captured in a CUDA graph, as PyTorch's documentation does (warm-up on a side stream,
reset, capture one update), and replayed over inputs that hold one bad batch (a NaN value, or a
target out of range). Its state, update count and bad-input report must equal those of eager
updates over the same inputs. A growing state (samplewise) cannot replay and is not captured.

TorchMetrics, where it is installed, is measured the same way for the rows that issue 11 quotes.

    PYTHONPATH=build-cuda/python python3 bench/cuda_launches.py [--json FILE] [--check]

--check exits 1 on a sync, a copy between host and device, or a replay that differs from eager
updates. The budget (10 launches for an aggregator, 12 for a collection) is reported, not checked.
"""

import argparse
import sys
import time
import types
import warnings

import torch
from torch.profiler import ProfilerActivity, profile

import launch_bench
from launch_bench import count_cell
import nosync_metrics as nm

TIMED_UPDATES = 200
REPLAYS = 5
BAD_REPLAY = 2


# ---------------------------------------------------------------- inputs

def label_range(name):
    """How many labels an int64 input of configuration `name` takes its values from."""
    if name.startswith(("binary", "multilabel")):
        return 2
    return 10 if "C=10 " in name else 1000


def real_inputs(config, seed):
    """config's meta inputs as CUDA tensors with values: scores in [0, 1), labels in range."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for x in config.inputs():
        if x.dtype.is_floating_point:
            out.append(torch.rand(x.shape, generator=g, dtype=x.dtype).cuda())
        else:
            out.append(torch.randint(0, label_range(config.name), x.shape, generator=g, dtype=x.dtype).cuda())
    return tuple(out)


def is_aggregator(name):
    return name.startswith(("Mean", "Sum", "Min", "Max"))


def spoiled(inputs, name):
    """inputs with one bad entry: a NaN value for an aggregator, a target out of range otherwise."""
    inputs = tuple(x.clone() for x in inputs)
    if is_aggregator(name):
        inputs[0].view(-1)[0] = float("nan")
    else:
        inputs[1].view(-1)[0] = label_range(name) + 3
    return inputs


def replay_batches(config, seed):
    """REPLAYS batches of real inputs, the one at BAD_REPLAY spoiled."""
    batches = [real_inputs(config, seed + i) for i in range(REPLAYS)]
    batches[BAD_REPLAY] = spoiled(batches[BAD_REPLAY], config.name)
    return batches


# ---------------------------------------------------------------- measuring

def cuda_activity(update, inputs):
    """What one update ran on the GPU, by the names of the CUDA events the profiler saw: kernels,
    memsets, copies within the device (each a launch) and copies between host and device (each a
    wait for the host, unless pinned and asynchronous)."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        update(*inputs)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    copies = [n for n in names if n.startswith("Memcpy")]
    on_device = [n for n in copies if n.startswith("Memcpy DtoD")]
    return {"kernels": [n for n in names if not n.startswith(("Memcpy", "Memset"))],
            "memsets": [n for n in names if n.startswith("Memset")],
            "device_copies": on_device,
            "host_copies": [n for n in copies if n not in on_device]}


def launches(activity):
    """Kernels, memsets and copies within the device: what the update launches."""
    return len(activity["kernels"]) + len(activity["memsets"]) + len(activity["device_copies"])


def syncs(update, inputs):
    """(synchronizations CUDA's sync debug mode reported, sync-class ATen ops and host reads) of one
    update. The mode's report reaches count_syncs through a C++ warning handler, unless torch's Python
    bindings hold the call (TorchMetrics' ops): then it is a Python warning, counted here too."""
    with warnings.catch_warnings(record=True) as caught, nm.count_syncs(cuda_sync_debug=True) as counted:
        warnings.simplefilter("always")
        update(*inputs)
    reported = sum("synchroniz" in str(w.message) for w in caught)
    return counted.cuda_syncs + reported, counted.total


def host_time_us(update, inputs):
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(TIMED_UPDATES):
        update(*inputs)
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / TIMED_UPDATES * 1e6


def measure_updates(update, inputs):
    update(*inputs)  # warm-up: the work of a first update is not counted
    activity = [cuda_activity(update, inputs) for _ in range(2)]
    reported = [syncs(update, inputs) for _ in range(2)]
    return {"launches": [launches(a) for a in activity], "host_copies": [len(a["host_copies"]) for a in activity],
            "activity": activity[0], "syncs": [s for s, _ in reported], "sync_ops": [o for _, o in reported],
            "host_us": host_time_us(update, inputs)}


def state_difference(a, b):
    """The first key where two state dicts differ (floats up to rounding); None if they agree."""
    if a.keys() != b.keys():
        return f"keys {sorted(a)} != {sorted(b)}"
    for key in a:
        x, y = a[key], b[key]
        if not isinstance(x, torch.Tensor):
            if x != y:
                return key
        elif x.dtype != y.dtype or x.shape != y.shape or not torch.allclose(
                x.cpu().double(), y.cpu().double(), rtol=1e-12, atol=1e-12, equal_nan=True):
            return key
    return None


def bad_input_reports(metric):
    if isinstance(metric, torch.nn.Module) and hasattr(metric, "bad_input"):
        return metric.bad_input()
    return {name: metric[name].bad_input() for name in metric.keys()}


def replayed_from_a_graph(config, batches):
    """(graphed, eager): a fresh metric whose one update, captured in a CUDA graph, was replayed
    over `batches`, and a twin updated eagerly over the same batches."""
    graphed, eager = config.make().to("cuda"), config.make().to("cuda")
    static = tuple(x.clone() for x in batches[0])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            graphed.update(*static)
    torch.cuda.current_stream().wait_stream(side)
    graphed.reset()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed.update(*static)
    for batch in batches:
        for dst, src in zip(static, batch):
            dst.copy_(src)
        graph.replay()
        eager.update(*batch)
    torch.cuda.synchronize()
    return graphed, eager


def replay_difference(graphed, eager):
    """What differs between a graphed metric and its eager twin (None: nothing)."""
    if bad_input_reports(graphed) != bad_input_reports(eager):
        return f"bad input {bad_input_reports(graphed)} != {bad_input_reports(eager)}"
    key = state_difference(graphed.state_dict(), eager.state_dict())
    return None if key is None else f"state {key}"


def measure(config, seed):
    result = {"configuration": config.name, "budget": config.budget, "error": None}
    try:
        inputs = real_inputs(config, seed)
        metric = config.make().to("cuda")
        result.update(measure_updates(metric.update, inputs))
        result["meta_launching"] = launch_bench.measure(config)["launching"]
        if config.grows:
            result["graph"] = "not captured: its state grows"
        else:
            difference = replay_difference(*replayed_from_a_graph(config, replay_batches(config, seed)))
            result["graph"] = "replays like eager updates" if difference is None else f"differs: {difference}"
    except Exception as error:  # reported with the rest
        result["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    return result


# ---------------------------------------------------------------- TorchMetrics, for comparison

def torchmetrics_rows():
    try:
        import torchmetrics as tm
        from torchmetrics import classification as tmc
    except ImportError:
        return []

    library = types.SimpleNamespace(MetricCollection=tm.MetricCollection, **vars(tmc))
    rows = {
        "MeanMetric warn, value (4096,)": lambda: tm.MeanMetric(nan_strategy="warn"),
        "MeanMetric disable, value + weight (4096,)": lambda: tm.MeanMetric(nan_strategy="disable"),
        "multiclass C=1000 macro, scores (128, 1000)":
            launch_bench.collection(library, "Multiclass", num_classes=1000),
        "binary, scores (4096,)": launch_bench.collection(library, "Binary"),
    }
    configs = {c.name: c for c in launch_bench.configurations()}
    results = []
    for name, make in rows.items():
        result = {"configuration": f"TorchMetrics {tm.__version__}: {name}", "error": None}
        try:
            metric = make().to("cuda")
            result.update(measure_updates(metric.update, real_inputs(configs[name], seed=1)))
        except Exception as error:
            result["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
        results.append(result)
    return results


# ---------------------------------------------------------------- report

def budget_cell(r):
    if r.get("budget") is None:
        return ""
    return f"{'yes' if max(r['launches']) <= r['budget'] else 'no'} (≤ {r['budget']})"


def table_row(r):
    if r["error"]:
        return f"| {r['configuration']} | error: {r['error']} | | | | | | |"
    meta = count_cell(r["meta_launching"]) if "meta_launching" in r else ""
    return (f"| {r['configuration']} | {meta} | {count_cell(r['launches'])} | {budget_cell(r)} | "
            f"{count_cell(r['host_copies'])} | {count_cell(r['syncs'])} ({count_cell(r['sync_ops'])}) | "
            f"{r['host_us']:.1f} | {r.get('graph', '')} |")


def markdown_table(results):
    lines = [f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}", "",
             "| configuration | launching ops (meta) | CUDA launches | budget met | host-device copies | "
             "syncs (sync-class ops) | host µs per update | CUDA graph |", "|---|---:|---:|---|---:|---:|---:|---|"]
    return "\n".join(lines + [table_row(r) for r in results])


def problems(results):
    found = []
    for r in results:
        if r["error"]:
            found.append(f"{r['configuration']}: {r['error']}")
        elif any(r["syncs"]) or any(r["sync_ops"]) or any(r["host_copies"]):
            found.append(f"{r['configuration']}: syncs {r['syncs']}, sync-class ops {r['sync_ops']}, "
                         f"host-device copies {r['activity']['host_copies']}")
        elif r["graph"].startswith("differs"):
            found.append(f"{r['configuration']}: {r['graph']}")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="also write the results (with what each update launched) here")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 on a sync, a host-device copy or a replay that differs from eager updates")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("cuda_launches.py: no CUDA device", file=sys.stderr)
        return 1
    configs = [c for c in launch_bench.configurations() if c.call == "update"]
    ours = [measure(config, seed=index) for index, config in enumerate(configs)]
    results = ours + torchmetrics_rows()
    return launch_bench.report(markdown_table(results), results, args.json, problems(ours) if args.check else [])


if __name__ == "__main__":
    sys.exit(main())
