#!/usr/bin/env python3
"""Where a model loses to ONNX Runtime: Kiln's per-group profile against ORT's per-node profile.

Usage (a Python with numpy and onnxruntime):
  bench/profile_vs_ort.py MODEL.onnx INPUTS_DIR PACKAGE.kpkg --kiln build/client/kiln
                          [--threads 1] [--repeat 30] [--top 25]

INPUTS_DIR holds NAME.npy for every model input (a corpus model's NAME.inputs/). The package is the
model compiled by `kiln compile`. The script:
  1. reads the model's fusion groups with `kiln inspect MODEL --json` (group -> ONNX node names);
  2. runs `kiln run PACKAGE --profile --json` (per-group time, median over --repeat runs);
  3. runs ORT (all graph optimisations, --threads intra-op threads) with its profiler over --repeat
     runs and maps every ORT kernel back to the ONNX node it came from (ORT names a fused or
     re-laid-out node after its output value, `<value>_nchwc`, and a fused one after the node,
     `<node>/QuickGeluFusion/`);
  4. prints, per group, Kiln's time, the summed time of ORT's kernels for the same nodes and the
     difference, largest loss first; then ORT's kernels that belong to no group (its layout
     reorders, nodes it renamed beyond recognition) and both sides summed by Kiln group kind.
ORT's profiler adds its own overhead per kernel: compare groups, not the totals. A kernel whose
name maps to no node is listed as unmatched.
"""
import argparse
import atexit
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort


def kiln_groups(kiln, model):
    out = subprocess.run([kiln, "inspect", model, "--json"], capture_output=True, text=True, check=True).stdout
    node_group = {}
    for g in json.loads(out)["groups"]:
        for n in g["nodes"]:
            node_group[n] = g["index"]
    return node_group


def kiln_profile(kiln, package, inputs, threads, repeat):
    cmd = [kiln, "run", package, "--threads", str(threads), "--repeat", str(repeat), "--profile", "100000",
           "--json"]
    for name in inputs:
        cmd += ["--input", f"{name}={inputs[name]}"]
    profile = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)["profile"]
    return {p["group"]: p for p in profile}


def ort_profile(model, feed, threads, repeat):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.enable_profiling = True
    prof_dir = tempfile.mkdtemp(prefix="kiln-ort-profile-")
    atexit.register(shutil.rmtree, prof_dir, True)
    so.profile_file_prefix = os.path.join(prof_dir, "ort")
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    for _ in range(repeat):
        s.run(None, feed)
    path = s.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    total, count, op = collections.defaultdict(float), collections.defaultdict(int), {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            n = e["name"][: -len("_kernel_time")]
            total[n] += e["dur"]
            count[n] += 1
            op[n] = e["args"].get("op_name", "?")
    runs = max(count.values()) if count else 1
    return {n: (total[n] / runs / 1000.0, op[n]) for n in total}


def producers(model):
    """The name of the node that makes each value of the model's graph."""
    import onnx
    graph = onnx.load(model, load_external_data=False).graph
    return {out: n.name for n in graph.node for out in n.output}


def onnx_node_of(ort_name, producer):
    """ORT names a node it re-lays out after the node's output value (`<value>_nchwc`),
    one it fuses after the node (`<node>/QuickGeluFusion/`), a copy with `_token_N`."""
    base = re.sub(r"_nchwc$", "", ort_name)
    base = re.sub(r"/[A-Za-z]+Fusion/?$", "", base)
    base = re.sub(r"_token_\d+$", "", base)
    return producer.get(base, base)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("inputs")
    ap.add_argument("package")
    ap.add_argument("--kiln", default="build/client/kiln")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()

    files = {os.path.basename(f)[:-4]: f for f in glob.glob(os.path.join(a.inputs, "*.npy"))}
    if not files:
        sys.exit(f"profile_vs_ort: no .npy inputs in {a.inputs}")
    node_group = kiln_groups(a.kiln, a.model)
    kiln = kiln_profile(a.kiln, a.package, files, a.threads, a.repeat)
    ort_nodes = ort_profile(a.model, {k: np.load(f) for k, f in files.items()}, a.threads, a.repeat)

    ort_ms, ort_ops = collections.defaultdict(float), collections.defaultdict(list)
    unmatched = collections.defaultdict(float)
    producer = producers(a.model)
    for name, (ms, op) in ort_nodes.items():
        g = node_group.get(onnx_node_of(name, producer))
        if g is None:
            unmatched[op] += ms
        else:
            ort_ms[g] += ms
            ort_ops[g].append(op)

    print(f"kiln {sum(p['ms'] for p in kiln.values()):.3f} ms in {len(kiln)} groups; "
          f"ORT {sum(ms for ms, _ in ort_nodes.values()):.3f} ms in {len(ort_nodes)} kernels (profiled)")
    print(f"{'group':>5} {'kind':<15} {'kiln ms':>8} {'ort ms':>8} {'diff':>8}  nodes [ORT kernels]")
    order = sorted(kiln, key=lambda g: kiln[g]["ms"] - ort_ms.get(g, 0.0), reverse=True)
    for g in order[: a.top]:
        p = kiln[g]
        print(f"{g:>5} {p['kind']:<15} {p['ms']:>8.3f} {ort_ms.get(g, 0.0):>8.3f} "
              f"{p['ms'] - ort_ms.get(g, 0.0):>+8.3f}  {p['nodes'][:60]} [{','.join(ort_ops.get(g, []))}]")
    print("ORT kernels in no group:", {k: round(v, 3) for k, v in sorted(unmatched.items())})
    by_kind = collections.defaultdict(lambda: [0.0, 0.0])
    for g, p in kiln.items():
        by_kind[p["kind"]][0] += p["ms"]
        by_kind[p["kind"]][1] += ort_ms.get(g, 0.0)
    print("by kind (kiln ms, ORT ms):", {k: (round(x, 3), round(y, 3)) for k, (x, y) in sorted(by_kind.items())})


if __name__ == "__main__":
    main()
