#!/usr/bin/env python3
"""Whole-model benchmark: Kiln untuned, Kiln tuned, ONNX Runtime and Apache TVM on the same inputs.

Usage (run it with a Python that has numpy, onnx and onnxruntime, e.g. /work/corpus-venv/bin/python):
  bench/models.py CORPUS_DIR --kiln build/client/kiln [--only NAME,... | --subset ci]
                  [--threads 1,2] [--trials 64] [--repeat 20] [--rounds 3]
                  [--runtimes kiln,kiln-tuned,ort,tvm] [--tvm-python /work/tvm-venv/bin/python]
                  [--ort-denormals-zero]
                  [--json out.json] [--markdown out.md] [--keep WORKDIR] [--tuned-db PATH]
                  [--compile-timeout 1800] [--run-timeout 600] [--slow-s 10] [--tol 1e-3]

CORPUS_DIR is a corpus made by tests/models/corpus/make_corpus.py (NAME.onnx, NAME.json and
NAME.inputs/*.npy); every runtime gets the same .npy inputs. For each model:
  1. ONNX Runtime runs once (1 thread) and keeps its outputs as the reference.
  2. Compile: `kiln compile --trials 0` (kiln: default schedules) and, for each thread count T,
     `kiln compile --trials N --threads T` (kiln-tuned: every fusion group tuned with N measured
     candidates on T threads by the embedded farm; timed at T threads), each
     with its own tuning database in the work dir (the tuned one is new for every invocation unless
     --tuned-db PATH names one to reuse); TVM builds the model once in a child process and exports
     it as a shared library.
  3. Check: the outputs of both Kiln packages and of TVM's library are compared with ORT's:
     error = max|x - ort| / max(1, max|ort|), a match when <= --tol (1e-3). A runtime that does not
     match is still timed, but its vs_ort is marked '*' and left out of the geometric means.
  4. Time, at each thread count: every runtime in a child process of its own (so that its peak RSS
     is its own): `kiln run PKG --repeat R --threads T --json`; ORT and TVM in `models.py --child`,
     which loads the inputs, builds the session (loads the library), runs once to warm up and times
     R runs with time.perf_counter. The runtimes alternate for --rounds rounds (kiln, kiln-tuned, ort,
     tvm, kiln, ...) because the machine is shared and noisy; each runtime keeps its round with the
     lowest median. A runtime whose warm-up run takes more than --slow-s (10 s) is timed over 3 runs
     and in one round only (noted); a child past --run-timeout is killed and noted.
     Kiln's runs treat denormal floats as zero (its runtime's default); ORT keeps them unless
     --ort-denormals-zero sets its session.set_denormal_as_zero (for its reference run too).

Latency table (one row per model and thread count), for each runtime:
  ms       median latency of the best round, in milliseconds
  spread   (p90 - p10) / median of that round, in percent
  vs_ort   ORT median / runtime median: above 1 means faster than ONNX Runtime ('*': the runtime's
           outputs do not match ORT's; left out of the geometric means)
Memory and build table (MB = 2^20 bytes):
  RSS MB       peak resident set of the runtime's process, max over rounds: its ru_maxrss from
               os.wait4, taken in a small spawner process (see SPAWNER: a process forked from this
               script would start with this script's own peak)
  arena MB     Kiln's activation arena (untuned package, from kiln run --json)
  pkg MB       size of the .kpkg file, untuned and tuned
  compile s    wall time of `kiln compile --trials 0`
  tuning s     wall time of `kiln compile --trials N`, summed over the thread counts ('reused': with
               --tuned-db, a database kept
               from an earlier run, so the time is not a tuning time)
  tvm build s  TVM's onnx.load + from_onnx + pipeline + build + export, timed inside its child
  notes        failures (first line of the error) and anything timed differently
After the tables, for each thread count and runtime: the geometric mean of vs_ort, min, max, the
number of models faster than ORT (vs_ort > 1) and at the goal of issue 13 (vs_ort >= 1.1).

TVM (0.27, Relax), untuned as a user would run it: `relax.frontend.onnx.from_onnx` with the static
shapes and dtypes of the .npy inputs, `relax.transform.DecomposeOpsForInference`, then the CPU
backend's default pipeline `relax.get_default_pipeline(target)` (tvm.relax.backend.cpu_generic:
LegalizeOps, FoldConstant, FuseOps, FuseTIR and the VM lowering passes), built by
`tvm.compile(mod, target, relax_pipeline=None)`; if that pipeline fails, plain
`tvm.compile(mod, target)` (the generic "default" build pipeline, which does not fuse) is tried and
noted. Target: {"kind": "llvm", "mcpu": "znver4"} when LLVM knows znver4, else the host CPU as
LLVM names it (what -mcpu=native means). Threads: TVM_NUM_THREADS=T in the child's environment.
The legalized operators have no schedule, so they run on one thread whatever T is. The DLight CPU
rules of 0.27 (GEMV and Reduction) are not applied: they cover no convolution and made squeezenet
slower when tried. MetaSchedule-tuned TVM is left out: in the 0.27 wheel used here any JSON
serialisation of an IRModule (tvm.ir.save_json, which MetaSchedule's database does for every
workload) crashes with a segmentation fault in tvm::ffi::ToJSONGraph, so tuning cannot start.

--json FILE writes every raw number (each round of each runtime); --markdown FILE writes the tables
as GitHub markdown with a header (date, machine, ORT and TVM versions, Kiln binary, command line).
Progress goes to stderr. The exit status is 0 when at least one model produced a time, else 1.
"""
import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "models", "corpus"))
import run_corpus as rc  # noqa: E402

