"""kiln.runtime with CUDA packages: a real sm_90 package refused without a GPU
in the runtime's words; a CPU package's session refusing device memory after
the binding's own checks; and a CUDA package's session (host arrays, device
memory bound in place, outputs left on the device, runs on a caller's stream)
run twice: on the real GPU where there is one (skipped elsewhere, saying why),
and over the runtime's fake CUDA calls (fake_cuda_runtime.py), where device
memory is host memory, on every host."""
from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import numpy as np
import pytest

from conftest import X_SHAPE, Z_SHAPE, random_inputs, reference
from fake_cuda_runtime import FakeCudaDriver, FakeCudaRuntime
from kiln import KilnError, StatusCode
from kiln import runtime

Y_SHAPE = (X_SHAPE[0], Z_SHAPE[1])
REFUSAL = "this package is for a CUDA GPU (sm_90) and "


class CudaArray:
    """Device memory exposing __cuda_array_interface__ as a CuPy array or a PyTorch tensor would."""

    def __init__(self, ptr: int, shape: tuple[int, ...], typestr: str, *, strides: tuple[int, ...] | None = None,
                 stream: int | None = None, readonly: bool = False, **extra: Any) -> None:
        self.interface = {"shape": shape, "typestr": typestr, "data": (ptr, readonly), "strides": strides,
                          "version": 3, **({"stream": stream} if stream is not None else {}), **extra}

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.interface

    @property
    def ptr(self) -> int:
        return self.interface["data"][0]


