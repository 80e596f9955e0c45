#!/usr/bin/env python3
"""Runs the benchmark suite and writes its report.

For every metric and input: time and sync-class ops per update, naive (TorchMetrics-style) next to
nosync-metrics and next to the floor (one vectorized read of the same input), with ATen on one
thread and on all cores (on a CPU with AVX-512, ours once more with the AVX2 kernels); a step's five metric updates from Python; what a training step pays
for its metrics; and the kernel launches one update dispatches on the device path, counted on meta
(bench/launch_bench.py: no timing, so every profile runs all of it). Writes, into --out:
latest.json (everything), latest.md (the tables) and latest.png (the chart); a full run into
bench/results also puts the tables into README.md.

    /usr/bin/python3 bench/run_bench.py                 # full run, into bench/results
    /usr/bin/python3 bench/run_bench.py --quick         # a short run (the demo), printed
    /usr/bin/python3 bench/run_bench.py --smoke --out DIR   # one repetition of everything (tests)
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

import launch_bench  # its table; the counting runs in a subprocess, on the package in --build

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Google Benchmark's minimum time per case, and the step benchmark's rounds x steps, per mode.
PROFILES = {
    "full": {"min_time": "0.3", "rounds": 100, "steps": 10, "python_iterations": 3000},
    "quick": {"min_time": "0.05", "rounds": 8, "steps": 5, "python_iterations": 500},
    "smoke": {"min_time": "0.0001", "rounds": 2, "steps": 1, "python_iterations": 20},
}


def run(cmd, env=None):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)


def update_bench(build, threads, min_time, workdir, isa=None):
    """Every case's time per update; with `isa` (METRICS_CPU_ISA), ours and the floors alone."""
    out = os.path.join(workdir, f"update_{threads}_{isa or 'best'}.json")
    cmd = [os.path.join(build, "bench", "update_bench"), f"--torch_threads={threads}",
           f"--benchmark_min_time={min_time}", f"--benchmark_out={out}", "--benchmark_out_format=json"]
    if isa:
        cmd.append("--benchmark_filter=/(floor|nosync)$")
    run(cmd, env=dict(os.environ, METRICS_CPU_ISA=isa) if isa else None)
    with open(out) as f:
        data = json.load(f)
    rows = []
    for b in data["benchmarks"]:
        metric, shape, implementation = b["name"].split("/")
        rows.append({"metric": metric, "shape": shape, "implementation": implementation,
                     "us": b["real_time"], "syncs": b["syncs_per_update"],
                     "items_per_second": b.get("items_per_second", 0.0)})
    return data["context"], rows


def step_bench(build, rounds, steps, workdir):
    out = os.path.join(workdir, "training_step.json")
    run([os.path.join(build, "bench", "training_step_bench"), "--rounds", str(rounds), "--steps", str(steps),
         "--json", out])
    with open(out) as f:
        return json.load(f)


def python_bench(build, iterations, workdir):
    out = os.path.join(workdir, "python.json")
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "python_bench.py"), "--iterations", str(iterations),
                    "--json", out], check=True, stdout=subprocess.DEVNULL, env=env)
    with open(out) as f:
        return json.load(f)


def launch_counts(build, workdir):
    """bench/launch_bench.py's results, on the package in `build` (as python_bench gets it)."""
    out = os.path.join(workdir, "launches.json")
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "launch_bench.py"), "--json", out], check=True,
                   stdout=subprocess.DEVNULL, env=env)
    with open(out) as f:
        return json.load(f)


def has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def machine(context):
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        torch = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        torch = "unknown"
    return {"cpu": model, "cores": context.get("num_cpus"), "mhz": context.get("mhz_per_cpu"),
            "os": platform.platform(), "torch": torch, "date": datetime.date.today().isoformat()}


def by_case(rows):
    """{(metric, shape): {implementation: row}} plus the floor per (group, shape)."""
    cases, floors = {}, {}
    for r in rows:
        if r["implementation"] == "floor":
            floors[(r["metric"], r["shape"])] = r
        else:
            cases.setdefault((r["metric"], r["shape"]), {})[r["implementation"]] = r
    return cases, floors


def floor_for(metric, shape, floors):
    task = metric.split(" ")[0]
    return floors.get((task, shape)) or floors.get(("aggregation", shape))