ALL_RUNTIMES = ["kiln", "kiln-tuned", "ort", "tvm"]
DEFAULT_TVM_PYTHON = "/work/tvm-venv/bin/python"
MB = 2 ** 20         # every "MB" in the tables
NOTE_WIDTH = 70      # each note in the table's notes column; the notes list below the tables has more
NOTE_LIST_WIDTH = 400


# ----------------------------------------------------------------------------------------------
# Child mode: one runtime in a process of its own. Prints one JSON line on stdout.
# ----------------------------------------------------------------------------------------------

def error_line(exc):
    """The first informative line of an exception's text, prefixed by its type."""
    lines = [l.strip() for l in str(exc).splitlines() if l.strip()]
    lines = [l for l in lines if not l.startswith(("Traceback", "File ", "^", "~"))] or lines
    text = lines[0] if lines else ""
    name = type(exc).__name__
    return f"{name}: {text}" if text and not text.startswith(name) else (text or name)


def load_inputs(inputs_json):
    """{name: array} from the {name: path.npy} JSON of --inputs-json."""
    return {k: np.load(v) for k, v in json.loads(inputs_json).items()}


def save_outputs(out_dir, names, arrays):
    """Writes each output as OUT_DIR/<name>.npy, named as `kiln run --output-dir` names them."""
    os.makedirs(out_dir, exist_ok=True)
    for name, arr in zip(names, arrays):
        np.save(os.path.join(out_dir, rc.sanitize(name) + ".npy"), np.asarray(arr))


def ort_runner(a, arrays):
    """Builds an ORT session; returns (seconds to build it, output names, run function)."""
    t0 = time.perf_counter()
    session = rc.ort_session(a.model, a.threads, a.ort_denormals_zero)
    build_s = time.perf_counter() - t0
    feed = {i.name: arrays[i.name] for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]
    return build_s, names, lambda: session.run(names, feed)


def tvm_flatten(value):
    """A Relax VM result (a tensor, or nested tuples of them) as a list of numpy arrays."""
    if hasattr(value, "numpy"):
        return [value.numpy()]
    out = []
    for v in value:
        out += tvm_flatten(v)
    return out


def tvm_runner(a, arrays):
    """Loads the library that `--child tvm-build` exported; returns (load seconds, output names, run)."""
    import tvm
    from tvm import relax
    with open(a.lib + ".json") as f:
        side = json.load(f)
    t0 = time.perf_counter()
    lib = tvm.runtime.load_module(a.lib)
    vm = relax.VirtualMachine(lib, tvm.cpu())
    args = [tvm.runtime.tensor(arrays[n]) for n in side["inputs"]]
    main = vm["main"]
    load_s = time.perf_counter() - t0
    return load_s, side["outputs"], lambda: main(*args)


