#!/usr/bin/env python3
"""Compiles every model of a corpus (made by make_corpus.py) with Kiln's CLI and compares with ONNX Runtime.

Usage:
  run_corpus.py CORPUS_DIR --kiln build/client/kiln [--only NAME,...] [--subset ci]
                [--reviewed tests/models/corpus/reviewed.txt] [--json out.json] [--keep WORKDIR]
                [--compile-timeout 600] [--run-timeout 600] [--tol 1e-3]
                [--trials N] [--target T] [--speed [--threads T] [--repeat R] [--rounds K] [--ort-denormals-zero]]

For each model:
  1. ONNX Runtime (CPUExecutionProvider, ORT_ENABLE_ALL) on CORPUS_DIR/<name>.inputs/*.npy;
  2. KILN compile MODEL --trials 0 --db WORKDIR/tuning.db -o WORKDIR/<name>.kpkg
     (embedded farm; --shape NAME=d0,... only for inputs with symbolic dims);
  3. KILN run WORKDIR/<name>.kpkg --input NAME=FILE.npy ... --output-dir WORKDIR/<name>.out;
  4. every output: error = max|kiln - ort| / max(1, max|ort|); ok when <= --tol (1e-3).
Statuses: ok, mismatch, compile-failed, run-failed, ort-failed.

--trials N tunes every group with N measured candidates (the embedded farm, its database kept per run).
--speed times the matching models against ONNX Runtime in the same run: `kiln run --repeat R
--threads T` and an ORT session with intra_op_num_threads=T, alternating K rounds each; the best
median of each is kept and the table gains kiln_ms, ort_ms and vs_ort (ORT time / Kiln time: above 1
means Kiln is faster). The machine is shared: compare the ratio, not the absolute times.
Kiln's runs treat denormal floats as zero (the runtime's default); ORT's keep them unless
--ort-denormals-zero sets its session.set_denormal_as_zero for the timed session.

--reviewed FILE: lines 'name  # reason' name the models expected to fail. The exit status is 1
when a model not listed fails or a listed model passes (so the list can only shrink), else 0.
Without --reviewed the exit status is 0 only when every model passes.
Needs numpy and onnxruntime (and onnx, used only to find symbolic input dims).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

# Named subsets (make_corpus.py --subset reads them too). "ci" is what the README's test command
# makes and runs: small and fast, both torch exporters (CI installs torch, timm and transformers but
# not tensorflow), opsets 9 to 22, every category but detection.
SUBSETS = {
    "ci": [
        "resnet18_op9",               # torchscript opset 9, classic CNN + opset-9 Softmax
        "mobilenet_v2_op10",          # torchscript opset 10, depthwise convs, Clip
        "squeezenet1_0_op22",         # dynamo, newest opset
        "timm_lcnet_050_op21",        # dynamo, hard-swish/SE
        "timm_repvgg_a0_op18",        # dynamo, training-form 3x3 + 1x1 + identity branches (conv_branch_merging)
        "deeplabv3_mobilenet_v3_large_op11",  # torchscript segmentation, dilated convs, Resize
        "bert_op14",                  # torchscript transformer encoder, int64 token ids, bool masks
        "gpt2_op18",                  # dynamo transformer decoder, causal mask
        "crnn_op11",                  # torchscript CNN + bidirectional LSTM (text recognition)
        "whisper_encoder_op17",       # torchscript speech encoder
    ],
}

TOL = 1e-3


def snapshot_kiln(kiln, dest, wait_s=900):
    """Copies the kiln binary and the shared libraries it loads from outside the system directories
    (libkiln_runtime.so, libkiln_proto.so: found through its RUNPATH into the build tree) into dest, so
    that a rebuild of the build tree during the run cannot swap or remove them under a model. Waits
    while the binary is missing or being relinked. Returns (path, environment, description)."""
    import hashlib
    deadline = time.time() + wait_s
    while True:
        ok = os.access(kiln, os.X_OK) and time.time() - os.path.getmtime(kiln) > 5
        if ok:
            ldd = subprocess.run(["ldd", kiln], capture_output=True, text=True)
            ok = ldd.returncode == 0 and "not found" not in ldd.stdout
        if ok:
            break
        if time.time() > deadline:
            raise SystemExit(f"run_corpus: {kiln} is not a usable executable (waited {wait_s} s)")
        print(f"run_corpus: waiting for {kiln} (missing or being rebuilt)", file=sys.stderr, flush=True)
        time.sleep(10)
    os.makedirs(dest, exist_ok=True)
    libs = []
    for line in ldd.stdout.splitlines():
        m = re.search(r"=>\s+(/\S+)", line)
        if m and not m.group(1).startswith(("/lib/", "/lib64/", "/usr/")):
            libs.append(m.group(1))
    for f in [kiln] + libs:
        shutil.copy2(f, os.path.join(dest, os.path.basename(f)))
    copy = os.path.join(dest, os.path.basename(kiln))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = dest + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    with open(copy, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(kiln)))
    return copy, env, f"{kiln} (built {when}, sha256 {digest[:16]}; run from a snapshot with {len(libs)} libs)"


def load_models(corpus):
    man = os.path.join(corpus, "manifest.json")
    if os.path.exists(man):
        with open(man) as f:
            names = [m["name"] for m in json.load(f)["models"]]
    else:
        names = sorted(f[:-5] for f in os.listdir(corpus)
                       if f.endswith(".json") and os.path.exists(os.path.join(corpus, f[:-5] + ".onnx")))
    metas = []
    for n in names:
        p = os.path.join(corpus, n + ".json")
        if os.path.exists(p):
            with open(p) as f:
                metas.append(json.load(f))
        else:
            metas.append({"name": n})
    return metas


def load_reviewed(path):
    out = {}
    with open(path) as f:
        for line in f:
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            name, _, reason = s.partition("#")
            out[name.strip()] = reason.strip()
    return out


def sanitize(name):
    return name.replace("/", "_").replace(":", "_")


def first_error_line(text, prefix):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for l in lines:
        if l.startswith(prefix):
            return l[len(prefix):].strip()
    for l in lines:  # a structured log line carrying error="..."
        m = re.search(r'error="((?:[^"\\]|\\.)*)"', l)
        if m:
            return m.group(1)
    plain = [l for l in lines if not l.startswith("ts=") and not l.startswith("[")]
    return plain[-1] if plain else (lines[-1] if lines else "no output")


def describe_rc(rc):
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"


def symbolic_shapes(model_path, arrays):
    """--shape arguments for inputs whose ONNX dims are not all static."""
    try:
        import onnx
    except ImportError:
        return []
    m = onnx.load(model_path, load_external_data=False)
    init = {i.name for i in m.graph.initializer}
    args = []
    for v in m.graph.input:
        if v.name in init or v.name not in arrays:
            continue
        dims = v.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") or d.dim_value <= 0 for d in dims):
            args += ["--shape", f"{v.name}=" + ",".join(str(d) for d in arrays[v.name].shape)]
    return args


def ort_session(model_path, threads=2, denormals_zero=False):
    import onnxruntime as ort
    so = ort.SessionOptions()
    if denormals_zero:
        so.add_session_config_entry("session.set_denormal_as_zero", "1")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])


def ort_outputs(model_path, arrays):
    s = ort_session(model_path)
    feed = {i.name: arrays[i.name] for i in s.get_inputs()}
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(names, feed)))


def ort_median_ms(session, arrays, repeat):
    feed = {i.name: arrays[i.name] for i in session.get_inputs()}
    session.run(None, feed)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        session.run(None, feed)
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def measure_speed(res, model, pkg, files, arrays, args):
    """Kiln and ORT at the same thread count, alternating rounds; the best median of each."""
    session = ort_session(model, args.threads, args.ort_denormals_zero)
    cmd = [args.kiln_path, "run", pkg, "--repeat", str(args.repeat), "--threads", str(args.threads), "--json"]
    for k, v in files.items():
        cmd += ["--input", f"{k}={v}"]
    kiln_ms, ort_ms = [], []
    for _ in range(args.rounds):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.run_timeout, env=args.kiln_env)
        if p.returncode != 0:
            res["detail"] = "speed: " + first_error_line(p.stderr + "\n" + p.stdout, "kiln run:")
            return
        kiln_ms.append(json.loads(p.stdout.strip().splitlines()[-1])["median_ms"])
        ort_ms.append(ort_median_ms(session, arrays, args.repeat))
    res["kiln_ms"], res["ort_ms"] = round(min(kiln_ms), 3), round(min(ort_ms), 3)
    res["vs_ort"] = round(res["ort_ms"] / res["kiln_ms"], 3) if res["kiln_ms"] > 0 else None


def rel_error(got, ref):
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        if got.size == ref.size:  # same data, different rank (e.g. a dropped unit dim): note it but compare
            got = got.reshape(ref.shape)
        else:
            return float("inf"), f"shape {list(got.shape)} vs ORT {list(ref.shape)}"
    if ref.size == 0:
        return 0.0, None
    g, r = got.astype(np.float64), ref.astype(np.float64)
    same_nonfinite = (~np.isfinite(r)) & ((g == r) | (np.isnan(g) & np.isnan(r)))
    diff = np.where(same_nonfinite, 0.0, np.abs(g - r))
    if np.isnan(diff).any():
        return float("inf"), "NaN where ORT has a number"
    fin = np.abs(r[np.isfinite(r)])
    scale = max(1.0, float(fin.max()) if fin.size else 1.0)
    return float(diff.max()) / scale, None


def run_kiln(res, step, cmd, timeout, env):
    """Runs `kiln compile` or `kiln run` (step), timing it into res["<step>_s"]. Returns the finished
    process, or None after recording "<step>-failed" and the reason (timeout, no binary, non-zero exit)."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        why = None
        if p.returncode != 0:
            why = first_error_line(p.stderr + "\n" + p.stdout, f"kiln {step}:")
            if p.returncode < 0:
                why = f"{describe_rc(p.returncode)}: {why}"
    except subprocess.TimeoutExpired:
        p, why = None, f"timeout after {timeout} s"
    except OSError as e:
        res["status"], res["detail"] = f"{step}-failed", f"cannot start kiln: {e}"
        return None
    res[f"{step}_s"] = round(time.time() - t0, 2)
    if why is not None:
        res["status"], res["detail"] = f"{step}-failed", why
        return None
    return p


