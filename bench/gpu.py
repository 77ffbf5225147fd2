#!/usr/bin/env python3
"""GPU benchmark: Kiln's CUDA packages against PyTorch on the same GPU, in one run.

Usage, on a host with an NVIDIA GPU, its driver, and a Python with torch (CUDA), numpy and onnx:
  bench/gpu.py --build BUILD_DIR [--work DIR] [--trials 32] [--parts gemm,elementwise,models]
               [--gemm 1024,2048,4096,8192] [--models resnet18,mobilenet_v3_large,encoder,TORCHVISION_NAME...]
               [--batches 1,32] [--repeat 50] [--markdown out.md] [--json out.json]
               [--torch-compile MODE|none] [--compile-only]

What it does:
  1. Starts a farm of real processes on 127.0.0.1: BUILD/server/kiln-server over a fresh
     tuning database in the work dir, and BUILD/worker/kiln-worker --device cuda:0. The worker
     measures in its device process, assembling with the ptxas on the PATH or in /usr/local/cuda.
  2. For each case, writes an ONNX model and compiles it with
     `kiln compile --target cuda --trials N`: every fusion group is tuned on this GPU, N
     candidates each. With --trials 0 the default schedules are used, which shows what a user who
     never tunes gets.
  3. Runs the package once on random inputs and checks its outputs against a float64 reference
     (NumPy, or the PyTorch model in float64 on the CPU): ||kiln - ref|| / ||ref|| is the table's
     rel_err, and a case above 1e-4 is marked WRONG. Then times it with
     `kiln run PKG --repeat R --profile 1000 --json`.
     Kiln's time is the device time of its kernels: the sum of the per-group CUDA-event times of
     --profile, per run. The wall time of `kiln run`, which includes copying the inputs and
     outputs between host and device, is reported beside it.
  4. Times the peer in this process, on device-resident tensors, with CUDA events around
     R runs after 5 warm-up runs. The median of 5 rounds of R/5 runs is used.
     - GEMM: torch.matmul at fp32 (TF32 off), TF32 and fp16 (cuBLAS).
     - Elementwise: a fused chain y = sigmoid(relu(x * 2 + 1)) * x over 2^26 floats, against the
       device-to-device copy bandwidth of the same bytes (torch's clone), as a share of it.
     - Models: torch eager (fp32, TF32 off) and torch.compile (--torch-compile, by default
       mode="max-autotune-no-cudagraphs" when it works; else default mode, noted) at each batch. Also ONNX Runtime's CUDA execution
       provider, when onnxruntime has it.
  5. Prints one markdown table per part: Kiln ms (device), Kiln wall ms, the peer's ms, the ratio
     (peer / Kiln: above 1 means Kiln is faster), TFLOP/s or GB/s, the compile and tuning seconds.

--compile-only writes and compiles every case for --target cuda:sm_90 untuned (no GPU needed) and
stops: a check that the benchmark's models compile, which runs on any machine.

Kiln's GPU kernels are fp32 on CUDA cores today (no tensor cores yet: docs/decisions/0008),
so the TF32 and fp16 columns measure what cuBLAS gains over it, and Kiln has no entry there.
"""
import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- models -----------------------------------------------------------------------------------

def write_matmul(path, n):
    import onnx
    from onnx import TensorProto, helper
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], f"matmul{n}", [a, b], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def write_elementwise(path, elements):
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [elements])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [elements])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["t0"]),
        helper.make_node("Add", ["t0", "one"], ["t1"]),
        helper.make_node("Relu", ["t1"], ["t2"]),
        helper.make_node("Sigmoid", ["t2"], ["t3"]),
        helper.make_node("Mul", ["t3", "x"], ["y"]),
    ]
    g = helper.make_graph(nodes, "chain", [x], [y], initializer=[two, one])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def torch_model(name):
    import torch
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(weights=None).eval(), lambda b: (torch.randn(b, 3, 224, 224),)
    if name == "mobilenet_v3_large":
        import torchvision
        return torchvision.models.mobilenet_v3_large(weights=None).eval(), lambda b: (torch.randn(b, 3, 224, 224),)
    if name == "encoder":
        # A BERT-base-style encoder layer stack (12 heads, 768 wide, 4 layers), sequence 128.
        layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True)
        model = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).eval()
        return model, lambda b: (torch.randn(b, 128, 768),)
    import torchvision
    if name in torchvision.models.list_models(module=torchvision.models):
        # Any other torchvision classifier, random weights, 224x224.
        return torchvision.models.get_model(name, weights=None).eval(), lambda b: (torch.randn(b, 3, 224, 224),)
    raise SystemExit(f"unknown model {name}")