def tvm_target():
    """Zen 4 when this LLVM knows it, else the host CPU (what -mcpu=native resolves to)."""
    import tvm
    from tvm.target import codegen
    cpu = "znver4"
    try:
        if cpu not in codegen.llvm_get_cpu_archlist(tvm.target.Target({"kind": "llvm"})):
            cpu = codegen.llvm_get_system_cpu()
        return tvm.target.Target({"kind": "llvm", "mcpu": cpu})
    except Exception:  # noqa: BLE001
        return tvm.target.Target({"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu()})


def child_tvm_build(a):
    """Imports the ONNX model into Relax, builds it with the CPU default pipeline, exports the library
    to --lib (with LIB.json naming inputs and outputs) and, with --save-outputs, runs it once and
    writes its outputs for the check. Returns the JSON summary."""
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    arrays = load_inputs(a.inputs_json)
    t0 = time.perf_counter()
    model = onnx.load(a.model)
    init = {i.name for i in model.graph.initializer}
    inputs = [v.name for v in model.graph.input if v.name not in init and v.name in arrays]
    mod = from_onnx(model, shape_dict={k: list(arrays[k].shape) for k in inputs},
                    dtype_dict={k: str(arrays[k].dtype) for k in inputs})
    import_s = time.perf_counter() - t0
    target = tvm_target()
    mod = relax.transform.DecomposeOpsForInference()(mod)
    try:
        pipeline = "cpu_generic default pipeline"
        lowered = relax.get_default_pipeline(target)(mod)
        ex = tvm.compile(lowered, target, relax_pipeline=None)
    except Exception as e:  # noqa: BLE001
        pipeline = f"tvm.compile default pipeline (cpu_generic failed: {error_line(e)})"
        ex = tvm.compile(mod, target)
    ex.export_library(a.lib)
    compile_s = time.perf_counter() - t0
    outputs = [o.name for o in model.graph.output]
    with open(a.lib + ".json", "w") as f:
        json.dump({"inputs": inputs, "outputs": outputs}, f)
    res = {"compile_s": round(compile_s, 3), "import_s": round(import_s, 3), "pipeline": pipeline,
           "target": str(target), "lib_bytes": os.path.getsize(a.lib), "version": tvm.__version__}
    if a.save_outputs:
        vm = relax.VirtualMachine(ex, tvm.cpu())
        t1 = time.perf_counter()
        got = tvm_flatten(vm["main"](*[tvm.runtime.tensor(arrays[n]) for n in inputs]))
        res["run_s"] = round(time.perf_counter() - t1, 3)
        save_outputs(a.save_outputs, outputs, got)
    return res


def child_time(a):
    """--child ort|tvm: builds the runtime, runs once to warm up (saving the outputs with
    --save-outputs), then times --repeat runs. Returns the JSON summary."""
    arrays = load_inputs(a.inputs_json)
    if a.child == "ort":
        build_s, names, run = ort_runner(a, arrays)
    else:
        build_s, names, run = tvm_runner(a, arrays)
    t0 = time.perf_counter()
    outs = run()
    warm_s = time.perf_counter() - t0
    if a.save_outputs:
        save_outputs(a.save_outputs, names, outs if a.child == "ort" else tvm_flatten(outs))
    res = {"compile_s": round(build_s, 4), "warmup_ms": round(warm_s * 1e3, 3), "outputs": names}
    if a.child == "ort":
        import onnxruntime
        res["version"] = onnxruntime.__version__
    repeat = a.repeat
    if warm_s > a.slow_s:
        repeat = min(repeat, 3)
        res["slow"] = True
        res["note"] = f"warm-up {warm_s:.1f} s: timed {repeat} runs, 1 round"
    if repeat > 0:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            run()
            times.append((time.perf_counter() - t0) * 1e3)
        res.update(median_ms=round(float(np.median(times)), 4),
                   p10_ms=round(float(np.percentile(times, 10)), 4),
                   p90_ms=round(float(np.percentile(times, 90)), 4), repeat=repeat)
    return res


def child_main(a):
    """Runs the child mode and prints its JSON line; an exception becomes {"error": ...}, exit 1."""
    try:
        res = child_tvm_build(a) if a.child == "tvm-build" else child_time(a)
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        print(json.dumps({"error": error_line(e)}), flush=True)
        return 1
    print(json.dumps(res), flush=True)
    return 0


# ----------------------------------------------------------------------------------------------
# Parent: processes, compiling, checking, timing.
# ----------------------------------------------------------------------------------------------

def log(msg):
    """Progress line on stderr."""
    print(msg, file=sys.stderr, flush=True)


# Runs argv[2:] as its child and writes "EXIT_CODE MAXRSS_KIB" of it to argv[1]. It sits between this
# script and the measured process because a process started by fork/exec keeps the high-water RSS of
# the process it was forked from (Linux records the old image's peak at exec): forked from this
# script, whose peak holds every ONNX file it parsed, a small runtime would report this script's
# peak. Forked from this small spawner (~8 MB), the runtime's ru_maxrss is its own.
SPAWNER = """
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as e:
        print(f"cannot start {sys.argv[2]}: {e}", file=sys.stderr, flush=True)
    os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""


def run_child(cmd, timeout, env=None):
    """Runs cmd through SPAWNER in a process group of its own, which is killed after `timeout`
    seconds. Returns a dict: rc, stdout, stderr, rss_kib (cmd's peak RSS from os.wait4, None when
    killed), wall_s, timed_out."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r", suffix=".rss") as rss_file:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-S", "-I", "-c", SPAWNER, rss_file.name] + cmd,
                             stdout=out, stderr=err, env=env, start_new_session=True)
        timed_out = False
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        wall = time.perf_counter() - t0
        fields = rss_file.read().split()
        code, rss = (int(fields[0]), int(fields[1])) if len(fields) == 2 else (p.returncode, None)
        out.seek(0)
        err.seek(0)
        return {"rc": code, "stdout": out.read().decode(errors="replace"),
                "stderr": err.read().decode(errors="replace"), "rss_kib": rss,
                "wall_s": wall, "timed_out": timed_out}