class HostMemoryDevice:
    """The fake runtime's device memory: host memory, 256-byte aligned as cuMemAlloc's."""

    def __init__(self) -> None:
        self._buffers: list[np.ndarray] = []
        self._streams = 0

    def alloc(self, nbytes: int) -> int:
        buffer = np.zeros(nbytes + 256, np.uint8)
        self._buffers.append(buffer)
        return buffer.ctypes.data + (-buffer.ctypes.data) % 256

    def upload(self, ptr: int, array: np.ndarray) -> None:
        ctypes.memmove(ptr, np.ascontiguousarray(array).ctypes.data, array.nbytes)

    def download(self, ptr: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return np.frombuffer((ctypes.c_char * nbytes).from_address(ptr), dtype).reshape(shape).copy()

    def new_stream(self) -> int:
        self._streams += 1
        return 0xCA11_E500 + self._streams

    def close(self) -> None:
        self._buffers.clear()


class CudaDriverDevice:
    """Device memory and streams of CUDA device 0 through the driver (libcuda.so.1, which the runtime loaded),
    its primary context current on this thread while the tests run."""

    _SIGNATURES: dict[str, list[Any]] = {
        "cuInit": [ctypes.c_uint],
        "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
        "cuDevicePrimaryCtxRetain": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int],
        "cuDevicePrimaryCtxRelease_v2": [ctypes.c_int],
        "cuCtxPushCurrent_v2": [ctypes.c_void_p],
        "cuCtxPopCurrent_v2": [ctypes.POINTER(ctypes.c_void_p)],
        "cuCtxSynchronize": [],
        "cuMemAlloc_v2": [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t],
        "cuMemFree_v2": [ctypes.c_uint64],
        "cuMemcpyHtoD_v2": [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t],
        "cuMemcpyDtoH_v2": [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t],
        "cuStreamCreate": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint],
        "cuStreamDestroy_v2": [ctypes.c_void_p],
    }

    def __init__(self) -> None:
        self._cu = ctypes.CDLL("libcuda.so.1")
        for name, argtypes in self._SIGNATURES.items():
            fn = getattr(self._cu, name)
            fn.restype, fn.argtypes = ctypes.c_int, argtypes
        self._call("cuInit", 0)
        self._device = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(self._device), 0)
        self._context = ctypes.c_void_p()
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(self._context), self._device)
        self._call("cuCtxPushCurrent_v2", self._context)
        self._allocations: list[int] = []
        self._streams: list[int] = []

    def _call(self, name: str, *args: Any) -> None:
        result = getattr(self._cu, name)(*args)
        assert result == 0, f"{name}: CUresult {result}"

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self._call("cuMemAlloc_v2", ctypes.byref(ptr), max(nbytes, 1))
        self._allocations.append(ptr.value)
        return ptr.value

    def upload(self, ptr: int, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        self._call("cuMemcpyHtoD_v2", ptr, array.ctypes.data, array.nbytes)
        # A copy from pageable memory may still be in flight when it returns,
        # and the sessions' streams do not wait for the legacy stream.
        self._call("cuCtxSynchronize")

    def download(self, ptr: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        out = np.empty(shape, dtype)
        self._call("cuMemcpyDtoH_v2", out.ctypes.data, ptr, out.nbytes)
        return out

    def new_stream(self) -> int:
        stream = ctypes.c_void_p()
        self._call("cuStreamCreate", ctypes.byref(stream), 0x1)  # CU_STREAM_NON_BLOCKING
        self._streams.append(stream.value)
        return stream.value

    def close(self) -> None:
        self._call("cuCtxSynchronize")
        for stream in self._streams:
            self._cu.cuStreamDestroy_v2(stream)
        for ptr in self._allocations:
            self._cu.cuMemFree_v2(ptr)
        self._cu.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        self._cu.cuDevicePrimaryCtxRelease_v2(self._device)


class Cuda(NamedTuple):
    """A CUDA package and its device: the fake's (fake and driver set) or a real GPU's (both None)."""

    package: runtime.Package
    device: Any  # HostMemoryDevice or CudaDriverDevice
    fake: FakeCudaRuntime | None
    driver: FakeCudaDriver | None

    def array(self, values: np.ndarray, **kwargs: Any) -> CudaArray:
        ptr = self.device.alloc(values.nbytes)
        self.device.upload(ptr, values)
        return CudaArray(ptr, values.shape, values.dtype.str, **kwargs)

    def empty(self, shape: tuple[int, ...], dtype: Any = np.float32) -> CudaArray:
        return CudaArray(self.device.alloc(int(np.prod(shape)) * np.dtype(dtype).itemsize), shape,
                         np.dtype(dtype).str)

    def read(self, array: Any) -> np.ndarray:
        interface = array.__cuda_array_interface__
        return self.device.download(interface["data"][0], tuple(interface["shape"]), np.dtype(interface["typestr"]))


def load_on_gpu_or_skip(path: Path) -> runtime.Package:
    try:
        package = runtime.Package.load(path)
        runtime.Session(package).close()  # a GPU older than sm_90 refuses here
    except KilnError as e:
        if e.code != StatusCode.FAILED_PRECONDITION:
            raise
        pytest.skip(f"no GPU here: {e.message}")
    return package


@pytest.fixture(params=["fake", "gpu"])
def cuda(request: pytest.FixtureRequest, package_path: Path, cuda_package_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[Cuda]:
    if request.param == "fake":
        fake = FakeCudaRuntime(runtime._open())
        driver = FakeCudaDriver()
        monkeypatch.setattr(runtime, "_lib", fake)
        monkeypatch.setattr(runtime._CudaDriver, "_instance", driver)
        device: Any = HostMemoryDevice()
        package = runtime.Package.load(package_path)  # this CPU's package, through the fake a CUDA one
        yield Cuda(package, device, fake, driver)
    else:
        package = load_on_gpu_or_skip(cuda_package_path)
        device = CudaDriverDevice()
        yield Cuda(package, device, None, None)
    # Sessions a test left in reference cycles (a caught exception's traceback
    # holds its frame) are released now, while the streams and memory they use
    # are still there: a session must not outlive the caller's stream it runs on.
    gc.collect()
    device.close()


needs_gpu = pytest.mark.parametrize("cuda", ["gpu"], indirect=True)


# ---- Every host: the real runtime.

def test_cuda_package_is_refused_without_a_gpu_saying_why(cuda_package_path: Path) -> None:
    try:
        package = runtime.Package.load(cuda_package_path)
    except KilnError as e:
        # What a deployment without a GPU sees: the runtime's reason, whole.
        assert e.code == StatusCode.FAILED_PRECONDITION, e
        assert e.message.startswith(f"package '{cuda_package_path}': {REFUSAL}"), e.message
        assert ("no CUDA driver could be loaded: libcuda.so.1: " in e.message
                or "the CUDA driver could not be initialised: cuInit: " in e.message), e.message
        with pytest.raises(KilnError) as from_bytes:
            runtime.Package.from_bytes(cuda_package_path.read_bytes())
        assert from_bytes.value.message == e.message.replace(f"'{cuda_package_path}'", "'<memory>'")
        return
    # A GPU host: it loads, and says what it is.
    with package:
        assert package.device == package.target == "cuda:sm_90"


def test_a_driver_without_a_gpu_is_named(cuda_package_path: Path, tmp_path: Path) -> None:
    # The toolkit's stub libcuda.so exports the driver API and fails cuInit:
    # the refusal then quotes the driver's error instead of dlopen's.
    ptxas = os.environ.get("KILN_PTXAS", "")
    if not ptxas.endswith("/bin/ptxas"):
        pytest.skip(f"no CUDA toolkit was found at configure time (KILN_PTXAS '{ptxas}')")
    stub = Path(ptxas).parents[1] / "lib64" / "stubs" / "libcuda.so"
    if not stub.exists():
        pytest.skip(f"the toolkit has no stub driver at {stub}")
    (tmp_path / "libcuda.so.1").symlink_to(stub)
    code = ("import kiln.runtime as rt\n"
            "try:\n"
            f"    rt.Package.load({str(cuda_package_path)!r})\n"
            "except rt.KilnError as e:\n"
            "    print(e)\n")
    env = {**os.environ, "LD_LIBRARY_PATH": f"{tmp_path}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"FAILED_PRECONDITION: package '{cuda_package_path}': {REFUSAL}the CUDA driver "
                                  "could not be initialised: cuInit: "), done.stdout


def test_cpu_package_is_on_the_cpu(package_path: Path) -> None:
    assert runtime.has_cuda()  # this build's library is ABI 1.2
    with runtime.Package.load(package_path) as package, runtime.Session(package, threads=2) as session:
        assert package.device == "cpu"
        assert session.device is None and session.stream is None
        inputs = random_inputs(20)
        # run_async runs a CPU session synchronously and returns what run() does.
        np.testing.assert_allclose(session.run_async(inputs)["y"], reference(**inputs), rtol=1e-5, atol=1e-5)
        session.synchronize()  # nothing to wait for

        with pytest.raises(KilnError) as e:
            runtime.Session(package, device=0)
        assert e.value.code == StatusCode.INVALID_ARGUMENT
        assert "is for the CPU" in e.value.message and "threads=" in e.value.message
        with pytest.raises(KilnError) as e:
            runtime.Session(package, stream=0)
        assert e.value.code == StatusCode.INVALID_ARGUMENT


def test_cpu_session_refuses_device_memory_in_the_runtimes_words(package_path: Path) -> None:
    package = runtime.Package.load(package_path)
    session = runtime.Session(package)
    device = HostMemoryDevice()  # addresses nothing will read: the runtime refuses first
    x = CudaArray(device.alloc(128), X_SHAPE, "<f4")
    where = f"package '{package_path}' runs on the CPU; device memory is for CUDA packages"

    # The binding's checks come first: the runtime sees only a pointer and a size.
    with pytest.raises(KilnError) as e:
        session.set_input("x", CudaArray(x.ptr, X_SHAPE, "<f8"))
    assert e.value.code == StatusCode.INVALID_ARGUMENT and "input 'x'" in e.value.message

    with pytest.raises(KilnError) as e:
        session.set_input("x", x)
    assert e.value.code == StatusCode.FAILED_PRECONDITION
    assert e.value.message == f"binding an input to device memory: {where}"
    with pytest.raises(KilnError) as e:
        session.set_input("x", runtime.DevicePointer(x.ptr, 128))
    assert e.value.message == f"binding an input to device memory: {where}"
    inputs = random_inputs(21)
    with pytest.raises(KilnError) as e:
        session.run(inputs, outputs={"y": CudaArray(device.alloc(256), Y_SHAPE, "<f4")})
    assert e.value.code == StatusCode.FAILED_PRECONDITION
    assert e.value.message == f"binding an output to device memory: {where}"
    with pytest.raises(KilnError) as e:
        session.run(inputs, on_device=True)
    assert e.value.message == f"keeping an output on the device: {where}"
    # Nothing stuck: the host path runs as before.
    np.testing.assert_allclose(session.run(inputs)["y"], reference(**inputs), rtol=1e-5, atol=1e-5)


def test_stream_arguments() -> None:
    class ProtocolStream:  # torch.cuda.Stream, cuda.core's and CuPy's streams
        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, 0x7F00)

    assert runtime._stream_handle(None) is None  # the session makes its own
    assert runtime._stream_handle(0x7F00) == 0x7F00
    assert runtime._stream_handle(ProtocolStream()) == 0x7F00
    assert runtime._stream_handle(0) == 1  # the default stream: CU_STREAM_LEGACY, not "make one"
    for bad in ("s", -1, 1.5):
        with pytest.raises(KilnError) as e:
            runtime._stream_handle(bad)
        assert e.value.code == StatusCode.INVALID_ARGUMENT and e.value.message.startswith("stream: ")


# ---- A CUDA package's session: over the fake, and on a GPU where there is one.

def test_session_on_a_cuda_package(cuda: Cuda) -> None:
    assert cuda.package.device == "cuda:sm_90"
    session = runtime.Session(cuda.package)
    assert session.device == 0 and session.stream  # a stream of its own
    assert repr(session).startswith("<kiln.Session on cuda:0 (x: float32[4, 8]")
    with pytest.raises(KilnError) as e:
        runtime.Session(cuda.package, threads=2)
    assert e.value.code == StatusCode.INVALID_ARGUMENT and "not threads" in e.value.message
    with pytest.raises(KilnError) as e:
        runtime.Session(cuda.package, device="cuda:0")
    assert e.value.code == StatusCode.INVALID_ARGUMENT and "device ordinal" in e.value.message
    if cuda.fake:
        assert cuda.fake.calls[0] == ("create_cuda", 0, None)


def test_numpy_run_copies_through_the_runtime(cuda: Cuda) -> None:
    session = runtime.Session(cuda.package)
    first_inputs = random_inputs(30)
    first = session.run(first_inputs)["y"]
    assert isinstance(first, np.ndarray)
    np.testing.assert_allclose(first, reference(**first_inputs), rtol=1e-5, atol=1e-5)
    kept = first.copy()
    second_inputs = random_inputs(31)
    np.testing.assert_allclose(session.run(second_inputs)["y"], reference(**second_inputs), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(first, kept)
    # A bound host array is read at every run; outputs go into the caller's array.
    inputs = random_inputs(32)
    assert session.set_input("x", inputs["x"]) is True
    out = np.zeros(Y_SHAPE, np.float32)
    assert session.run({"z": inputs["z"]}, outputs={"y": out})["y"] is out
    np.testing.assert_allclose(out, reference(**inputs), rtol=1e-5, atol=1e-5)
    inputs["x"] *= -2
    np.testing.assert_allclose(session.run()["y"], reference(**inputs), rtol=1e-5, atol=1e-5)


def test_device_inputs_are_bound_in_place(cuda: Cuda) -> None:
    session = runtime.Session(cuda.package)
    inputs = random_inputs(40)
    x, z = cuda.array(inputs["x"]), cuda.array(inputs["z"])
    assert session.set_input("x", x) is True
    before = session.run({"z": z})["y"]
    np.testing.assert_allclose(before, reference(**inputs), rtol=1e-5, atol=1e-5)
    # Read in place at every run: new contents, not given again, change the result.
    inputs["x"] = -2 * inputs["x"]
    cuda.device.upload(x.ptr, inputs["x"])
    np.testing.assert_allclose(session.run()["y"], reference(**inputs), rtol=1e-5, atol=1e-5)
    # Strides that describe the C-contiguous layout are accepted; a raw pointer too.
    contiguous = CudaArray(z.ptr, Z_SHAPE, "<f4", strides=(Z_SHAPE[1] * 4, 4))
    assert session.set_input("z", contiguous) is True
    assert session.set_input("x", runtime.DevicePointer(x.ptr, inputs["x"].nbytes)) is True
    np.testing.assert_allclose(session.run()["y"], reference(**inputs), rtol=1e-5, atol=1e-5)
    if cuda.fake:
        binds = [c for c in cuda.fake.calls if c[0] == "bind_input_device"]
        assert binds == [("bind_input_device", "x", x.ptr, 128), ("bind_input_device", "z", z.ptr, 256),
                         ("bind_input_device", "z", z.ptr, 256), ("bind_input_device", "x", x.ptr, 128)]
        assert session._bound_inputs["z"] is contiguous  # kept alive while bound


def test_outputs_left_on_the_device(cuda: Cuda) -> None:
    session = runtime.Session(cuda.package)
    inputs = random_inputs(50)
    y = session.run(inputs, on_device=True)["y"]
    assert isinstance(y, runtime.DeviceArray) and y.valid
    interface = y.__cuda_array_interface__
    assert interface == {"shape": Y_SHAPE, "typestr": "<f4", "data": (y.ptr, False), "strides": None,
                         "stream": None, "version": 3}
    assert y.nbytes == 256 and y.device == 0 and y.ptr
    np.testing.assert_allclose(cuda.read(y), reference(**inputs), rtol=1e-5, atol=1e-5)
    # The next run overwrites the session's memory: the old array says so.
    second = random_inputs(51)
    host = session.run(second)["y"]
    assert isinstance(host, np.ndarray)  # back on the host
    np.testing.assert_allclose(host, reference(**second), rtol=1e-5, atol=1e-5)
    assert not y.valid
    with pytest.raises(KilnError) as e:
        y.__cuda_array_interface__
    assert e.value.code == StatusCode.FAILED_PRECONDITION and "output 'y' of an earlier run" in e.value.message
    if cuda.fake:
        assert [c for c in cuda.fake.calls if c[0] == "keep_output_on_device"] == [
            ("keep_output_on_device", 0, 1), ("keep_output_on_device", 0, 0)]


def test_outputs_into_caller_device_memory(cuda: Cuda) -> None:
    session = runtime.Session(cuda.package)
    inputs = random_inputs(60)
    out = cuda.empty(Y_SHAPE)
    assert session.run(inputs, outputs={"y": out})["y"] is out
    np.testing.assert_allclose(cuda.read(out), reference(**inputs), rtol=1e-5, atol=1e-5)
    # A caller's memory receives only the runs it is passed to.
    kept = cuda.read(out)
    other = session.run(random_inputs(61))["y"]
    assert isinstance(other, np.ndarray)
    np.testing.assert_array_equal(cuda.read(out), kept)
    # A raw pointer is returned as itself.
    raw = runtime.DevicePointer(cuda.device.alloc(256), 256)
    assert session.run(inputs, outputs={"y": raw})["y"] is raw
    np.testing.assert_allclose(cuda.device.download(raw.ptr, Y_SHAPE, np.float32), reference(**inputs), rtol=1e-5,
                               atol=1e-5)
    if cuda.fake:
        assert [c for c in cuda.fake.calls if c[0].startswith(("bind_output", "keep"))] == [
            ("bind_output_device", 0, out.ptr, 256), ("keep_output_on_device", 0, 0),
            ("bind_output_device", 0, raw.ptr, 256)]


def test_device_arguments_are_checked_naming_the_tensor(cuda: Cuda) -> None:
    session = runtime.Session(cuda.package)
    ptr = cuda.device.alloc(1024)
    bad_inputs = [
        (CudaArray(ptr, X_SHAPE, "<f8"), "dtype float64 on the device, the package's is float32"),
        (CudaArray(ptr, X_SHAPE, ">f4"), "dtype >f4 on the device"),
        (CudaArray(ptr, (8, 4), "<f4"), "shape (8, 4), the package's is (4, 8)"),
        (CudaArray(ptr, X_SHAPE, "<f4", strides=(4, 16)), "strides (4, 16) (bytes) are not C-contiguous"),
        (CudaArray(0, X_SHAPE, "<f4"), "null device pointer"),
        (CudaArray(ptr, X_SHAPE, "<f4", stream=0), "names stream 0"),
        (CudaArray(ptr, X_SHAPE, "<f4", mask=object()), "masked device arrays"),
        (CudaArray(ptr, X_SHAPE, None), "malformed __cuda_array_interface__"),
        (runtime.DevicePointer(0, 128), "null device pointer"),
    ]
    for value, why in bad_inputs:
        with pytest.raises(KilnError) as e:
            session.set_input("x", value)
        assert e.value.code == StatusCode.INVALID_ARGUMENT, why
        assert e.value.message.startswith("input 'x': ") and why in e.value.message, (why, e.value.message)
    with pytest.raises(KilnError) as e:
        session.run(random_inputs(70), outputs={"y": CudaArray(ptr, Y_SHAPE, "<f4", readonly=True)})
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    assert e.value.message == "output 'y': the device array is read-only"
    if cuda.fake:
        assert not [c for c in cuda.fake.calls if "device" in c[0]]  # none reached the runtime


@needs_gpu
def test_the_runtime_checks_device_memory_naming_the_tensor(cuda: Cuda) -> None:
    # Size and alignment are the runtime's checks (the package says the
    # alignment its kernels assume); its messages name the input.
    session = runtime.Session(cuda.package)
    ptr = cuda.device.alloc(1024)
    with pytest.raises(KilnError) as e:
        session.set_input("x", CudaArray(ptr + 4, X_SHAPE, "<f4"))
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    assert e.value.message.startswith("input 'x': device pointer ") and "is not aligned to" in e.value.message
    with pytest.raises(KilnError) as e:
        session.set_input("x", runtime.DevicePointer(ptr, 100))
    assert e.value.code == StatusCode.INVALID_ARGUMENT and "expected 128 bytes" in e.value.message


def test_run_async_on_the_callers_stream(cuda: Cuda) -> None:
    stream = cuda.device.new_stream()
    session = runtime.Session(cuda.package, stream=stream)
    assert session.stream == stream
    inputs = random_inputs(80)
    x, z = cuda.array(inputs["x"]), cuda.array(inputs["z"])
    y = session.run_async({"x": x, "z": z})["y"]
    assert isinstance(y, runtime.DeviceArray) and y.stream == stream
    assert y.__cuda_array_interface__["stream"] == stream  # a consumer orders itself after the run
    session.synchronize()
    np.testing.assert_allclose(cuda.read(y), reference(**inputs), rtol=1e-5, atol=1e-5)
    # Host outputs are written in place or not at all: nothing copies after an async run.
    out = np.zeros(Y_SHAPE, np.float32)
    assert session.run_async(outputs={"y": out})["y"] is out
    session.synchronize()
    np.testing.assert_allclose(out, reference(**inputs), rtol=1e-5, atol=1e-5)
    with pytest.raises(KilnError) as e:
        session.run_async(outputs={"y": np.zeros((Y_SHAPE[0], 2 * Y_SHAPE[1]), np.float32)[:, ::2]})
    assert e.value.code == StatusCode.INVALID_ARGUMENT and "run_async writes host outputs in place" in e.value.message
    session.close()  # before the stream it runs on is destroyed (the fixture's close)
    if cuda.fake:
        assert ("create_cuda", 0, stream) in cuda.fake.calls
        assert cuda.driver.calls.count(("synchronize", 0, stream)) == 2


def test_the_default_stream(cuda: Cuda) -> None:
    # Handle 0 is the default stream; the runtime would read NULL as "make one".
    session = runtime.Session(cuda.package, stream=0)
    assert session.stream == 1  # CU_STREAM_LEGACY
    inputs = random_inputs(90)
    np.testing.assert_allclose(session.run(inputs)["y"], reference(**inputs), rtol=1e-5, atol=1e-5)


def test_arrays_of_another_stream_are_waited_for(cuda: Cuda) -> None:
    session = runtime.Session(cuda.package)
    producer = cuda.device.new_stream()
    inputs = random_inputs(100)
    x = cuda.array(inputs["x"], stream=producer)  # CAI v3: ready once `producer` has run its work
    z = cuda.array(inputs["z"], stream=session.stream)  # on the session's stream: in order already
    np.testing.assert_allclose(session.run({"x": x, "z": z})["y"], reference(**inputs), rtol=1e-5, atol=1e-5)
    if cuda.driver:
        assert cuda.driver.calls == [("wait", 0, session.stream, producer,
                                      f"input 'x': ordering the session's stream after the array's ({producer:#x})")]


def test_sessions_chained_on_the_device(cuda: Cuda) -> None:
    # y = relu(x @ W + z) has z's shape: one session's output, left on the
    # device, is the next one's input, without a copy.
    first, second = runtime.Session(cuda.package), runtime.Session(cuda.package)
    a, b = random_inputs(110), random_inputs(111)
    y1 = first.run_async({"x": cuda.array(a["x"]), "z": cuda.array(a["z"])})["y"]
    y2 = second.run({"x": b["x"], "z": y1})["y"]
    np.testing.assert_allclose(y2, reference(b["x"], reference(**a)), rtol=1e-4, atol=1e-4)
    if cuda.driver:
        assert [c[:4] for c in cuda.driver.calls] == [("wait", 0, second.stream, first.stream)]
        assert cuda.fake and ("bind_input_device", "z", y1.ptr, 256) in cuda.fake.calls


@needs_gpu
def test_torch_tensors(cuda: Cuda) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip(f"torch {torch.__version__} sees no GPU")
    stream = torch.cuda.current_stream()
    session = runtime.Session(cuda.package, stream=stream)  # ordered with torch's work
    inputs = random_inputs(120)
    x, z = (torch.from_numpy(inputs[k]).cuda() for k in ("x", "z"))
    out = torch.empty(Y_SHAPE, dtype=torch.float32, device="cuda")
    assert session.run({"x": x, "z": z}, outputs={"y": out})["y"] is out
    np.testing.assert_allclose(out.cpu().numpy(), reference(**inputs), rtol=1e-5, atol=1e-5)
    y = torch.as_tensor(session.run_async({"x": x, "z": z})["y"], device="cuda")
    np.testing.assert_allclose((y * 2).cpu().numpy(), 2 * reference(**inputs), rtol=1e-5, atol=1e-5)
    with pytest.raises(KilnError) as e:
        session.set_input("x", x.t().contiguous().t())  # the right shape, column-major
    assert "input 'x'" in e.value.message and "not C-contiguous" in e.value.message
