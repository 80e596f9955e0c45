#!/usr/bin/env python3
"""Cross-process sync cost: a mean plus a four-metric collection (accuracy, precision, recall, F1;
C = 1000) synced over W gloo ranks on 127.0.0.1, each rank in its own process with one thread.

For each W it times collection.compute(), which reduces the whole collection over every rank
(median of --repeats, each after a barrier), and counts the collectives that one compute issues.

    PYTHONPATH=build/python /usr/bin/python3 bench/sync_bench.py --ranks 2 4
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CLASSES = 1000


def rank_main(rank, world, init_file, repeats, out_file):
    import torch
    import torch.distributed as dist

    import nosync_metrics as nm

    torch.set_num_threads(1)
    counts = {"all_reduce": 0, "all_gather": 0, "all_gather_object": 0, "broadcast": 0, "barrier": 0}
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    collection = nm.MetricCollection({
        "loss": nm.MeanMetric(), "accuracy": nm.MulticlassAccuracy(num_classes=CLASSES),
        "precision": nm.MulticlassPrecision(num_classes=CLASSES), "recall": nm.MulticlassRecall(num_classes=CLASSES),
        "f1": nm.MulticlassF1Score(num_classes=CLASSES)})
    g = torch.Generator().manual_seed(rank)
    for _ in range(5):
        collection.update(value=torch.rand(128, generator=g), preds=torch.randn(128, CLASSES, generator=g),
                          target=torch.randint(0, CLASSES, (128,), generator=g))
    for name in counts:  # counted from here on: what compute() issues
        original = getattr(dist, name)

        def counted(*args, _original=original, _name=name, **kwargs):
            counts[_name] += 1
            return _original(*args, **kwargs)

        setattr(dist, name, counted)
    times = []
    for i in range(repeats + 3):
        dist.barrier()
        start = time.perf_counter()
        collection.compute()
        if i >= 3:
            times.append(time.perf_counter() - start)
    calls = {name: (n - (repeats + 3 if name == "barrier" else 0)) / (repeats + 3) for name, n in counts.items()}
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        with open(out_file, "w") as f:
            json.dump({"ranks": world, "median_ms": statistics.median(times) * 1e3,
                       "collectives_per_compute": {k: v for k, v in calls.items() if v}}, f)


def run(world, repeats):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--world", str(world), "--init",
                                   os.path.join(tmp, "init"), "--repeats", str(repeats), "--out", out])
                 for r in range(world)]
        for p in procs:
            if p.wait(timeout=600) != 0:
                raise SystemExit(f"sync_bench: a rank of {world} failed")
        with open(out) as f:
            return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--world", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--init", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank is not None:
        return rank_main(args.rank, args.world, args.init, args.repeats, args.out)
    print("| ranks | compute() with sync, median ms | collectives per compute |")
    print("|---:|---:|---|")
    for world in args.ranks:
        r = run(world, args.repeats)
        calls = ", ".join(f"{k} {v:g}" for k, v in r["collectives_per_compute"].items())
        print(f"| {r['ranks']} | {r['median_ms']:.2f} | {calls} |", flush=True)


if __name__ == "__main__":
    main()