def last_json(text):
    """The last line of text that parses as a JSON object, or None."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def child_error(r, prefix, timeout):
    """Why a child failed, in one line: timeout, its {"error"} line, a signal, or its stderr."""
    if r["timed_out"]:
        return f"timeout after {timeout} s"
    j = last_json(r["stdout"])
    if j and "error" in j:
        return j["error"]
    why = rc.first_error_line(r["stderr"] + "\n" + r["stdout"], prefix)
    if r["rc"] < 0:  # a crash: its last line is usually a stack frame, which says nothing
        return f"crashed, {rc.describe_rc(r['rc'])}" + ("" if why.startswith("File ") else f": {why}")
    return why


def child_cmd(python, kind, model, files, a, **extra):
    """Command line of a --child process of this script."""
    cmd = [python, os.path.abspath(__file__), "--child", kind, "--model", model,
           "--inputs-json", json.dumps(files), "--slow-s", str(a.slow_s)]
    for k, v in extra.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    if kind == "ort" and a.ort_denormals_zero:
        cmd.append("--ort-denormals-zero")
    return cmd


def tvm_env(threads):
    """Environment of a TVM child: TVM_NUM_THREADS set before tvm is imported."""
    env = dict(os.environ)
    env["TVM_NUM_THREADS"] = str(threads)
    return env


def model_inputs(meta, corpus):
    """{input name: absolute .npy path}, found as run_corpus.run_model finds them."""
    name = meta["name"]
    inp_dir = os.path.join(corpus, name + ".inputs")
    files = meta.get("input_files") or {f[:-4]: os.path.join(name + ".inputs", f)
                                        for f in sorted(os.listdir(inp_dir)) if f.endswith(".npy")}
    return {k: os.path.abspath(os.path.join(corpus, v)) for k, v in files.items()}


def compare_outputs(ref_dir, out_dir, names):
    """Largest rc.rel_error over the outputs `names` of out_dir against ref_dir: (error, detail)."""
    worst, notes = 0.0, []
    for n in names:
        got = os.path.join(out_dir, rc.sanitize(n) + ".npy")
        if not os.path.exists(got):
            worst = float("inf")
            notes.append(f"no output '{n}'")
            continue
        e, note = rc.rel_error(np.load(got), np.load(os.path.join(ref_dir, rc.sanitize(n) + ".npy")))
        if note:
            notes.append(f"{n}: {note}")
        worst = max(worst, e)
    return worst, "; ".join(notes)


def kiln_compile(a, model, files, arrays, pkg, trials, db, threads=1):
    """`kiln compile` into pkg (tuned on `threads` threads); returns a dict: wall_s, compile_seconds,
    trials_measured, package_bytes, groups, or error."""
    cmd = [a.kiln_path, "compile", model, "--trials", str(trials), "--db", db, "-o", pkg, "-q", "--json",
           "--threads", str(threads)]
    cmd += rc.symbolic_shapes(model, arrays)
    step = {}
    p = rc.run_kiln(step, "compile", cmd, a.compile_timeout, a.kiln_env)
    out = {"wall_s": step.get("compile_s")}
    if p is None:
        out["error"] = "compile failed: " + step.get("detail", "?")
        return out
    j = last_json(p.stdout) or {}
    if not os.path.exists(pkg):
        out["error"] = "compile failed: no package written"
        return out
    out.update(compile_seconds=j.get("compile_seconds"), trials_measured=int(j.get("trials_measured", 0)),
               package_bytes=os.path.getsize(pkg), groups=len(j.get("groups", [])))
    return out


def kiln_check(a, pkg, files, ref_dir, out_dir, names):
    """Runs pkg once with --output-dir and compares with ORT's outputs: {"max_err", "ok"} or error."""
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [a.kiln_path, "run", pkg, "--output-dir", out_dir]
    for k, v in files.items():
        cmd += ["--input", f"{k}={v}"]
    step = {}
    if rc.run_kiln(step, "run", cmd, a.run_timeout, a.kiln_env) is None:
        return {"ok": False, "error": "run failed: " + step.get("detail", "?")}
    err, detail = compare_outputs(ref_dir, out_dir, names)
    return {"ok": err <= a.tol, "max_err": err, "detail": detail}


def time_once(a, rt, ctx, threads):
    """One round of runtime rt at `threads`: a dict with median_ms, p10_ms, p90_ms, rss_kib (and
    arena_bytes for Kiln, slow/note for a slow child), or error."""
    files = ctx["files"]
    if rt in ("kiln", "kiln-tuned"):
        pkgs = ctx["pkg"][rt]
        pkg = pkgs.get(threads, pkgs.get(1))  # the tuned package of this thread count; untuned: the one
        cmd = [a.kiln_path, "run", pkg, "--repeat", str(a.repeat), "--threads", str(threads), "--json"]
        for k, v in files.items():
            cmd += ["--input", f"{k}={v}"]
        r = run_child(cmd, a.run_timeout, a.kiln_env)
        prefix = "kiln run:"
    elif rt == "ort":
        r = run_child(child_cmd(sys.executable, "ort", ctx["model"], files, a, threads=threads, repeat=a.repeat),
                      a.run_timeout)
        prefix = "Error"
    else:
        r = run_child(child_cmd(a.tvm_python, "tvm", ctx["model"], files, a, threads=threads, repeat=a.repeat,
                                lib=ctx["tvm_lib"]), a.run_timeout, tvm_env(threads))
        prefix = "Error"
    j = last_json(r["stdout"])
    if r["rc"] != 0 or not j or "median_ms" not in j:
        return {"error": child_error(r, prefix, a.run_timeout), "rss_kib": r["rss_kib"],
                "timed_out": r["timed_out"]}
    keep = ("median_ms", "p10_ms", "p90_ms", "repeat", "arena_bytes", "compile_s", "warmup_ms", "slow", "note")
    out = {k: j[k] for k in keep if k in j}
    out["rss_kib"] = r["rss_kib"]
    out["wall_s"] = round(r["wall_s"], 3)
    return out


