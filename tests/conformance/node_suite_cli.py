#!/usr/bin/env python3
"""The ONNX node suite through the `kiln eval` CLI, as a user runs it.

For every case the internal runner (kiln_conformance) considers in scope, runs

    kiln eval model.onnx --input NAME=test_data_set_K/input_I.pb ... --output-dir OUT

for each data set (inputs named as the model's graph inputs, in order) and
compares every output written (OUT/<name>.npy) with output_J.pb at the
internal runner's tolerance (|got - want| <= 1e-7 + 1e-3 |want|, NaN where
NaN, integers exactly). Prints the CLI's pass count next to the internal
runner's and fails (exit 1) when the CLI fails a case the internal runner
passes, or passes fewer than --min-percent of the in-scope cases.

    node_suite_cli.py --kiln build/client/kiln --conformance build/tests/conformance/kiln_conformance \
        [--data /usr/share/libonnx-testdata/data/node] [--filter SUBSTR] [--min-percent 97] [--verbose]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper


def internal_outcomes(conformance, data, flt):
    cmd = [conformance, "--data", data, "--no-compiled", "--verbose"]
    if flt:
        cmd += ["--filter", flt]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    outcomes = {}
    for line in out.splitlines():
        m = re.match(r"^(test_\S+)\s+(passed|failed|skipped)\b", line)
        if m and "@" not in m.group(1):
            outcomes[m.group(1)] = m.group(2)
    return outcomes


def file_name_for(name):
    return re.sub(r"[/:\\]", "_", name)


def close(got, want):
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != {want.dtype}"
    if np.issubdtype(want.dtype, np.floating):
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        nan = np.isnan(w)
        if np.any(np.isnan(g) != nan):
            return "NaN where none is expected (or the reverse)"
        bad = ~nan & ~(g == w) & ~(np.abs(g - w) <= 1e-7 + 1e-3 * np.abs(w))
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            return f"element {i}: got {g.flat[i]}, want {w.flat[i]}"
        return ""
    if not np.array_equal(got, want):
        i = int(np.flatnonzero(got.ravel() != want.ravel())[0])
        return f"element {i}: got {got.flat[i]}, want {want.flat[i]}"
    return ""


def as_declared(path, declared, work):
    """The suite stores bf16 data as UINT16 tensors of the same bits (numpy has
    no bfloat16); a user hands Kiln a BFLOAT16 tensor. Returns the path to give
    `kiln eval`: a BFLOAT16 copy when the graph declares bf16, else `path`."""
    if declared != onnx.TensorProto.BFLOAT16:
        return path
    t = onnx.load_tensor(path)
    if t.data_type != onnx.TensorProto.UINT16:
        return path
    t.data_type = onnx.TensorProto.BFLOAT16
    os.makedirs(work, exist_ok=True)
    copy = os.path.join(work, "bf16_" + os.path.basename(path))
    onnx.save_tensor(t, copy)
    return copy


def run_case(kiln, case_dir, work):
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    inits = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in inits]
    declared = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    outputs = [o.name for o in model.graph.output]
    sets = sorted(d for d in os.listdir(case_dir) if d.startswith("test_data_set_"))
    for ds in sets:
        ds_dir = os.path.join(case_dir, ds)
        flags = []
        for k, name in enumerate(inputs):
            path = os.path.join(ds_dir, f"input_{k}.pb")
            if os.path.exists(path):  # an omitted optional input
                flags += ["--input", f"{name}={as_declared(path, declared[name], work)}"]
        out_dir = os.path.join(work, ds)
        r = subprocess.run([kiln, "eval", os.path.join(case_dir, "model.onnx"), *flags, "--output-dir", out_dir],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            return f"{ds}: " + (r.stderr.strip().splitlines() or ["kiln eval failed"])[-1]
        for j, name in enumerate(outputs):
            want = numpy_helper.to_array(onnx.load_tensor(os.path.join(ds_dir, f"output_{j}.pb")))
            got_path = os.path.join(out_dir, file_name_for(name) + ".npy")
            if not os.path.exists(got_path):
                return f"{ds}: output '{name}' was not written"
            got = np.load(got_path)
            if got.dtype == np.dtype("V2"):  # bf16 (.npy "<V2"): the suite's UINT16 bits
                got = got.view(np.uint16)
            why = close(got, want)
            if why:
                return f"{ds}: output '{name}': {why}"
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--conformance", required=True)
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data/node")
    ap.add_argument("--filter", default="")
    ap.add_argument("--min-percent", type=float, default=97.0)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()

    internal = internal_outcomes(a.conformance, a.data, a.filter)
    in_scope = sorted(n for n, o in internal.items() if o in ("passed", "failed"))
    if not in_scope:
        print("no in-scope node tests (is libonnx-testdata installed?)")
        return 1
    cli_passed, regressions = 0, []
    with tempfile.TemporaryDirectory(prefix="kiln_node_cli_") as work:
        for name in in_scope:
            why = run_case(a.kiln, os.path.join(a.data, name), os.path.join(work, name))
            if not why:
                cli_passed += 1
            elif internal[name] == "passed":
                regressions.append((name, why))
            if a.verbose:
                print(f"{name:60s} {'passed' if not why else 'failed'}  {why}")
    internal_passed = sum(1 for n in in_scope if internal[n] == "passed")
    pct = 100.0 * cli_passed / len(in_scope)
    print(f"kiln eval (CLI): {cli_passed} of {len(in_scope)} in-scope node tests pass ({pct:.1f}%); "
          f"internal runner: {internal_passed} ({100.0 * internal_passed / len(in_scope):.1f}%)")
    for name, why in regressions:
        print(f"CLI FAILS WHERE THE INTERNAL RUNNER PASSES: {name}: {why}")
    if regressions or pct < a.min_percent:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