def run_model(meta, corpus, kiln, work, args):
    name = meta["name"]
    res = {"model": name, "opset": meta.get("opset"), "exporter": meta.get("exporter", "?"),
           "category": meta.get("category", "?"), "groups": None, "compile_s": None, "run_s": None,
           "max_err": None, "status": None, "detail": ""}
    model = os.path.join(corpus, name + ".onnx")
    inp_dir = os.path.join(corpus, name + ".inputs")
    files = meta.get("input_files") or {f[:-4]: os.path.join(name + ".inputs", f)
                                        for f in sorted(os.listdir(inp_dir)) if f.endswith(".npy")}
    files = {k: os.path.join(corpus, v) for k, v in files.items()}
    arrays = {k: np.load(v) for k, v in files.items()}

    try:
        ref = ort_outputs(model, arrays)
    except Exception as e:  # noqa: BLE001
        res["status"], res["detail"] = "ort-failed", (str(e).strip().splitlines() or [type(e).__name__])[0]
        return res

    pkg = os.path.join(work, name + ".kpkg")
    cmd = [kiln, "compile", model, "--trials", str(args.trials), "--db", os.path.join(work, "tuning.db"), "-o", pkg]
    cmd += symbolic_shapes(model, arrays)
    if args.target:
        cmd += ["--target", args.target]
    p = run_kiln(res, "compile", cmd, args.compile_timeout, args.kiln_env)
    if p is None:
        return res
    m = re.search(r"(\d+) groups", p.stdout) or re.search(r"(\d+) groups", p.stderr)
    if m:
        res["groups"] = int(m.group(1))
    if not os.path.exists(pkg):
        res["status"], res["detail"] = "compile-failed", "no package written"
        return res

    out_dir = os.path.join(work, name + ".out")
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [kiln, "run", pkg, "--output-dir", out_dir]
    for k, v in files.items():
        cmd += ["--input", f"{k}={v}"]
    if run_kiln(res, "run", cmd, args.run_timeout, args.kiln_env) is None:
        return res

    worst, notes, per_output = 0.0, [], {}
    for oname, r in ref.items():
        f = os.path.join(out_dir, sanitize(oname) + ".npy")
        if not os.path.exists(f):
            worst = float("inf")
            notes.append(f"no output file for '{oname}'")
            per_output[oname] = None
            continue
        e, note = rel_error(np.load(f), r)
        per_output[oname] = e
        if note:
            notes.append(f"{oname}: {note}")
        worst = max(worst, e)
    res["max_err"] = worst
    res["output_errors"] = per_output
    if worst <= args.tol:
        res["status"] = "ok"
        if args.speed:
            args.kiln_path = kiln
            measure_speed(res, model, pkg, files, arrays, args)
    else:
        res["status"] = "mismatch"
        worst_name = max(per_output, key=lambda k: float("inf") if per_output[k] is None else per_output[k])
        res["detail"] = "; ".join(notes) if notes else f"worst output '{worst_name}'"
    return res