def time_runtimes(a, ctx, runtimes, threads):
    """Alternates the runtimes for --rounds rounds at `threads`; returns {runtime: result}, where
    result is the round with the lowest median plus spread_pct, peak_rss_kib (max over rounds) and
    rounds (every round), or an error."""
    rounds = {rt: [] for rt in runtimes}
    stopped = set()
    for _ in range(a.rounds):
        for rt in runtimes:
            if rt in stopped:
                continue
            r = time_once(a, rt, ctx, threads)
            rounds[rt].append(r)
            if "error" in r or r.get("slow") or r.get("median_ms", 0) > a.slow_s * 1e3:
                stopped.add(rt)  # a failure or a slow runtime is not repeated
    results = {}
    for rt, rs in rounds.items():
        good = [r for r in rs if "median_ms" in r]
        peak = max((r.get("rss_kib") or 0 for r in rs), default=0)
        if not good:
            results[rt] = {"error": rs[-1]["error"] if rs else "not run", "peak_rss_kib": peak, "rounds": rs}
            continue
        best = dict(min(good, key=lambda r: r["median_ms"]))
        best["spread_pct"] = (100.0 * (best["p90_ms"] - best["p10_ms"]) / best["median_ms"]
                              if best["median_ms"] > 0 else None)
        best["peak_rss_kib"] = peak
        best["rounds"] = rs
        if len(good) < len(rs):
            best["note"] = (best.get("note", "") + "; " if best.get("note") else "") + \
                f"{len(rs) - len(good)} round(s) failed: {rs[-1].get('error', '?')}"
        results[rt] = best
    return results


def bench_model(meta, a, work, runtimes):
    """Compiles, checks and times one model; returns its result dict (see --json)."""
    name = meta["name"]
    t_model = time.time()
    model = os.path.abspath(os.path.join(a.corpus, name + ".onnx"))
    mdir = os.path.join(work, name)
    shutil.rmtree(mdir, ignore_errors=True)
    os.makedirs(mdir)
    res = {"model": name, "category": meta.get("category"), "notes": [], "compile": {}, "check": {},
           "times": {}}
    files = model_inputs(meta, a.corpus)
    arrays = {k: np.load(v) for k, v in files.items()}
    ctx = {"model": model, "files": files, "pkg": {}, "tvm_lib": None}
    active = list(runtimes)

    # 1. ORT reference outputs (also the check that ORT runs the model at all).
    ref_dir = os.path.join(mdir, "ort.out")
    r = run_child(child_cmd(sys.executable, "ort", model, files, a, threads=1, repeat=0, save_outputs=ref_dir),
                  a.run_timeout)
    j = last_json(r["stdout"])
    out_names = None
    if r["rc"] == 0 and j and "outputs" in j:
        out_names = j["outputs"]
        res["ort_version"] = j.get("version")
    else:
        why = child_error(r, "Error", a.run_timeout)
        res["notes"].append(f"ort: {why} (nothing checked)")
        if "ort" in active:
            active.remove("ort")
        log(f"  {name}: ort failed: {why}")

    # 2. Compile: untuned once; tuned once per thread count, on that many threads (as a deployment
    # that runs on T threads compiles with --threads T).
    for rt, trials, db in (("kiln", 0, a.untuned_db), ("kiln-tuned", a.trials, a.tuned_db)):
        if rt not in active:
            continue
        tuned = rt == "kiln-tuned"
        ctx["pkg"][rt] = {}
        for threads in a.thread_list if tuned else [1]:
            pkg = os.path.join(mdir, f"{rt}.t{threads}.kpkg" if tuned else rt + ".kpkg")
            c = kiln_compile(a, model, files, arrays, pkg, trials, db, threads)
            if "error" in c:
                res["compile"][rt] = c
                res["notes"].append(f"{rt}: {c['error']}")
                active.remove(rt)
                log(f"  {name}: {rt} {c['error']}")
                break
            if rt in res["compile"]:  # tuning time over every thread count
                res["compile"][rt]["wall_s"] += c["wall_s"]
                res["compile"][rt]["trials_measured"] += c["trials_measured"]
            else:
                res["compile"][rt] = c
            ctx["pkg"][rt][threads] = pkg
            log(f"  {name}: {rt} compiled{f' for {threads} thread(s)' if tuned else ''} in {c['wall_s']:.1f} s "
                f"({c['groups']} groups, {c['trials_measured']} trials measured, {c['package_bytes'] / MB:.1f} MB)")
    if "tvm" in active:
        lib = os.path.join(mdir, "tvm.so")
        tvm_out = os.path.join(mdir, "tvm.out")
        extra = {"lib": lib}
        if out_names is not None:
            extra["save_outputs"] = tvm_out
        r = run_child(child_cmd(a.tvm_python, "tvm-build", model, files, a, **extra), a.compile_timeout, tvm_env(1))
        j = last_json(r["stdout"])
        if r["rc"] == 0 and j and "compile_s" in j:
            j["rss_kib"] = r["rss_kib"]
            res["compile"]["tvm"] = j
            ctx["tvm_lib"] = lib
            if not j["pipeline"].startswith("cpu_generic"):
                res["notes"].append(f"tvm: built by {j['pipeline']}")
            log(f"  {name}: tvm built in {j['compile_s']:.1f} s")
        else:
            why = child_error(r, "Error", a.compile_timeout)
            res["compile"]["tvm"] = {"error": why, "rss_kib": r["rss_kib"]}
            res["notes"].append(f"tvm: {why}")
            active.remove("tvm")
            log(f"  {name}: tvm failed: {why}")

    # 3. Check the outputs against ORT's.
    if out_names is not None:
        for rt in ("kiln", "kiln-tuned"):
            for threads, pkg in ctx["pkg"].get(rt, {}).items() if rt in active else []:
                chk = kiln_check(a, pkg, files, ref_dir, os.path.join(mdir, f"{rt}.t{threads}.out"), out_names)
                if rt not in res["check"] or not chk.get("ok"):  # the worst package's result
                    res["check"][rt] = chk
        if "tvm" in active:
            err, detail = compare_outputs(ref_dir, os.path.join(mdir, "tvm.out"), out_names)
            res["check"]["tvm"] = {"ok": err <= a.tol, "max_err": err, "detail": detail}
        for rt, chk in res["check"].items():
            if chk.get("error"):
                res["notes"].append(f"{rt}: check {chk['error']}")
            elif not chk["ok"]:
                res["notes"].append(f"{rt}: MISMATCH max_err {rc.fmt_err(chk['max_err'])}"
                                    + (f" ({chk['detail']})" if chk["detail"] else ""))
        log(f"  {name}: check " + ", ".join(
            f"{rt} {'ok' if c.get('ok') else 'MISMATCH' if 'max_err' in c else 'failed'}"
            + (f" ({rc.fmt_err(c['max_err'])})" if "max_err" in c else "") for rt, c in res["check"].items()))

    # 4. Time.
    for threads in a.thread_list:
        if not active:
            break
        t = time_runtimes(a, ctx, active, threads)
        res["times"][str(threads)] = t
        log(f"  {name}: {threads} thread(s): " + ", ".join(
            f"{rt} {fmt_ms(v.get('median_ms'))} ms" if "median_ms" in v else f"{rt} failed"
            for rt, v in t.items()))
        for rt, v in t.items():
            note = v.get("error") or v.get("note")
            if note:
                res["notes"].append(f"{rt} @{threads}: {'failed: ' if 'error' in v else ''}{note}")
    res["seconds"] = round(time.time() - t_model, 1)
    if not a.keep:
        shutil.rmtree(mdir, ignore_errors=True)
    return res


