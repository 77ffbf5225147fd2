#!/usr/bin/env python3
"""Schedules of one workload, side by side in whole models: each --config forced on every group of
that workload, the packages run in alternation, ONNX Runtime timed in the same loop.

Usage:
  bench/schedule_ab.py (MODEL.onnx | --chain C,H,W,N[,KH,KW]) --config K=V,... [--config ...]
                       [--kiln build/client/kiln] [--group 0] [--rounds 5] [--repeat 15] [--threads 1] [--no-ort]
                       [--profile]

--chain C,H,W,N[,KH,KW] writes the model: N layers of a KHxKW Conv C -> C on HxW (1x1 unless given;
padded by KH//2 and KW//2, so odd windows keep HxW) plus Relu, each with its own
weights (so that, as in a real network, the weights pass through the caches once per run).

How a schedule is forced: `kiln compile --trials 1` measures the default schedule of the model's
workloads into a scratch database; that record of group --group's workload is copied with the
config replaced, imported into a fresh database per config, and `kiln compile --trials 0 --db` builds
the package from it. The host is noisy: the table gives, per config, the minimum and the median of
the per-round medians (`kiln run --repeat R --json`), rounds alternating between configs. --profile
adds the sum, over the groups of that workload, of each group's minimum over the rounds (`kiln run
--profile`): the schedule's own time, apart from the host's drift over the rest of the model.
"""
import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from ort_timing import OrtTimer


def write_chain(path, c, h, w, n, kh=1, kw=1):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(n):
        weights = (rng.standard_normal((c, c, kh, kw)) / np.sqrt(c * kh * kw)).astype(np.float32)
        bias = (rng.standard_normal(c) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(weights, f"W{i}"), numpy_helper.from_array(bias, f"B{i}")]
        nodes.append(helper.make_node("Conv", [prev, f"W{i}", f"B{i}"], [f"c{i}"], kernel_shape=[kh, kw],
                                      pads=[kh // 2, kw // 2, kh // 2, kw // 2]))
        prev = f"r{i}" if i < n - 1 else "y"
        nodes.append(helper.make_node("Relu", [f"c{i}"], [prev]))
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, w])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, h, w])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--chain", help="C,H,W,N[,KH,KW]: write a chain of N KHxKW convs C -> C on HxW and use it")
    ap.add_argument("--config", action="append", required=True, help="a schedule, K=V,... (repeatable)")
    ap.add_argument("--kiln", default="build/client/kiln")
    ap.add_argument("--group", type=int, default=0, help="the group whose workload the configs are for")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--profile", action="store_true", help="also sum the workload's groups' minima (kiln run --profile)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kiln-schedule-ab-")
    atexit.register(shutil.rmtree, work, True)  # its packages and databases: hundreds of MB a run
    model = args.model
    if args.chain:
        model = os.path.join(work, "chain.onnx")
        dims = [int(d) for d in args.chain.split(",")]
        if len(dims) not in (4, 6):
            sys.exit(f"schedule_ab: --chain takes C,H,W,N or C,H,W,N,KH,KW, not {args.chain!r}")
        write_chain(model, *dims)
    if model is None:
        sys.exit("schedule_ab: give a model or --chain")
    import onnx
    inputs = {}
    for i, inp in enumerate(onnx.load(model).graph.input):
        shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
        inputs[inp.name] = os.path.join(work, f"in{i}.npy")
        np.save(inputs[inp.name], np.random.default_rng(i).standard_normal(shape).astype(np.float32))
    threads = ["--threads", str(args.threads)]
    groups = json.loads(run([args.kiln, "inspect", model, "--json"]))["groups"]
    key = groups[args.group]["workload_key"]
    same = {i for i, g in enumerate(groups) if g["workload_key"] == key}
    scratch = os.path.join(work, "scratch.db")
    run([args.kiln, "compile", model, "--trials", "1", "--db", scratch, "-o", os.path.join(work, "scratch.kpkg"), "-q",
         *threads])
    template = next(r for r in map(json.loads, run([args.kiln, "db", "export", "--db", scratch]).splitlines())
                    if r["workload"]["key"] == key)
    packages = []
    for i, config in enumerate(args.config):
        template["record"]["config"] = config
        db, pkg = os.path.join(work, f"{i}.db"), os.path.join(work, f"{i}.kpkg")
        run([args.kiln, "db", "import", "--db", db, "-"], input=json.dumps(template) + "\n")
        run([args.kiln, "compile", model, "--trials", "0", "--db", db, "-o", pkg, "-q", *threads])
        packages.append(pkg)
    ort = None if args.no_ort else OrtTimer(model, inputs, args.threads)
    feed_args = [a for name, path in inputs.items() for a in ("--input", f"{name}={path}")]
    medians = {c: [] for c in args.config + (["ORT"] if ort else [])}
    group_min = {c: {} for c in args.config}
    for _ in range(args.rounds):
        for config, pkg in zip(args.config, packages):
            out = run([args.kiln, "run", pkg, *feed_args, "--repeat", str(args.repeat), *threads, "--json"])
            medians[config].append(json.loads(out)["median_ms"])
            if args.profile:
                prof = json.loads(run([args.kiln, "run", pkg, *feed_args, "--profile", "100000", *threads, "--json"]))
                for g in prof["profile"]:
                    if g["group"] in same:
                        group_min[config][g["group"]] = min(g["ms"], group_min[config].get(g["group"], float("inf")))
        if ort:
            medians["ORT"].append(ort.median_ms(args.repeat))
    print(f"| schedule (workload {key[:12]}) | min of medians ms | median of medians ms |"
          + (f" its {len(same)} groups' minima ms |" if args.profile else ""))
    print("|---|---|---|" + ("---|" if args.profile else ""))
    for config, ms in medians.items():
        prof = f" {sum(group_min[config].values()):.3f} |" if args.profile and config in group_min else (" |" if args.profile else "")
        print(f"| {config} | {min(ms):.3f} | {sorted(ms)[len(ms) // 2]:.3f} |" + prof)


if __name__ == "__main__":
    main()
