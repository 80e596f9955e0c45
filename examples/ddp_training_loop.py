#!/usr/bin/env python3
"""Distributed data parallel training on the CPU with nosync_metrics: two processes (gloo, on
127.0.0.1) train an MLP with DistributedDataParallel on their own shard of a synthetic task.

Each rank updates its metrics locally every step (never a sync); at each epoch's end compute()
reduces them over both ranks (sync_on_compute, TorchMetrics' default under torch.distributed), so
every rank prints the same global values, computed over both shards. It prints, per epoch, the
global values and the sync points per step that count_syncs saw around the metric updates and
around the whole step.

    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_training_loop.py --epochs 3
"""

import argparse
import datetime
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

import nosync_metrics as nm

FEATURES, CLASSES = 32, 5


def shard(rank, world, steps, batch_size):
    """This rank's batches of a task whose labels come from a fixed random linear teacher."""
    teacher = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1 + rank)
    inputs = [torch.randn(batch_size, FEATURES, generator=g) for _ in range(steps)]
    return [(x, (x @ teacher).argmax(1)) for x in inputs]


def train(rank, world, init_file, args):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    run_epochs(rank, world, args)  # returns with the model and its DDP reducer gone
    dist.barrier()  # no rank tears the group down while the other still uses it
    dist.destroy_process_group()


def run_epochs(rank, world, args):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(), torch.nn.Linear(64, CLASSES)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_metric = nm.MeanMetric()
    scores = nm.MetricCollection({"accuracy": nm.MulticlassAccuracy(num_classes=CLASSES),
                                  "f1": nm.MulticlassF1Score(num_classes=CLASSES)})
    batches = shard(rank, world, args.steps, args.batch_size)
    for epoch in range(args.epochs):
        metric_syncs = step_syncs = 0
        for x, y in batches:
            with nm.count_syncs() as step:
                logits = model(x)
                loss = torch.nn.functional.cross_entropy(logits, y)
                with nm.count_syncs() as updates:
                    loss_metric.update(loss.detach())
                    scores.update(logits.detach(), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            metric_syncs += updates.total
            step_syncs += step.total
        values = scores.compute()  # reduced over both ranks
        mean_loss = loss_metric.compute()
        if rank == 0 or args.all_ranks:
            line = (f"rank {rank} epoch {epoch} | loss {mean_loss.item():.4f} | accuracy {values['accuracy'].item():.4f}"
                    f" | f1 {values['f1'].item():.4f} | updates seen {loss_metric.update_count} local"
                    f" | sync points per step: metrics {metric_syncs / len(batches):.2f},"
                    f" whole step {step_syncs / len(batches):.2f}\n")
            sys.stdout.write(line)  # one write: the ranks' lines do not interleave
            sys.stdout.flush()
        loss_metric.reset()
        scores.reset()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20, help="steps per epoch on each rank")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--all-ranks", action="store_true", help="every rank prints (they agree)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(train, args=(args.world, os.path.join(tmp, "init"), args), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