# ----------------------------------------------------------------------------------------------
# Tables and summary.
# ----------------------------------------------------------------------------------------------

def fmt_ms(v):
    """A latency in ms with about four significant digits."""
    if v is None:
        return "-"
    return f"{v:.1f}" if v >= 100 else f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def fmt(v, spec):
    """format(v, spec), or '-' for None."""
    return "-" if v is None else format(v, spec)


def vs_ort(res, threads, rt):
    """(ORT median / rt median, whether it counts: rt's outputs matched ORT's), or (None, False)."""
    t = res["times"].get(str(threads), {})
    mine, ort = t.get(rt, {}), t.get("ort", {})
    if "median_ms" not in mine or "median_ms" not in ort or mine["median_ms"] <= 0:
        return None, False
    return ort["median_ms"] / mine["median_ms"], bool(res["check"].get(rt, {}).get("ok"))


def latency_table(results, a, runtimes):
    """(columns, rows) of the latency table."""
    cols = ["model", "thr"]
    for rt in runtimes:
        cols += [f"{rt} ms", f"{rt} spread%"] + ([f"{rt} vs_ort"] if rt != "ort" else [])
    rows = []
    for res in results:
        for threads in a.thread_list:
            t = res["times"].get(str(threads), {})
            row = [res["model"], str(threads)]
            for rt in runtimes:
                v = t.get(rt, {})
                row += [fmt_ms(v.get("median_ms")), fmt(v.get("spread_pct"), ".1f")]
                if rt != "ort":
                    ratio, counts = vs_ort(res, threads, rt)
                    row.append("-" if ratio is None else f"{ratio:.2f}" + ("" if counts else "*"))
            rows.append(row)
    return cols, rows


def memory_table(results, a, runtimes):
    """(columns, rows) of the memory / size / build-time table."""
    cols = ["model", "thr"] + [f"{rt} RSS MB" for rt in runtimes]
    kiln_cols = [c for c in ("kiln", "kiln-tuned") if c in runtimes]
    cols += ["arena MB"] * ("kiln" in runtimes) + [f"{rt} pkg MB" for rt in kiln_cols]
    cols += ["compile s"] * ("kiln" in runtimes) + ["tuning s"] * ("kiln-tuned" in runtimes)
    cols += ["tvm build s"] * ("tvm" in runtimes) + ["notes"]
    rows = []
    for res in results:
        comp = res["compile"]
        for i, threads in enumerate(a.thread_list):
            t = res["times"].get(str(threads), {})
            row = [res["model"], str(threads)]
            row += [fmt(t[rt]["peak_rss_kib"] * 1024 / MB if t.get(rt, {}).get("peak_rss_kib") else None, ".0f")
                    for rt in runtimes]
            if "kiln" in runtimes:
                arena = t.get("kiln", {}).get("arena_bytes")
                row.append(fmt(arena / MB if arena is not None else None, ".1f"))
            for rt in kiln_cols:
                size = comp.get(rt, {}).get("package_bytes")
                row.append(fmt(size / MB if size is not None else None, ".1f"))
            if "kiln" in runtimes:
                row.append(fmt(comp.get("kiln", {}).get("wall_s") if "package_bytes" in comp.get("kiln", {})
                               else None, ".1f"))
            if "kiln-tuned" in runtimes:
                c = comp.get("kiln-tuned", {})
                s = c.get("wall_s") if "package_bytes" in c else None
                row.append("-" if s is None else f"{s:.1f}" + (" reused" if a.tuned_db_reused else ""))
            if "tvm" in runtimes:
                row.append(fmt(comp.get("tvm", {}).get("compile_s"), ".1f"))
            notes = res["notes"] if i == 0 else []
            row.append("; ".join(rc.short(n, NOTE_WIDTH) for n in notes))
            rows.append(row)
    return cols, rows