def finite(x):
    """JSON has no infinity: an infinite error (missing output, shape or NaN mismatch) is written as "inf"."""
    if isinstance(x, float) and not np.isfinite(x):
        return "inf" if x > 0 else str(x)
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [finite(v) for v in x]
    return x


def fmt_err(e):
    if e is None:
        return "-"
    if e == float("inf"):
        return "inf"
    return f"{e:.2e}"


DETAIL_WIDTH = 240


def short(text, width=DETAIL_WIDTH):
    return text if len(text) <= width else text[:width - 3] + "..."


def table(results, speed=False):
    cols = ["model", "opset", "exporter", "category", "groups", "compile_s", "max_err"]
    if speed:
        cols += ["kiln_ms", "ort_ms", "vs_ort"]
    cols.append("status")
    rows = []
    for r in results:
        status = r["status"] + (f": {short(r['detail'])}" if r["detail"] else "")
        row = [r["model"], str(r["opset"] if r["opset"] is not None else "?"), r["exporter"], r["category"],
               "-" if r["groups"] is None else str(r["groups"]),
               "-" if r["compile_s"] is None else f"{r['compile_s']:.1f}", fmt_err(r["max_err"])]
        if speed:
            row += [f"{r['kiln_ms']:.2f}" if r.get("kiln_ms") is not None else "-",
                    f"{r['ort_ms']:.2f}" if r.get("ort_ms") is not None else "-",
                    f"{r['vs_ort']:.2f}" if r.get("vs_ort") is not None else "-"]
        rows.append(row + [status])
    widths = [max(len(c), *(len(row[i]) for row in rows)) if rows else len(c) for i, c in enumerate(cols)]
    widths[-1] = len(cols[-1])
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    out = [line(cols), line(["-" * w for w in widths])]
    out += [line(row) for row in rows]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--kiln", default="build/client/kiln")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--subset", choices=sorted(SUBSETS), help="a predefined subset")
    ap.add_argument("--reviewed", help="file of 'name  # reason' lines: the models expected to fail")
    ap.add_argument("--json", help="write the results as JSON here")
    ap.add_argument("--keep", metavar="WORKDIR", help="keep packages, outputs and the tuning db in WORKDIR")
    ap.add_argument("--compile-timeout", type=int, default=600)
    ap.add_argument("--run-timeout", type=int, default=600)
    ap.add_argument("--tol", type=float, default=TOL)
    ap.add_argument("--trials", type=int, default=0, help="tuning trials per group (0: default schedules)")
    ap.add_argument("--target", help="kiln compile --target (e.g. cuda:sm_90 or cuda: the packages run on this "
                                     "machine's GPU); default: this CPU")
    ap.add_argument("--speed", action="store_true", help="time Kiln against ONNX Runtime (see above)")
    ap.add_argument("--threads", type=int, default=1, help="--speed: threads of both runtimes")
    ap.add_argument("--repeat", type=int, default=20, help="--speed: timed runs per round")
    ap.add_argument("--rounds", type=int, default=2, help="--speed: alternating rounds per runtime")
    ap.add_argument("--ort-denormals-zero", action="store_true",
                    help="--speed: time ORT with session.set_denormal_as_zero=1, as Kiln runs by default")
    ap.add_argument("--no-snapshot", action="store_true",
                    help="run KILN in place (default: copy it and its build-tree libraries to WORKDIR first)")
    a = ap.parse_args()

    kiln = os.path.abspath(a.kiln)
    if not os.path.exists(kiln):
        ap.error(f"{kiln} does not exist")
    metas = load_models(a.corpus)
    by_name = {m["name"]: m for m in metas}
    want = None
    if a.subset:
        want = list(SUBSETS[a.subset])
    if a.only:
        only = [n.strip() for n in a.only.split(",") if n.strip()]
        want = only if want is None else [n for n in want if n in only]
    if want is not None:
        missing = [n for n in want if n not in by_name]
        if missing:
            print(f"run_corpus: not in the corpus: {', '.join(missing)}", file=sys.stderr)
            return 2
        metas = [by_name[n] for n in want]
    reviewed = load_reviewed(a.reviewed) if a.reviewed else None

    if a.keep:
        work = os.path.abspath(a.keep)
        os.makedirs(work, exist_ok=True)
    else:
        work = tempfile.mkdtemp(prefix="kiln-corpus-")
    results = []
    t_all = time.time()
    try:
        if a.no_snapshot:
            a.kiln_env, kiln_desc = None, kiln
        else:
            kiln, a.kiln_env, kiln_desc = snapshot_kiln(kiln, os.path.join(work, "kiln-bin"))
        print(f"kiln: {kiln_desc}", file=sys.stderr, flush=True)
        for i, meta in enumerate(metas, 1):
            t0 = time.time()
            r = run_model(meta, a.corpus, kiln, work, a)
            results.append(r)
            print(f"[{i}/{len(metas)}] {r['model']}: {r['status']}"
                  + (f" ({short(r['detail'])})" if r["detail"] else "")
                  + f" [{time.time() - t0:.1f} s]", file=sys.stderr, flush=True)
            if not a.keep:
                for suffix in (".kpkg", ".out"):
                    p = os.path.join(work, meta["name"] + suffix)
                    shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else (
                        os.remove(p) if os.path.exists(p) else None)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    total_s = time.time() - t_all

    print(f"kiln: {kiln_desc}")
    print(f"corpus: {os.path.abspath(a.corpus)}")
    print()
    print(table(results, a.speed))
    if a.speed:
        ratios = [r["vs_ort"] for r in results if r.get("vs_ort")]
        if ratios:
            geo = float(np.exp(np.mean(np.log(ratios))))
            print()
            print(f"vs ONNX Runtime ({a.threads} thread(s), ORT time / Kiln time): geometric mean {geo:.2f}, "
                  f"min {min(ratios):.2f}, max {max(ratios):.2f}; Kiln faster on "
                  f"{sum(x > 1 for x in ratios)} of {len(ratios)}")
    n_ok = sum(r["status"] == "ok" for r in results)
    counts = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    pct = 100.0 * n_ok / len(results) if results else 0.0
    print()
    print(f"passed {n_ok} of {len(results)} ({pct:.0f}%); "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + f"; {total_s:.0f} s")

    rc = 0 if n_ok == len(results) else 1
    unexpected_fail, unexpected_pass = [], []
    if reviewed is not None:
        for r in results:
            if r["status"] != "ok" and r["model"] not in reviewed:
                unexpected_fail.append(r)
            if r["status"] == "ok" and r["model"] in reviewed:
                unexpected_pass.append(r)
        for r in unexpected_fail:
            print(f"NEW FAILURE (not in {a.reviewed}): {r['model']}: {r['status']}: {r['detail']}")
        for r in unexpected_pass:
            print(f"NOW PASSES (remove it from {a.reviewed}): {r['model']}")
        rc = 1 if unexpected_fail or unexpected_pass else 0
        if rc == 0:
            print(f"every failure is listed in {a.reviewed}, and every listed model that ran still fails")

    if a.json:
        with open(a.json, "w") as f:
            json.dump(finite({"kiln": kiln_desc, "corpus": os.path.abspath(a.corpus), "seconds": round(total_s, 1),
                              "passed": n_ok, "total": len(results), "counts": counts, "results": results,
                              "unexpected_failures": [r["model"] for r in unexpected_fail],
                              "unexpected_passes": [r["model"] for r in unexpected_pass]}),
                      f, indent=2)
            f.write("\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