def export(name, batch, path):
    import torch
    torch.manual_seed(0)
    model, inputs = torch_model(name)
    example = inputs(batch)
    try:
        torch.onnx.export(model, example, path, input_names=["x"], output_names=["y"], opset_version=17,
                          dynamo=False)
    except Exception as e:  # noqa: BLE001 - a torch without the TorchScript exporter: its dynamo one
        log(f"{name}: the TorchScript exporter failed ({type(e).__name__}: {e}); exporting with dynamo")
        torch.onnx.export(model, example, path, input_names=["x"], output_names=["y"], opset_version=18,
                          dynamo=True, external_data=False)
    return model, example


# ---- the farm ---------------------------------------------------------------------------------

class Farm:
    def __init__(self, build, work):
        self.build = build
        self.dir = os.path.join(work, "farm")
        os.makedirs(self.dir, exist_ok=True)
        port_file = os.path.join(self.dir, "port")
        self.server = subprocess.Popen(
            [os.path.join(build, "server/kiln-server"), "--listen", "127.0.0.1:0", "--db",
             os.path.join(self.dir, "tuning.db"), "--port-file", port_file],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "server.log"), "w"))
        for _ in range(200):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.05)
        self.address = "127.0.0.1:" + open(port_file).read().strip()
        self.worker = subprocess.Popen(
            [os.path.join(build, "worker/kiln-worker"), "--server", self.address, "--device", "cuda:0"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "worker.log"), "w"))
        time.sleep(3)
        if self.worker.poll() is not None:
            raise SystemExit("kiln-worker --device cuda:0 did not start: " + open(os.path.join(self.dir, "worker.log")).read())

    def stop(self):
        for p in (self.worker, self.server):
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)