def summary(results, a, runtimes):
    """Per thread count and runtime (ORT aside): geometric mean, min, max of vs_ort and counts."""
    out = []
    for threads in a.thread_list:
        for rt in runtimes:
            if rt == "ort":
                continue
            ratios = []
            for res in results:
                ratio, counts = vs_ort(res, threads, rt)
                if ratio is not None and counts:
                    ratios.append(ratio)
            s = {"threads": threads, "runtime": rt, "n": len(ratios)}
            if ratios:
                s.update(geomean=float(np.exp(np.mean(np.log(ratios)))), min=min(ratios), max=max(ratios),
                         faster=sum(x > 1 for x in ratios), at_goal=sum(x >= 1.1 for x in ratios))
            out.append(s)
    return out


def summary_table(summ):
    """(columns, rows) of the summary."""
    cols = ["thr", "runtime", "models", "geomean vs_ort", "min", "max", "faster than ORT", "vs_ort >= 1.1"]
    rows = []
    for s in summ:
        if not s["n"]:
            rows.append([str(s["threads"]), s["runtime"], "0", "-", "-", "-", "-", "-"])
            continue
        rows.append([str(s["threads"]), s["runtime"], str(s["n"]), f"{s['geomean']:.2f}", f"{s['min']:.2f}",
                     f"{s['max']:.2f}", f"{s['faster']} of {s['n']}", f"{s['at_goal']} of {s['n']}"])
    return cols, rows


def render(cols, rows, markdown=False):
    """A table as aligned plain text, or as GitHub markdown."""
    if markdown:
        esc = lambda s: s.replace("|", "\\|")  # noqa: E731
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    return "\n".join([line(cols), line(["-" * w for w in widths])] + [line(r) for r in rows])


def machine_description():
    """'<lscpu model name>, N CPUs'."""
    model = "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs"