def update_table(rows):
    cases, floors = by_case(rows)
    lines = ["| metric | input | naive µs | naive syncs | nosync µs | nosync syncs | floor µs | nosync ÷ floor | naive ÷ nosync |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (metric, shape), impl in cases.items():
        if metric == "sync counter":
            continue
        naive, ours = impl.get("naive"), impl.get("nosync")
        floor = floor_for(metric, shape, floors)
        if not ours:
            continue
        fl = floor["us"] if floor else float("nan")
        # (a weighted collection has no naive row: TorchMetrics' classification takes no weights)
        naive_cells = f"{naive['us']:.2f} | {naive['syncs']:.0f}" if naive else " | "
        ratio = f"{naive['us'] / ours['us']:.0f}x" if naive else ""
        lines.append(f"| {metric} | {shape} | {naive_cells} | {ours['us']:.2f} | "
                     f"{ours['syncs']:.0f} | {fl:.2f} | {ours['us'] / fl:.2f} | {ratio} |")
        if "nosync (ATen path)" in impl:
            aten = impl["nosync (ATen path)"]
            lines.append(f"| {metric} (ATen path, as on other devices) | {shape} | | | {aten['us']:.2f} | "
                         f"{aten['syncs']:.0f} | {fl:.2f} | {aten['us'] / fl:.1f} | |")
    return "\n".join(lines)


def isa_table(rows):
    """Ours against the floor, for the rows a bar holds: the aggregators' and the collections'."""
    cases, floors = by_case(rows)
    lines = ["| metric | input | nosync µs | floor µs | nosync ÷ floor |", "|---|---|---:|---:|---:|"]
    for (metric, shape), impl in cases.items():
        if "nosync" not in impl or not (" collection" in metric or shape == "4096" and " " not in metric):
            continue
        floor = floor_for(metric, shape, floors)
        us, fl = impl["nosync"]["us"], floor["us"] if floor else float("nan")
        lines.append(f"| {metric} | {shape} | {us:.2f} | {fl:.2f} | {us / fl:.2f} |")
    return "\n".join(lines)


def counter_table(rows):
    cases, _ = by_case(rows)
    impl = cases.get(("sync counter", "100 ops"), {})
    if "no counter" not in impl:
        return ""
    base = impl["no counter"]["us"]
    lines = ["| 100 small ATen ops | µs | cost per op |", "|---|---:|---:|"]
    for name in ("no counter", "counter alive", "strict counter alive"):
        if name in impl:
            us = impl[name]["us"]
            lines.append(f"| {name} | {us:.2f} | {(us - base) * 10:.0f} ns |")
    return "\n".join(lines)


def step_table(step):
    lines = [f"Training step: MLP {step['features']}-{step['hidden']}-{step['classes']}, batch {step['batch']}, "
             f"{step['threads']} ATen thread(s); none, naive and nosync on one trainer, interleaved in a shuffled "
             "order, median step time; ratios paired by round. The control is a second metric-free mode: its "
             "ratio to none is the noise.",
             "", "| metrics | median step ms | ÷ none | sync points per step |", "|---|---:|---:|---:|"]
    for mode in ("none", "naive", "nosync", "control"):
        m = step["modes"][mode]
        lines.append(f"| {mode} | {m['median_ms']:.3f} | {m['ratio_to_none']:.4f} | {m['syncs_per_step']:.0f} |")
    return "\n".join(lines)


def python_table(results):
    ours = results["nosync_metrics (MetricCollection)"]["us"]
    lines = ["Mean loss + multiclass accuracy, precision, recall and F1 (macro) on (128, 1000) logits, one "
             "thread. TorchMetrics rows: shared/reference/README.md (same kind of machine; not installable here).",
             "", "| five updates per step | µs per step | sync-class ops | ÷ nosync_metrics |", "|---|---:|---:|---:|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['us']:.1f} | {r['syncs']} | {r['us'] / ours:.0f}x |")
    return "\n".join(lines)


def launch_table(launches):
    return ("Launching ATen ops (not views, not allocations) and sync-class ops per update, two updates after a "
            f"warm-up (a growing state: after {launch_bench.GROWING_WARM_UP}, where its rows buffer has room); "
            "replay-invariant: both dispatched the same ops with the same arguments. Budget: "
            f"{launch_bench.AGGREGATOR_BUDGET} per aggregator, {launch_bench.COLLECTION_BUDGET} per collection. "
            "bench/launch_bench.py says how they are counted.\n\n" + launch_bench.markdown_table(launches))


def markdown(report):
    m = report["machine"]
    parts = [f"Machine: {m['cpu']}, {m['cores']} cores, {m['os']}, torch {m['torch']}, {m['date']} "
             f"({report['profile']} run).", ""]
    for threads, rows in report["update"].items():
        parts += [f"### Update cost, {threads} ATen thread(s)", "", update_table(rows), ""]
    if report.get("update_avx2"):
        parts += ["### Update cost with the AVX2 kernels, 1 ATen thread", "",
                  "This CPU has AVX-512; `METRICS_CPU_ISA=avx2` runs the kernels a CPU with AVX2 alone runs. "
                  "(ATen's own kernels, the floor's, are the same in both runs.)", "",
                  isa_table(report["update_avx2"]), ""]
    first = next(iter(report["update"].values()))
    parts += ["### From Python", "", python_table(report["python"]), "",
              "### Sync counter cost (1 thread)", "", counter_table(first), "",
              "### Training step", "", step_table(report["training_step"]), "",
              "### Kernel launches per update (device path, counted on meta)", "", launch_table(report["launches"]),
              ""]
    return "\n".join(parts)


def chart(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = next(iter(report["update"].values()))
    cases, floors = by_case(rows)
    keys = [k for k in cases if k[0] != "sync counter" and "nosync" in cases[k] and "naive" in cases[k]]
    labels = [f"{metric}\n{shape}" for metric, shape in keys]
    naive = [cases[k]["naive"]["us"] for k in keys]
    ours = [cases[k]["nosync"]["us"] for k in keys]
    floor = [floor_for(k[0], k[1], floors)["us"] for k in keys]
    naive_syncs = [cases[k]["naive"]["syncs"] for k in keys]
    our_syncs = [cases[k]["nosync"]["syncs"] for k in keys]
    x = range(len(keys))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(12, len(keys) * 0.45), 9), sharex=True)
    width = 0.28
    top.bar([i - width for i in x], naive, width, label="naive (TorchMetrics-style)", color="#d95f02")
    top.bar(list(x), ours, width, label="nosync-metrics", color="#1b9e77")
    top.bar([i + width for i in x], floor, width, label="floor: one read of the input", color="#7570b3")
    top.set_yscale("log")
    top.set_ylabel("µs per update (log)")
    top.legend()
    top.set_title(f"Update cost, 1 ATen thread — {report['machine']['cpu']}")
    bottom.bar([i - width / 2 for i in x], naive_syncs, width, label="naive", color="#d95f02")
    bottom.bar([i + width / 2 for i in x], our_syncs, width, label="nosync-metrics", color="#1b9e77")
    bottom.set_ylabel("sync-class ops per update")
    bottom.legend()
    bottom.set_xticks(list(x))
    bottom.set_xticklabels(labels, rotation=90, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


README_START = "<!-- bench results: written by bench/run_bench.py -->"
README_END = "<!-- end of bench results -->"


def update_readme(text):
    """Puts the tables of a full run into README.md, between its markers."""
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        readme = f.read()
    if README_START not in readme or README_END not in readme:
        return
    head, rest = readme.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    block = f"{README_START}\n![update cost and sync points](bench/results/latest.png)\n\n{text}\n{README_END}"
    with open(path, "w") as f:
        f.write(head + block + tail)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    profile = parser.add_mutually_exclusive_group()
    profile.add_argument("--quick", action="store_true")
    profile.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    name = "smoke" if args.smoke else "quick" if args.quick else "full"
    settings = PROFILES[name]
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as workdir:
        update = {}
        context = {}
        for threads in sorted({1, os.cpu_count() or 1}):
            context, update[str(threads)] = update_bench(args.build, threads, settings["min_time"], workdir)
        avx2 = update_bench(args.build, 1, settings["min_time"], workdir, "avx2")[1] if has_avx512() else None
        step = step_bench(args.build, settings["rounds"], settings["steps"], workdir)
        python = python_bench(args.build, settings["python_iterations"], workdir)
        launches = launch_counts(args.build, workdir)
    report = {"profile": name, "machine": machine(context), "update": update, "update_avx2": avx2, "python": python,
              "training_step": step, "launches": launches}
    with open(os.path.join(args.out, "latest.json"), "w") as f:
        json.dump(report, f, indent=1)
    text = markdown(report)
    with open(os.path.join(args.out, "latest.md"), "w") as f:
        f.write(text)
    chart(report, os.path.join(args.out, "latest.png"))
    if name == "full" and os.path.abspath(args.out) == os.path.join(ROOT, "bench", "results"):
        update_readme(text)
    print(text)


if __name__ == "__main__":
    main()