def kiln(build, *args, check=True):
    r = subprocess.run([os.path.join(build, "client/kiln"), *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"kiln {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r


def compile_case(args, farm, onnx_path, pkg_path, shapes):
    flags = ["compile", onnx_path, "--target", "cuda:sm_90" if args.compile_only else "cuda",
             "--trials", str(0 if args.compile_only else args.trials), "--json", "-o", pkg_path]
    for name, dims in shapes.items():
        flags += ["--shape", f"{name}={','.join(str(d) for d in dims)}"]
    if farm is not None:
        flags += ["--server", farm.address]
    else:
        flags += ["--db", os.path.join(args.work, "local.db")]
    t0 = time.time()
    out = json.loads(kiln(args.build, *flags).stdout)
    return out, time.time() - t0


def time_package(args, pkg_path, inputs):
    """Runs the package once for its outputs, then times it. Returns (device ms, wall ms, outputs)."""
    flags = []
    for name, array in inputs.items():
        path = os.path.join(args.work, f"{name}.npy")
        np.save(path, array)
        flags += ["--input", f"{name}={path}"]
    out_dir = os.path.join(args.work, "out")
    shutil.rmtree(out_dir, ignore_errors=True)
    kiln(args.build, "run", pkg_path, *flags, "--output-dir", out_dir)
    outputs = {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir) if f.endswith(".npy")}
    out = json.loads(kiln(args.build, "run", pkg_path, *flags, "--repeat", str(args.repeat), "--profile", "1000",
                          "--json").stdout)
    device_ms = sum(g["ms"] for g in out.get("profile", []))
    return device_ms, out["median_ms"], outputs


def relative_error(got, want):
    """||got - want|| / ||want|| in float64; inf when the shapes differ or got has a NaN."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return math.inf
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


# Kiln's GPU kernels are fp32; against an fp32 reference a sum in another order lands far below this.
MAX_RELATIVE_ERROR = 1e-4


def checked(row, error):
    row["rel_err"] = error
    row["correct"] = error <= MAX_RELATIVE_ERROR
    if not row["correct"]:
        log(f"WRONG: {row['case']}: relative error {error:.3g} > {MAX_RELATIVE_ERROR}")


def cuda_time(fn, repeat):
    import torch
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    rounds = []
    per = max(1, repeat // 5)
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(per):
            fn()
        end.record()
        end.synchronize()
        rounds.append(start.elapsed_time(end) / per)
    return float(np.median(rounds))


# ---- parts ------------------------------------------------------------------------------------

def gemm(args, farm, rows):
    import torch
    for n in args.gemm:
        path = os.path.join(args.work, f"matmul{n}.onnx")
        write_matmul(path, n)
        pkg = path.replace(".onnx", ".kpkg")
        result, seconds = compile_case(args, farm, path, pkg, {})
        row = {"part": "gemm", "case": f"{n}^3 fp32", "compile_s": round(seconds, 1),
               "trials": result.get("trials_measured", 0)}
        if not args.compile_only:
            rng = np.random.default_rng(n)
            a_host = rng.standard_normal((n, n), dtype=np.float32)
            b_host = rng.standard_normal((n, n), dtype=np.float32)
            device_ms, wall_ms, outputs = time_package(args, pkg, {"a": a_host, "b": b_host})
            a = torch.from_numpy(a_host).cuda()
            b = torch.from_numpy(b_host).cuda()
            flops = 2.0 * n ** 3
            peers = {}
            torch.backends.cuda.matmul.allow_tf32 = False
            checked(row, relative_error(outputs["y"], torch.matmul(a.double(), b.double()).cpu().numpy()))
            peers["cublas_fp32"] = cuda_time(lambda: torch.matmul(a, b), args.repeat)
            torch.backends.cuda.matmul.allow_tf32 = True
            peers["cublas_tf32"] = cuda_time(lambda: torch.matmul(a, b), args.repeat)
            torch.backends.cuda.matmul.allow_tf32 = False
            ah, bh = a.half(), b.half()
            peers["cublas_fp16"] = cuda_time(lambda: torch.matmul(ah, bh), args.repeat)
            row.update({"kiln_ms": device_ms, "kiln_wall_ms": wall_ms, "kiln_tflops": flops / device_ms / 1e9,
                        **{k: v for k, v in peers.items()},
                        "vs_cublas_fp32": peers["cublas_fp32"] / device_ms})
        rows.append(row)
        log(json.dumps(row))


def elementwise(args, farm, rows):
    import torch
    elements = 1 << 26
    path = os.path.join(args.work, "chain.onnx")
    write_elementwise(path, elements)
    pkg = path.replace(".onnx", ".kpkg")
    result, seconds = compile_case(args, farm, path, pkg, {})
    row = {"part": "elementwise", "case": "x*2+1, relu, sigmoid, *x over 2^26 f32", "compile_s": round(seconds, 1),
           "trials": result.get("trials_measured", 0)}
    if not args.compile_only:
        x_host = np.random.default_rng(1).standard_normal(elements, dtype=np.float32)
        device_ms, wall_ms, outputs = time_package(args, pkg, {"x": x_host})
        xd = x_host.astype(np.float64)
        checked(row, relative_error(outputs["y"], xd / (1 + np.exp(-np.maximum(xd * 2 + 1, 0)))))
        x = torch.from_numpy(x_host).cuda()
        copy_ms = cuda_time(lambda: x.clone(), args.repeat)
        moved = 2 * 4 * elements  # read x, write y: the same bytes as a copy
        row.update({"kiln_ms": device_ms, "kiln_wall_ms": wall_ms, "kiln_gbs": moved / device_ms / 1e6,
                    "copy_ms": copy_ms, "copy_gbs": moved / copy_ms / 1e6, "share_of_copy": copy_ms / device_ms})
    rows.append(row)
    log(json.dumps(row))


def models(args, farm, rows):
    import torch
    for name in args.models:
        for batch in args.batches:
            path = os.path.join(args.work, f"{name}_b{batch}.onnx")
            model, example = export(name, batch, path)
            pkg = path.replace(".onnx", ".kpkg")
            result, seconds = compile_case(args, farm, path, pkg, {})
            row = {"part": "models", "case": f"{name} batch {batch}", "compile_s": round(seconds, 1),
                   "trials": result.get("trials_measured", 0)}
            if not args.compile_only:
                device_ms, wall_ms, outputs = time_package(args, pkg, {"x": example[0].numpy()})
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
                with torch.no_grad():
                    want = model.double()(example[0].double()).numpy()
                checked(row, relative_error(outputs["y"], want))
                m = model.float().cuda()
                x = example[0].cuda()
                with torch.no_grad():
                    eager = cuda_time(lambda: m(x), args.repeat)
                    note, inductor = "", None
                    if args.torch_compile != "none":
                        try:
                            compiled = torch.compile(m, mode=args.torch_compile)
                            compiled(x)
                        except Exception as e:  # noqa: BLE001 - any failure falls back to the default mode
                            note = f"torch.compile default mode ({type(e).__name__})"
                            compiled = torch.compile(m)
                        inductor = cuda_time(lambda: compiled(x), args.repeat)
                ort = None
                try:
                    import onnxruntime as ort_module
                    if "CUDAExecutionProvider" in ort_module.get_available_providers():
                        s = ort_module.InferenceSession(path, providers=["CUDAExecutionProvider"])
                        feed = {"x": example[0].numpy()}
                        for _ in range(5):
                            s.run(None, feed)
                        t0 = time.perf_counter()
                        for _ in range(args.repeat):
                            s.run(None, feed)
                        ort = (time.perf_counter() - t0) * 1e3 / args.repeat
                except ImportError:
                    pass
                row.update({"kiln_ms": device_ms, "kiln_wall_ms": wall_ms, "torch_eager_ms": eager,
                            "torch_compile_ms": inductor, "ort_cuda_wall_ms": ort,
                            "vs_eager": eager / device_ms,
                            "vs_compile": None if inductor is None else inductor / device_ms, "note": note})
            rows.append(row)
            log(json.dumps(row))


def markdown(rows):
    out = []
    for part in ("gemm", "elementwise", "models"):
        sel = [r for r in rows if r["part"] == part]
        if not sel:
            continue
        keys = [k for k in sel[0] if k != "part"]
        out.append("| " + " | ".join(keys) + " |")
        out.append("|" + "---|" * len(keys))
        for r in sel:
            cells = []
            for k in keys:
                v = r.get(k)
                cells.append(f"{v:.3g}" if isinstance(v, float) else ("" if v is None else str(v)))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", required=True)
    p.add_argument("--work")
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--parts", default="gemm,elementwise,models")
    p.add_argument("--gemm", default="1024,2048,4096,8192")
    p.add_argument("--models", default="resnet18,mobilenet_v3_large,encoder")
    p.add_argument("--batches", default="1,32")
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--markdown")
    p.add_argument("--json")
    p.add_argument("--compile-only", action="store_true")
    p.add_argument("--torch-compile", default="max-autotune-no-cudagraphs",
                   help="torch.compile mode of the models' peer (default, max-autotune-no-cudagraphs, ...), "
                        "or none to leave it out")
    args = p.parse_args()
    args.gemm = [int(n) for n in args.gemm.split(",") if n]
    args.models = [m for m in args.models.split(",") if m]
    args.batches = [int(b) for b in args.batches.split(",") if b]
    args.work = args.work or tempfile.mkdtemp(prefix="kiln-gpu-bench-")
    os.makedirs(args.work, exist_ok=True)
    farm = None if args.compile_only else Farm(args.build, args.work)
    rows = []
    try:
        for part in args.parts.split(","):
            {"gemm": gemm, "elementwise": elementwise, "models": models}[part](args, farm, rows)
    finally:
        if farm is not None:
            farm.stop()
    text = markdown(rows)
    print(text)
    if args.markdown:
        open(args.markdown, "w").write(text)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    wrong = [r["case"] for r in rows if r.get("correct") is False]
    if wrong:
        log(f"{len(wrong)} case(s) WRONG: {', '.join(wrong)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