def python_version_of(python, module):
    """(version of `module` importable by `python`, None) or (None, why not)."""
    try:
        p = subprocess.run([python, "-c", f"import {module}; print({module}.__version__)"],
                           capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    if p.returncode != 0:
        return None, rc.first_error_line(p.stderr, "Error")
    return p.stdout.strip().splitlines()[-1], None


def report(results, a, runtimes, header, markdown=False):
    """The tables and summary as text or markdown."""
    lat = latency_table(results, a, runtimes)
    mem = memory_table(results, a, runtimes)
    summ = summary(results, a, runtimes)
    notes = [f"{r['model']}: {rc.short(n, NOTE_LIST_WIDTH)}" for r in results for n in r["notes"]]
    parts = []
    if markdown:
        parts.append("# Whole models: Kiln, ONNX Runtime, TVM\n")
        parts += [f"- {k}: {v}" for k, v in header.items()]
        parts.append("")
        parts += ["## Latency", "", render(*lat, True), "",
                  "## Memory, sizes, build times", "", render(*mem, True), "",
                  "## vs ONNX Runtime (ORT ms / runtime ms; mismatching outputs left out)", "",
                  render(*summary_table(summ), True)]
        if notes:
            parts += ["", "## Notes", ""] + [f"- {n}" for n in notes]
        parts.append("\nColumns: see the docstring of bench/models.py.")
    else:
        parts += [f"{k}: {v}" for k, v in header.items()]
        parts += ["", "Latency", render(*lat), "", "Memory, sizes, build times", render(*mem), "",
                  "vs ONNX Runtime (ORT ms / runtime ms; mismatching outputs left out)",
                  render(*summary_table(summ))]
        if notes:
            parts += ["", "Notes"] + notes
    return "\n".join(parts) + "\n"


def parse_args(argv):
    """Command-line options (the --child ones are hidden)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="?")
    ap.add_argument("--kiln", default="build/client/kiln")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--subset", choices=sorted(rc.SUBSETS), help="a predefined subset (run_corpus.SUBSETS)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--trials", type=int, default=64, help="kiln-tuned: measured candidates per group")
    ap.add_argument("--repeat", type=int, default=20, help="timed runs per round")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per runtime")
    ap.add_argument("--runtimes", help=f"comma-separated, of {','.join(ALL_RUNTIMES)} "
                                       "(default: all, tvm only when its Python imports tvm)")
    ap.add_argument("--ort-denormals-zero", action="store_true",
                    help="run ORT with session.set_denormal_as_zero=1, as Kiln's runtime runs by default")
    ap.add_argument("--tvm-python", default=DEFAULT_TVM_PYTHON, help="a Python with tvm, onnx and numpy")
    ap.add_argument("--json", help="write every raw number here")
    ap.add_argument("--markdown", help="write the tables as GitHub markdown here")
    ap.add_argument("--keep", metavar="WORKDIR", help="keep packages, libraries, outputs and databases here")
    ap.add_argument("--tuned-db", help="kiln-tuned: reuse this tuning database (default: a new one)")
    ap.add_argument("--compile-timeout", type=int, default=1800, help="seconds per compile (tuning included)")
    ap.add_argument("--run-timeout", type=int, default=600, help="seconds per run child")
    ap.add_argument("--slow-s", type=float, default=10.0,
                    help="a warm-up run longer than this: 3 timed runs and one round")
    ap.add_argument("--tol", type=float, default=rc.TOL)
    ap.add_argument("--child", choices=["ort", "tvm", "tvm-build"], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--inputs-json", help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    ap.add_argument("--save-outputs", help=argparse.SUPPRESS)
    return ap, ap.parse_args(argv)


def select_models(ap, a):
    """The corpus metas that --only / --subset select, in order."""
    metas = rc.load_models(a.corpus)
    by_name = {m["name"]: m for m in metas}
    want = list(rc.SUBSETS[a.subset]) if a.subset else None
    if a.only:
        only = [n.strip() for n in a.only.split(",") if n.strip()]
        want = only if want is None else [n for n in want if n in only]
    if want is None:
        return metas
    missing = [n for n in want if n not in by_name]
    if missing:
        ap.error(f"not in the corpus: {', '.join(missing)}")
    return [by_name[n] for n in want]


def main(argv=None):
    ap, a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.child:
        a.threads = int(a.threads.split(",")[0])
        return child_main(a)
    if not a.corpus:
        ap.error("CORPUS_DIR is required")
    a.thread_list = [int(x) for x in a.threads.split(",") if x.strip()]
    a.kiln_path = os.path.abspath(a.kiln)
    if not os.path.exists(a.kiln_path):
        ap.error(f"{a.kiln_path} does not exist")
    metas = select_models(ap, a)

    runtimes = [r.strip() for r in a.runtimes.split(",")] if a.runtimes else list(ALL_RUNTIMES)
    unknown = [r for r in runtimes if r not in ALL_RUNTIMES]
    if unknown:
        ap.error(f"unknown runtime(s): {', '.join(unknown)}")
    runtimes = [r for r in ALL_RUNTIMES if r in runtimes]
    ort_version, why = python_version_of(sys.executable, "onnxruntime")
    if ort_version is None:
        log(f"models: onnxruntime cannot be imported by {sys.executable} ({why}): no reference, no ORT times")
        runtimes = [r for r in runtimes if r != "ort"]
    tvm_version = None
    if "tvm" in runtimes:
        tvm_version, why = python_version_of(a.tvm_python, "tvm")
        if tvm_version is None:
            log(f"models: skipping tvm: {a.tvm_python} cannot import tvm ({why})")
            runtimes.remove("tvm")

    if a.keep:
        work = os.path.abspath(a.keep)
        os.makedirs(work, exist_ok=True)
    else:
        work = tempfile.mkdtemp(prefix="kiln-models-")
    a.untuned_db = os.path.join(work, "untuned.db")
    a.tuned_db_reused = bool(a.tuned_db)
    a.tuned_db = os.path.abspath(a.tuned_db) if a.tuned_db else os.path.join(work, "tuned.db")
    dbs = [a.untuned_db] + ([] if a.tuned_db_reused else [a.tuned_db])
    for db in dbs:  # new databases (and their artifact stores) for every invocation
        for path in (db, db + "-wal", db + "-shm", db + "-journal", db + ".artifacts"):
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)

    results = []
    t_all = time.time()
    date = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    try:
        a.kiln_path, a.kiln_env, kiln_desc = rc.snapshot_kiln(a.kiln_path, os.path.join(work, "kiln-bin"))
        log(f"kiln: {kiln_desc}")
        log(f"runtimes: {', '.join(runtimes)}; threads {a.threads}; work dir {work}")
        for i, meta in enumerate(metas, 1):
            log(f"[{i}/{len(metas)}] {meta['name']}")
            res = bench_model(meta, a, work, runtimes)
            results.append(res)
            log(f"[{i}/{len(metas)}] {meta['name']}: done in {res['seconds']:.0f} s")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)

    pipeline = next((r["compile"]["tvm"].get("pipeline") for r in results
                     if r["compile"].get("tvm", {}).get("pipeline", "").startswith("cpu_generic")), None)
    target = next((r["compile"]["tvm"].get("target") for r in results if r["compile"].get("tvm", {}).get("target")),
                  None)
    header = {
        "date": date,
        "machine": machine_description(),
        "ONNX Runtime": ort_version or "not available",
        "TVM": (f"{tvm_version} ({a.tvm_python}); pipeline: {pipeline or 'cpu_generic default pipeline'}; "
                f"target {target or '?'}") if tvm_version else "not run",
        "Kiln": kiln_desc,
        "Kiln tuning": "not run" if "kiln-tuned" not in runtimes else f"--trials {a.trials}, " + (
            f"database {a.tuned_db} reused" if a.tuned_db_reused else "new database"),
        "timing": f"{a.rounds} alternating rounds of {a.repeat} runs, best median per runtime",
        "command": " ".join(shlex.quote(x) for x in [sys.executable] + sys.argv),
        "total": f"{time.time() - t_all:.0f} s",
    }
    print(report(results, a, runtimes, header))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(report(results, a, runtimes, header, markdown=True))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rc.finite({"header": header, "runtimes": runtimes, "threads": a.thread_list,
                                 "summary": summary(results, a, runtimes), "results": results}), f, indent=2)
            f.write("\n")
    produced = any("median_ms" in v for r in results for t in r["times"].values() for v in t.values())
    return 0 if produced else 1


if __name__ == "__main__":
    sys.exit(main())
