"""Fixtures of the kiln package's tests: a small ONNX model, packages compiled by
the `kiln` CLI (for this CPU and for a CUDA GPU), and a real farm (kiln-server +
kiln-worker on 127.0.0.1).

The binaries come from the environment ctest sets (python/CMakeLists.txt):
KILN_SERVER, KILN_WORKER, KILN_CLI; the runtime from KILN_RUNTIME_LIBRARY.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

# The model: y = Relu(x @ W + z), two inputs so that a missing one can be tested.
X_SHAPE, Z_SHAPE = (4, 8), (4, 16)
_W = np.random.default_rng(7).standard_normal((8, 16)).astype(np.float32)


def reference(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """What the model computes, in NumPy."""
    return np.maximum(x @ _W + z, 0)


def random_inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal(X_SHAPE).astype(np.float32),
            "z": rng.standard_normal(Z_SHAPE).astype(np.float32)}


def tool(variable: str) -> str:
    path = os.environ.get(variable)
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError(f"{variable} must name the built binary (ctest sets it; got {path!r})")
    return path


@pytest.fixture(scope="session")
def model_bytes() -> bytes:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"),
         helper.make_node("Add", ["xw", "z"], ["s"], name="add"),
         helper.make_node("Relu", ["s"], ["y"], name="relu")],
        "mm_add_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(X_SHAPE)),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, list(Z_SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [X_SHAPE[0], Z_SHAPE[1]])],
        initializer=[numpy_helper.from_array(_W, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


@pytest.fixture(scope="session")
def model_path(model_bytes: bytes, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "mm_add_relu.onnx"
    path.write_bytes(model_bytes)
    return path


def compile_package(model_path: Path, work: Path, target: str | None = None) -> Path:
    """`kiln compile` of the model with an embedded farm, without tuning, for `target` (None: this CPU)."""
    out = work / "mm_add_relu.kpkg"
    cmd = [tool("KILN_CLI"), "compile", str(model_path), "--trials", "0", "--db", str(work / "tuning.db"),
           "-q", "-o", str(out)] + (["--target", target] if target else [])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "HOME": str(work)})
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}"
    return out


@pytest.fixture(scope="session")
def package_path(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model compiled for this CPU."""
    return compile_package(model_path, tmp_path_factory.mktemp("compiled"))


@pytest.fixture(scope="session")
def cuda_package_path(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model compiled for a CUDA GPU, sm_90 (no GPU needed: the schedules are the defaults)."""
    return compile_package(model_path, tmp_path_factory.mktemp("compiled_cuda"), "cuda:sm_90")


class Farm:
    """A kiln-server and one CPU kiln-worker as real processes; `address` is HOST:PORT."""

    def __init__(self, work: Path, server_args: list[str] | None = None, worker_args: list[str] | None = None) -> None:
        self.work = work
        self.address = ""
        self.processes: list[tuple[subprocess.Popen, Path]] = []
        self.server_args = server_args or []  # e.g. TLS and an auth file
        self.worker_args = worker_args or []

    def start(self) -> None:
        work = self.work
        port_file = work / "port"
        self._spawn([tool("KILN_SERVER"), "--listen", "127.0.0.1:0", "--db", str(work / "tuning.db"),
                     "--port-file", str(port_file), *self.server_args], work / "server.log")
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.processes[0][0].poll() is not None:
                raise RuntimeError(f"kiln-server wrote no port:\n{self.logs()}")
            time.sleep(0.05)
        self.address = f"127.0.0.1:{int(port_file.read_text())}"
        self._spawn([tool("KILN_WORKER"), "--server", self.address, "--device", "cpu", *self.worker_args],
                    work / "worker.log")

    def _spawn(self, argv: list[str], log: Path) -> None:
        with open(log, "wb") as f:
            self.processes.append((subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT), log))

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}" for _, log in self.processes)

    def stop(self) -> None:
        for process, _ in reversed(self.processes):
            process.send_signal(signal.SIGTERM)
        for process, _ in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    farm = Farm(tmp_path_factory.mktemp("farm"))
    try:
        farm.start()
        yield farm
    finally:
        farm.stop()
