"""Runs Kiln packages on NumPy arrays through libkiln_runtime.so's C API (ctypes).

    package = kiln.runtime.Package.load("model.kpkg")
    session = kiln.runtime.Session(package, threads=2)
    outputs = session.run({"x": x})            # {name: ndarray}, copies the session does not own

Inputs are bound without a copy (kiln_session_bind_input) when the array is
C-contiguous, of the input's dtype and shape, and aligned to its element size;
any other array of the right dtype and shape is copied (kiln_session_set_input).
Outputs are returned as fresh arrays, or written into arrays the caller passes
(`run(inputs, outputs={name: array})`, bound with kiln_session_bind_output when
the same rules allow). The library is found by `library_path()`'s rules.

A CUDA package (`Package.device` is "cuda:sm_90") runs the same way on a GPU,
its host arrays copied through the runtime; its session also takes device
memory, as objects exposing `__cuda_array_interface__` (PyTorch CUDA tensors,
CuPy arrays, `DeviceArray`) or as `DevicePointer(ptr, nbytes)`, bound in place
(kiln_session_bind_input_device/_output_device), can leave outputs on the
device (`run(..., on_device=True)` returns `DeviceArray`s) and runs
asynchronously on a stream (`run_async`).
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import operator
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping, NamedTuple

import numpy as np

from kiln.errors import KilnError, StatusCode

__all__ = ["DeviceArray", "DevicePointer", "Package", "Session", "TensorInfo", "abi_version", "has_cuda",
           "has_zero_copy", "library_path", "version"]

# The ABI major version this binding speaks (KILN_RUNTIME_ABI_MAJOR in kiln_runtime.h).
_ABI_MAJOR = 1
_MAX_RANK = 16  # KILN_MAX_RANK
_DEVICE_CPU, _DEVICE_CUDA = 0, 1  # kiln_device_t
# CU_STREAM_LEGACY: the legacy default stream, which a handle of 0 names in the
# driver API; kiln_session_create_cuda reads a NULL stream as "make one".
_CU_STREAM_LEGACY = 1

# kiln_dtype_t -> NumPy dtype (native byte order, as the runtime reads and writes).
_DTYPES: dict[int, np.dtype] = {
    1: np.dtype(np.float32), 2: np.dtype(np.float16), 3: np.dtype(np.float64), 4: np.dtype(np.int8),
    5: np.dtype(np.int16), 6: np.dtype(np.int32), 7: np.dtype(np.int64), 8: np.dtype(np.uint8),
    9: np.dtype(np.bool_),
}

_c_status = ctypes.c_int
_c_handle = ctypes.c_void_p
_c_dims = ctypes.c_int64 * _MAX_RANK
_c_dims_ptr = ctypes.POINTER(ctypes.c_int64)  # a _c_dims, or None

# name: (restype, argtypes). Those of ABI 1.1 may be missing from an older
# library: they are bound when present (see _OPTIONAL) and the binding falls
# back to what 1.0 offers.
_PROTOTYPES: dict[str, tuple[Any, list[Any]]] = {
    "kiln_last_error_message": (ctypes.c_char_p, []),
    "kiln_runtime_version": (ctypes.c_char_p, []),
    "kiln_runtime_abi_version": (ctypes.c_int, []),
    "kiln_package_load": (_c_status, [ctypes.c_char_p, ctypes.POINTER(_c_handle)]),
    "kiln_package_load_bytes": (_c_status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(_c_handle)]),
    "kiln_package_target": (ctypes.c_char_p, [_c_handle]),
    "kiln_package_digest": (ctypes.c_char_p, [_c_handle]),
    "kiln_package_release": (None, [_c_handle]),
    "kiln_session_create": (_c_status, [_c_handle, ctypes.c_int, ctypes.POINTER(_c_handle)]),
    "kiln_session_num_inputs": (ctypes.c_int, [_c_handle]),
    "kiln_session_num_outputs": (ctypes.c_int, [_c_handle]),
    "kiln_session_input_name": (ctypes.c_char_p, [_c_handle, ctypes.c_int]),
    "kiln_session_output_name": (ctypes.c_char_p, [_c_handle, ctypes.c_int]),
    "kiln_session_input_info": (_c_status, [_c_handle, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                            _c_dims_ptr, ctypes.POINTER(ctypes.c_int)]),
    "kiln_session_set_input": (_c_status, [_c_handle, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]),
    "kiln_session_bind_input": (_c_status, [_c_handle, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]),
    "kiln_session_bind_output": (_c_status, [_c_handle, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]),
    "kiln_session_run": (_c_status, [_c_handle]),
    "kiln_session_output": (_c_status, [_c_handle, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                        ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int), _c_dims_ptr,
                                        ctypes.POINTER(ctypes.c_int)]),
    "kiln_session_release": (None, [_c_handle]),
    # ABI 1.2: CUDA packages.
    "kiln_package_device": (ctypes.c_int, [_c_handle, ctypes.POINTER(ctypes.c_int)]),
    "kiln_session_create_cuda": (_c_status, [_c_handle, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_c_handle)]),
    "kiln_session_bind_input_device": (_c_status, [_c_handle, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_size_t]),
    "kiln_session_bind_output_device": (_c_status, [_c_handle, ctypes.c_int, ctypes.c_uint64, ctypes.c_size_t]),
    "kiln_session_keep_output_on_device": (_c_status, [_c_handle, ctypes.c_int, ctypes.c_int]),
    "kiln_session_output_device": (_c_status, [_c_handle, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]),
    "kiln_session_run_async": (_c_status, [_c_handle]),
    "kiln_session_cuda_stream": (ctypes.c_void_p, [_c_handle]),
    # ABI 1.3.
    "kiln_session_flush_denormals": (_c_status, [_c_handle, ctypes.c_int]),
}
_CUDA_FUNCTIONS = {"kiln_package_device", "kiln_session_create_cuda", "kiln_session_bind_input_device",
                   "kiln_session_bind_output_device", "kiln_session_keep_output_on_device",
                   "kiln_session_output_device", "kiln_session_run_async", "kiln_session_cuda_stream"}
_OPTIONAL = {"kiln_runtime_version", "kiln_runtime_abi_version", "kiln_package_load_bytes", "kiln_package_target",
             "kiln_session_bind_input", "kiln_session_bind_output", "kiln_session_flush_denormals"} | _CUDA_FUNCTIONS

_LIBRARY_NAMES = (f"libkiln_runtime.so.{_ABI_MAJOR}", "libkiln_runtime.so")
_lib: ctypes.CDLL | None = None
_lib_path: str | None = None


def _candidates() -> Iterator[tuple[str, str]]:
    """(path or soname, where it came from), in the order library_path() documents."""
    here = Path(__file__).resolve().parent
    for name in _LIBRARY_NAMES:
        if (here / "lib" / name).exists():
            yield str(here / "lib" / name), "bundled in the package"
            break
    try:
        from kiln import _build_tree  # written by CMake into the build tree's copy only
        yield _build_tree.RUNTIME_LIBRARY, "the build tree"
    except ImportError:
        pass
    found = ctypes.util.find_library("kiln_runtime")
    for name in ([found] if found else []) + list(_LIBRARY_NAMES):
        yield name, "the system's library path"


def _open() -> ctypes.CDLL:
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    explicit = os.environ.get("KILN_RUNTIME_LIBRARY")
    tried: list[str] = []
    lib = None
    for path, origin in ([(explicit, "KILN_RUNTIME_LIBRARY")] if explicit else _candidates()):
        try:
            lib, _lib_path = ctypes.CDLL(path), path
            break
        except OSError as e:
            tried.append(f"{path} ({origin}): {e}")
    if lib is None:
        raise KilnError(StatusCode.NOT_FOUND,
                        "cannot load libkiln_runtime.so; set KILN_RUNTIME_LIBRARY to its path. Tried: "
                        + "; ".join(tried))
    for name, (restype, argtypes) in _PROTOTYPES.items():
        if not hasattr(lib, name):
            if name in _OPTIONAL:
                continue
            raise KilnError(StatusCode.FAILED_PRECONDITION, f"{_lib_path} lacks {name}: not a Kiln runtime")
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    if hasattr(lib, "kiln_runtime_abi_version"):
        abi = lib.kiln_runtime_abi_version()
        if abi // 1000 != _ABI_MAJOR:
            raise KilnError(StatusCode.FAILED_PRECONDITION,
                            f"{_lib_path} has runtime ABI {abi // 1000}.{abi % 1000}; this binding needs "
                            f"{_ABI_MAJOR}.x")
    _lib = lib
    return lib


def _has(name: str) -> bool:
    return hasattr(_open(), name)


def library_path() -> str:
    """The runtime library in use, loading it if needed. Searched in this order:

    1. the KILN_RUNTIME_LIBRARY environment variable (only it, when set);
    2. a copy bundled in the package (kiln/lib/, by a wheel built with KILN_RUNTIME_LIBRARY set);
    3. the build tree, when `kiln` is imported from a CMake build (build/python);
    4. the system's loader: libkiln_runtime.so.1, then libkiln_runtime.so.
    """
    _open()
    assert _lib_path is not None
    return _lib_path


def version() -> str | None:
    """The library's Kiln release ("MAJOR.MINOR.PATCH"), or None if it predates kiln_runtime_version."""
    lib = _open()
    return lib.kiln_runtime_version().decode() if hasattr(lib, "kiln_runtime_version") else None


def abi_version() -> tuple[int, int] | None:
    """The library's ABI (major, minor), or None if it predates kiln_runtime_abi_version."""
    lib = _open()
    if not hasattr(lib, "kiln_runtime_abi_version"):
        return None
    abi = lib.kiln_runtime_abi_version()
    return abi // 1000, abi % 1000


def has_zero_copy() -> bool:
    """Whether the library binds caller memory (kiln_session_bind_input/_output); if not, everything is copied."""
    return _has("kiln_session_bind_input") and _has("kiln_session_bind_output")


def has_cuda() -> bool:
    """Whether the library runs CUDA packages (ABI 1.2). One that does not refuses to load them."""
    return all(_has(name) for name in _CUDA_FUNCTIONS)


def _check(status: int, context: str = "") -> None:
    if status != 0:
        message = _open().kiln_last_error_message().decode(errors="replace")
        raise KilnError(status, f"{context}: {message}" if context else message)


class TensorInfo(NamedTuple):
    """A package input or output: its name, NumPy dtype and static shape."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _dtype(code: int, what: str) -> np.dtype:
    if code not in _DTYPES:
        raise KilnError(StatusCode.UNIMPLEMENTED, f"{what}: element type {code} has no NumPy dtype here")
    return _DTYPES[code]


class Package:
    """A loaded, verified package (.kpkg). Release with close() or a `with` block; sessions keep it alive."""

    def __init__(self, handle: int) -> None:
        """Use Package.load or Package.from_bytes."""
        self._handle: int | None = handle

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Package":
        """Loads and verifies the package file at `path` (KilnError: NOT_FOUND, DATA_LOSS, FAILED_PRECONDITION...)."""
        lib = _open()
        handle = _c_handle()
        _check(lib.kiln_package_load(os.fsencode(path), ctypes.byref(handle)))
        return cls(handle.value)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> "Package":
        """Loads and verifies a package held in memory (e.g. what Client.fetch returned); the bytes are copied."""
        lib = _open()
        view = memoryview(data).cast("B")
        if not hasattr(lib, "kiln_package_load_bytes"):
            # A library older than ABI 1.1: through a temporary file.
            with tempfile.NamedTemporaryFile(suffix=".kpkg") as f:
                f.write(view)
                f.flush()
                return cls.load(f.name)
        if isinstance(data, bytes):
            buffer: Any = data  # passed as a pointer to its own storage
        elif view.readonly:
            buffer = (ctypes.c_char * len(view)).from_buffer_copy(view)
        else:
            buffer = (ctypes.c_char * len(view)).from_buffer(view)
        handle = _c_handle()
        _check(lib.kiln_package_load_bytes(buffer, len(view), ctypes.byref(handle)))
        return cls(handle.value)

    @property
    def handle(self) -> int:
        if self._handle is None:
            raise KilnError(StatusCode.FAILED_PRECONDITION, "the package is closed")
        return self._handle

    @property
    def digest(self) -> str:
        """"sha256:<hex>" of the package file."""
        return _open().kiln_package_digest(self.handle).decode()

    @property
    def target(self) -> str | None:
        """The CPU the package was compiled for (e.g. "x86-64-v4 znver4"); None if the library predates it."""
        lib = _open()
        if not hasattr(lib, "kiln_package_target"):
            return None
        target = lib.kiln_package_target(self.handle)
        return target.decode() if target is not None else None

    @property
    def device(self) -> str:
        """Where the package runs: "cpu", or its GPU for a CUDA package ("cuda:sm_90", as `target` says)."""
        lib = _open()
        if not hasattr(lib, "kiln_package_device"):
            return "cpu"  # a library before ABI 1.2 loads CPU packages only
        device = lib.kiln_package_device(self.handle, None)
        if device == _DEVICE_CPU:
            return "cpu"
        if device == _DEVICE_CUDA:
            return lib.kiln_package_target(self.handle).decode()
        raise KilnError(StatusCode.UNIMPLEMENTED, f"package {self.digest}: device {device} is unknown to this binding")

    def close(self) -> None:
        if self._handle is not None:
            _open().kiln_package_release(self._handle)
            self._handle = None

    def __enter__(self) -> "Package":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if _lib is not None:
            self.close()

    def __repr__(self) -> str:
        return f"<kiln.Package {self.digest}>" if self._handle is not None else "<kiln.Package closed>"


class DevicePointer(NamedTuple):
    """CUDA device memory as a raw pointer (a CUdeviceptr: cudaMalloc's result as an int) and its size in bytes.

    Bound as it is: the runtime checks the size against the tensor's, the
    alignment its kernels need and that it lies inside one allocation; the
    layout and element type are the caller's word.
    """

    ptr: int
    nbytes: int


class DeviceArray:
    """An output left in a session's device memory (`run(..., on_device=True)`, `run_async`): a C-contiguous
    array that exposes `__cuda_array_interface__` (version 3), so torch.as_tensor(a, device="cuda"),
    cupy.asarray(a) or another session's input take it without a copy.

    It views the session's memory, which the session's next run overwrites:
    after that run, or close(), its interface raises FAILED_PRECONDITION (a
    consumer that took the pointer before is not told: copy what must outlive
    the next run). `stream` is the stream a run_async was enqueued on (the data
    is ready once that stream has run it; consumers of the interface wait for
    it), None after `run`, which returns when the data is ready.
    """

    def __init__(self, session: "Session", run: int, name: str, ptr: int, shape: tuple[int, ...], dtype: np.dtype,
                 stream: int | None) -> None:
        """Made by Session.run and Session.run_async."""
        self._session, self._run = session, run
        self.name, self.ptr, self.shape, self.dtype, self.stream = name, ptr, shape, dtype, stream

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def device(self) -> int | None:
        """The CUDA device (ordinal) the memory is on."""
        return self._session.device

    @property
    def valid(self) -> bool:
        """Whether the session still holds this run's output: no later run, not closed."""
        return self._session._handle is not None and self._session._runs == self._run

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if not self.valid:
            raise KilnError(StatusCode.FAILED_PRECONDITION,
                            f"output '{self.name}' of an earlier run: the session has run again or been closed "
                            "since, and its device memory holds something else now (copy an output that must "
                            "outlive the next run)")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "strides": None,
                "stream": self.stream, "version": 3}

    def __repr__(self) -> str:
        state = "" if self.valid else ", stale"
        return (f"<kiln.DeviceArray '{self.name}' {self.dtype}{list(self.shape)} at {self.ptr:#x} on cuda:"
                f"{self.device}{state}>")


class _DeviceMemory(NamedTuple):
    """A device binding's arguments: pointer, size, the stream its data is ordered on (CAI v3), its owner."""

    ptr: int
    nbytes: int
    stream: int | None
    owner: Any  # what the caller passed: kept alive while bound, returned for an output


def _c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    if len(strides) != len(shape):
        return False
    if 0 in shape:
        return True
    expected = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides)):
        if dim != 1 and stride != expected:
            return False
        expected *= dim
    return True


def _device_memory(value: Any, info: TensorInfo, kind: str, writable: bool) -> _DeviceMemory | None:
    """`value` as device memory for tensor `info` (a DevicePointer, or an object exposing
    __cuda_array_interface__), checked: element type, shape and layout, which the runtime cannot see
    (it gets a pointer and a size). None: host data."""
    where = f"{kind} '{info.name}'"
    if isinstance(value, DevicePointer):
        ptr, nbytes = operator.index(value.ptr), operator.index(value.nbytes)
        if ptr == 0 and info.nbytes:
            raise KilnError(StatusCode.INVALID_ARGUMENT, f"{where}: null device pointer")
        return _DeviceMemory(ptr, nbytes, None, value)
    interface = getattr(value, "__cuda_array_interface__", None)  # a CPU torch tensor raises AttributeError: None
    if interface is None:
        return None
    try:
        version = int(interface.get("version", 0))
        shape = tuple(int(d) for d in interface["shape"])
        typestr = interface["typestr"]
        if not isinstance(typestr, str):  # np.dtype(None) would be float64
            raise TypeError(f"typestr {typestr!r} is not a string")
        dtype = np.dtype(typestr)
        ptr, readonly = interface["data"]
        ptr = int(ptr)
        strides = interface.get("strides")
        strides = tuple(int(s) for s in strides) if strides is not None else None
        stream = interface.get("stream") if version >= 3 else None
        stream = int(stream) if stream is not None else None
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise KilnError(StatusCode.INVALID_ARGUMENT,
                        f"{where}: malformed __cuda_array_interface__ ({type(e).__name__}: {e})") from None
    # Device memory is bound in place: nothing converts or copies it, so each
    # mismatch is an error (on the host, a copy would fix layout and byte order).
    if interface.get("mask") is not None:
        raise KilnError(StatusCode.INVALID_ARGUMENT, f"{where}: masked device arrays are not supported")
    if dtype != info.dtype:
        raise KilnError(StatusCode.INVALID_ARGUMENT,
                        f"{where}: dtype {dtype} on the device, the package's is {info.dtype} (device memory is "
                        "bound in place, never converted)")
    if shape != info.shape:
        raise KilnError(StatusCode.INVALID_ARGUMENT, f"{where}: shape {shape}, the package's is {info.shape}")
    if strides is not None and not _c_contiguous(shape, strides, dtype.itemsize):
        raise KilnError(StatusCode.INVALID_ARGUMENT,
                        f"{where}: strides {strides} (bytes) are not C-contiguous; device memory is bound in place, "
                        "never copied: pass a contiguous array (.contiguous() in PyTorch, "
                        "cupy.ascontiguousarray)")
    if writable and readonly:
        raise KilnError(StatusCode.INVALID_ARGUMENT, f"{where}: the device array is read-only")
    if ptr == 0 and info.nbytes:
        raise KilnError(StatusCode.INVALID_ARGUMENT, f"{where}: null device pointer")
    if stream == 0:
        # The interface (v3) forbids 0, which could mean either default stream.
        raise KilnError(StatusCode.INVALID_ARGUMENT,
                        f"{where}: __cuda_array_interface__ names stream 0, which the interface does not allow "
                        "(1: the legacy default stream, 2: the per-thread one)")
    return _DeviceMemory(ptr, info.nbytes, stream, value)


def _stream_handle(stream: Any) -> int | None:
    """The CUstream that Session(stream=...) names: None (the session makes its own), a handle (int), or a stream
    object of the CUDA stream protocol (__cuda_stream__: torch.cuda.Stream, cuda.core's and CuPy's streams).
    0, the default stream, is passed as CU_STREAM_LEGACY, the same stream, since the runtime reads NULL as
    "make one"."""
    if stream is None:
        return None
    try:
        handle = operator.index(stream.__cuda_stream__()[1] if hasattr(stream, "__cuda_stream__") else stream)
    except (TypeError, IndexError):
        raise KilnError(StatusCode.INVALID_ARGUMENT,
                        f"stream: {type(stream).__name__} is neither a CUstream handle (int) nor a stream object "
                        "(__cuda_stream__)") from None
    if handle < 0:
        raise KilnError(StatusCode.INVALID_ARGUMENT, f"stream: {handle} is not a CUstream handle")
    return handle or _CU_STREAM_LEGACY


class _CudaDriver:
    """The CUDA driver calls the binding makes itself, which the runtime's C API has no call for: making a
    session's stream wait for the stream a __cuda_array_interface__ names, and waiting for a session's stream.
    libcuda.so.1 is the driver the runtime loaded for the session, so dlopen finds that same library."""

    _instance: "_CudaDriver | None" = None
    _EVENT_DISABLE_TIMING = 0x2  # CU_EVENT_DISABLE_TIMING

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        vp, i, p = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER
        for name, argtypes in {
            "cuGetErrorName": [i, p(ctypes.c_char_p)],
            "cuDeviceGet": [p(i), i],
            "cuDevicePrimaryCtxRetain": [p(vp), i],
            "cuDevicePrimaryCtxRelease_v2": [i],
            "cuCtxPushCurrent_v2": [vp],
            "cuCtxPopCurrent_v2": [p(vp)],
            "cuEventCreate": [p(vp), ctypes.c_uint],
            "cuEventRecord": [vp, vp],
            "cuEventDestroy_v2": [vp],
            "cuStreamWaitEvent": [vp, vp, ctypes.c_uint],
            "cuStreamSynchronize": [vp],
        }.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = ctypes.c_int, argtypes
        self._lib = lib

    @classmethod
    def get(cls) -> "_CudaDriver":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def _call(self, what: str, name: str, *args: Any) -> None:
        result = getattr(self._lib, name)(*args)
        if result != 0:
            text = ctypes.c_char_p()
            known = self._lib.cuGetErrorName(result, ctypes.byref(text)) == 0 and text.value
            error = text.value.decode() if known else f"CUresult {result}"
            # As the runtime maps driver errors: out of memory is RESOURCE_EXHAUSTED.
            raise KilnError(StatusCode.RESOURCE_EXHAUSTED if result == 2 else StatusCode.INTERNAL,
                            f"{what}: {name}: {error}")

    @contextlib.contextmanager
    def _context(self, device: int, what: str) -> Iterator[None]:
        # The device's primary context, as the runtime uses it, pushed for the
        # calls and popped after: the caller's current context is left alone.
        dev, context = ctypes.c_int(), ctypes.c_void_p()
        self._call(what, "cuDeviceGet", ctypes.byref(dev), device)
        self._call(what, "cuDevicePrimaryCtxRetain", ctypes.byref(context), dev)
        try:
            self._call(what, "cuCtxPushCurrent_v2", context)
            try:
                yield
            finally:
                self._lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        finally:
            self._lib.cuDevicePrimaryCtxRelease_v2(dev)

    def wait(self, device: int, stream: int, producer: int, what: str) -> None:
        """Makes work enqueued on `stream` from now on wait for the work enqueued on `producer` so far."""
        with self._context(device, what):
            event = ctypes.c_void_p()
            self._call(what, "cuEventCreate", ctypes.byref(event), self._EVENT_DISABLE_TIMING)
            try:
                self._call(what, "cuEventRecord", event, ctypes.c_void_p(producer))
                self._call(what, "cuStreamWaitEvent", ctypes.c_void_p(stream), event, 0)
            finally:
                self._lib.cuEventDestroy_v2(event)  # released once the wait is done

    def synchronize(self, device: int, stream: int, what: str) -> None:
        with self._context(device, what):
            self._call(what, "cuStreamSynchronize", ctypes.c_void_p(stream))


class Session:
    """Runs one package with buffers of its own.

    A CPU package's session runs on `threads` threads (None or 1: the calling
    thread; 0: every hardware thread). A CUDA package's runs on CUDA device
    `device` (an ordinal; None: 0), on `stream`: None, a stream of the
    session's own; else a CUstream handle or a stream object (__cuda_stream__,
    e.g. torch.cuda.current_stream()) of that device's primary context, which
    must outlive the session (the session keeps a reference to the object).

    A CPU session treats denormal floats as zero (`flush_denormals=True`, the
    runtime's default: values below 2^-126 would otherwise run many times
    slower); False keeps IEEE gradual underflow, and needs a runtime of ABI
    1.3 or later. The calling thread's own floating-point mode is left as it was.

    Not for concurrent use from several threads; make one session per thread.
    run() releases the GIL while the package runs.
    """

    def __init__(self, package: Package, threads: int | None = None, *, device: int | None = None,
                 stream: Any = None, flush_denormals: bool = True) -> None:
        lib = _open()
        handle = _c_handle()
        self._handle: int | None = None
        if package.device == "cpu":
            if device is not None or stream is not None:
                raise KilnError(StatusCode.INVALID_ARGUMENT,
                                f"session: package {package.digest} is for the CPU ({package.target}): it takes "
                                "threads=, not a CUDA device or stream")
            if not flush_denormals and not hasattr(lib, "kiln_session_flush_denormals"):
                raise KilnError(StatusCode.FAILED_PRECONDITION,
                                f"session: flush_denormals=False needs runtime ABI 1.3; {_lib_path} is older")
            _check(lib.kiln_session_create(package.handle, 1 if threads is None else int(threads),
                                           ctypes.byref(handle)), "session")
            self._device: int | None = None
            if hasattr(lib, "kiln_session_flush_denormals"):
                status = lib.kiln_session_flush_denormals(handle, 1 if flush_denormals else 0)
                if status != 0:
                    lib.kiln_session_release(handle)
                    _check(status, "session")
        else:
            if threads is not None:
                raise KilnError(StatusCode.INVALID_ARGUMENT,
                                f"session: package {package.digest} is for a CUDA GPU ({package.device}): it takes "
                                "device= and stream=, not threads")
            try:
                ordinal = 0 if device is None else operator.index(device)
            except TypeError:
                raise KilnError(StatusCode.INVALID_ARGUMENT,
                                f"session: device={device!r}: expected a CUDA device ordinal (int)") from None
            _check(lib.kiln_session_create_cuda(package.handle, ordinal, _stream_handle(stream),
                                                ctypes.byref(handle)), "session")
            self._device = ordinal
        self._handle = handle.value
        self._package = package
        self._stream_object = stream  # the caller's stream: alive while the session is
        self._stream: int | None = lib.kiln_session_cuda_stream(handle) if self._device is not None else None
        self._zero_copy = has_zero_copy()
        self.inputs: list[TensorInfo] = [self._info(i, True) for i in range(lib.kiln_session_num_inputs(handle))]
        self.outputs: list[TensorInfo] = [self._info(i, False) for i in range(lib.kiln_session_num_outputs(handle))]
        self._input_index = {t.name: i for i, t in enumerate(self.inputs)}
        self._output_index = {t.name: i for i, t in enumerate(self.outputs)}
        # What the C side reads or writes without a copy, kept alive while
        # bound: host arrays and device memory's owners (a tensor the caller
        # drops would otherwise go back to its allocator while bound).
        self._bound_inputs: dict[str, Any] = {}
        # Each output is in one place: bound to a host array, bound to device
        # memory, kept in the session's device memory, or (none of these) in the
        # session's memory and copied to the host.
        self._bound_outputs: dict[int, np.ndarray] = {}
        self._device_outputs: dict[int, _DeviceMemory] = {}
        self._kept_outputs: set[int] = set()
        self._runs = 0  # runs started: a DeviceArray is valid during its own

    @property
    def package(self) -> Package:
        return self._package

    @property
    def handle(self) -> int:
        if self._handle is None:
            raise KilnError(StatusCode.FAILED_PRECONDITION, "the session is closed")
        return self._handle

    @property
    def device(self) -> int | None:
        """The CUDA device (ordinal) a CUDA package's session runs on; None for a CPU package."""
        return self._device

    @property
    def stream(self) -> int | None:
        """The CUstream the session's runs go on (kiln_session_cuda_stream); None for a CPU package."""
        return self._stream

    def _info(self, index: int, is_input: bool) -> TensorInfo:
        lib = _open()
        dtype, rank, dims = ctypes.c_int(), ctypes.c_int(), _c_dims()
        if is_input:
            name = lib.kiln_session_input_name(self.handle, index).decode()
            _check(lib.kiln_session_input_info(self.handle, index, ctypes.byref(dtype), dims, ctypes.byref(rank)))
        else:
            name = lib.kiln_session_output_name(self.handle, index).decode()
            _check(lib.kiln_session_output(self.handle, index, None, None, ctypes.byref(dtype), dims,
                                           ctypes.byref(rank)))
        kind = "input" if is_input else "output"
        return TensorInfo(name, _dtype(dtype.value, f"{kind} '{name}'"), tuple(dims[: rank.value]))

    @staticmethod
    def _bindable(array: np.ndarray, info: TensorInfo) -> bool:
        # What kiln_session_bind_input/_output accept: the exact bytes, in place.
        return (array.flags.c_contiguous and array.dtype == info.dtype and array.shape == info.shape
                and array.ctypes.data % info.dtype.itemsize == 0)

    def _checked_array(self, value: Any, info: TensorInfo, kind: str) -> np.ndarray:
        if not isinstance(value, np.ndarray):
            value = np.asarray(value, dtype=info.dtype)  # lists and scalars: converted
        if value.dtype.newbyteorder("=") != info.dtype:
            raise KilnError(StatusCode.INVALID_ARGUMENT,
                            f"{kind} '{info.name}': dtype {value.dtype}, the package's is {info.dtype} "
                            f"(convert with .astype(numpy.{info.dtype.name}))")
        if value.shape != info.shape:
            raise KilnError(StatusCode.INVALID_ARGUMENT,
                            f"{kind} '{info.name}': shape {value.shape}, the package's is {info.shape}")
        return value

    def _cuda_call(self, name: str) -> Any:
        lib = _open()
        if not hasattr(lib, name):
            raise KilnError(StatusCode.FAILED_PRECONDITION,
                            f"{_lib_path} predates runtime ABI 1.2: it has no {name} (device memory)")
        return getattr(lib, name)

    def _order_after(self, stream: int | None, what: str) -> None:
        # CAI v3: the data is ready once `stream` has run what it holds; the
        # session's runs wait for that, unless they go on that stream already.
        if stream is None or stream == self._stream or self._device is None or self._stream is None:
            return
        _CudaDriver.get().wait(self._device, self._stream, stream, f"{what}: ordering the session's stream after "
                               f"the array's ({stream:#x})")

    def set_input(self, name: str, value: Any) -> bool:
        """Gives input `name` its value for the next runs; returns True if bound without a copy.

        A bound array is read by every later run, until the input is given again:
        changing it in place changes what the next run reads. Device memory (an
        object exposing __cuda_array_interface__, or a DevicePointer) is always
        bound, and must be of the input's dtype and shape and C-contiguous.
        """
        lib = _open()
        if name not in self._input_index:
            raise KilnError(StatusCode.NOT_FOUND,
                            f"no input named '{name}' (inputs: {', '.join(t.name for t in self.inputs)})")
        info = self.inputs[self._input_index[name]]
        memory = _device_memory(value, info, "input", writable=False)
        if memory is not None:
            # A CPU package's session refuses here, in the runtime's words.
            _check(self._cuda_call("kiln_session_bind_input_device")(self.handle, name.encode(), memory.ptr,
                                                                     memory.nbytes))
            self._bound_inputs[name] = memory.owner
            self._order_after(memory.stream, f"input '{name}'")
            return True
        array = self._checked_array(value, info, "input")
        if self._zero_copy and self._bindable(array, info):
            _check(lib.kiln_session_bind_input(self.handle, name.encode(), array.ctypes.data, info.nbytes))
            self._bound_inputs[name] = array
            return True
        if array.dtype != info.dtype or not array.flags.c_contiguous:
            array = np.ascontiguousarray(array, dtype=info.dtype)  # byte order or layout: one more copy
        _check(lib.kiln_session_set_input(self.handle, name.encode(), array.ctypes.data, info.nbytes))
        self._bound_inputs.pop(name, None)
        return False

    def run(self, inputs: Mapping[str, Any] | None = None, outputs: Mapping[str, Any] | None = None, *,
            on_device: bool = False) -> dict[str, Any]:
        """Sets `inputs` (set_input for each), runs the package and returns every output by name.

        Inputs not named keep what they were given last (a never-given one fails:
        FAILED_PRECONDITION). Arrays in `outputs` receive their output (written
        in place when C-contiguous, aligned, of the output's dtype and shape;
        otherwise copied into after the run) and are returned as themselves, as
        is device memory there (written in place; it must fit as an input's
        must). Every other output is returned as a new array (a copy: it stays
        valid after later runs); with `on_device` (a CUDA package), as a
        DeviceArray in the session's device memory, valid until the next run.
        """
        targets = self._prepare(inputs, outputs, on_device=on_device, asynchronous=False)
        self._runs += 1
        _check(_open().kiln_session_run(self.handle))
        return self._results(targets, stream=None)

    def run_async(self, inputs: Mapping[str, Any] | None = None,
                  outputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Enqueues a run on the session's stream and returns at once (kiln_session_run_async): a CUDA package's
        outputs, those not given in `outputs`, are DeviceArrays in the session's memory whose `stream` is the
        session's. Outputs, and what `outputs` receives, are ready, and memory bound to the session (host
        arrays included) may change, once the stream has run it: synchronize(), or order work after it on
        that stream. Host arrays in `outputs` must be bindable (C-contiguous, aligned, of the output's dtype
        and shape): nothing is copied into them after the run. A CPU package's session runs synchronously and
        returns what run() does.
        """
        if self._device is None:
            return self.run(inputs, outputs)
        targets = self._prepare(inputs, outputs, on_device=True, asynchronous=True)
        self._runs += 1
        _check(self._cuda_call("kiln_session_run_async")(self.handle))
        return self._results(targets, stream=self._stream)

    def synchronize(self) -> None:
        """Waits until every run enqueued on the session's stream is done (cuStreamSynchronize); a CPU session's
        runs are done when they return."""
        if self._device is None or self._stream is None:
            return
        if self._handle is None:
            raise KilnError(StatusCode.FAILED_PRECONDITION, "the session is closed")
        _CudaDriver.get().synchronize(self._device, self._stream, "synchronize")

    def _prepare(self, inputs: Mapping[str, Any] | None, outputs: Mapping[str, Any] | None, *, on_device: bool,
                 asynchronous: bool) -> dict[int, Any]:
        for name, value in (inputs or {}).items():
            self.set_input(name, value)
        targets: dict[int, np.ndarray | _DeviceMemory] = {}
        for name, target in (outputs or {}).items():
            if name not in self._output_index:
                raise KilnError(StatusCode.NOT_FOUND,
                                f"no output named '{name}' (outputs: {', '.join(t.name for t in self.outputs)})")
            index = self._output_index[name]
            info = self.outputs[index]
            memory = _device_memory(target, info, "output", writable=True)
            if memory is not None:
                targets[index] = memory
                continue
            if not isinstance(target, np.ndarray) or not target.flags.writeable:
                raise KilnError(StatusCode.INVALID_ARGUMENT,
                                f"output '{name}': needs a writeable numpy array, device memory "
                                "(__cuda_array_interface__) or a kiln.DevicePointer")
            array = self._checked_array(target, info, "output")
            if asynchronous and not (self._zero_copy and self._bindable(array, info)):
                raise KilnError(StatusCode.INVALID_ARGUMENT,
                                f"output '{name}': run_async writes host outputs in place only, and this array "
                                "would be copied into after the run: pass a C-contiguous array of the output's "
                                "dtype, aligned to its elements")
            targets[index] = array
        self._bind_outputs(targets, on_device)
        return targets

    def _bind_outputs(self, targets: dict[int, Any], on_device: bool) -> None:
        # Puts each output where this run wants it, with a call only where that
        # changes, and returns the ones an earlier run placed elsewhere to the
        # session's memory: a caller's array receives only the runs it is passed to.
        lib = _open()
        for index, info in enumerate(self.outputs):
            target = targets.get(index)
            if isinstance(target, _DeviceMemory):
                current = self._device_outputs.get(index)
                if current is None or (current.ptr, current.nbytes) != (target.ptr, target.nbytes):
                    # A CPU package's session refuses here, in the runtime's words.
                    _check(self._cuda_call("kiln_session_bind_output_device")(self.handle, index, target.ptr,
                                                                              target.nbytes))
                self._place_output(index, device=target)
                self._order_after(target.stream, f"output '{info.name}'")
            elif target is not None and self._zero_copy and self._bindable(target, info):
                if self._bound_outputs.get(index) is not target:
                    _check(lib.kiln_session_bind_output(self.handle, index, target.ctypes.data, info.nbytes))
                self._place_output(index, host=target)
            elif target is None and on_device:
                if index not in self._kept_outputs:
                    _check(self._cuda_call("kiln_session_keep_output_on_device")(self.handle, index, 1))
                self._place_output(index, kept=True)
            else:
                if index in self._bound_outputs:
                    _check(lib.kiln_session_bind_output(self.handle, index, None, 0))
                elif index in self._device_outputs or index in self._kept_outputs:
                    _check(self._cuda_call("kiln_session_keep_output_on_device")(self.handle, index, 0))
                self._place_output(index)

    def _place_output(self, index: int, *, host: np.ndarray | None = None, device: _DeviceMemory | None = None,
                      kept: bool = False) -> None:
        self._bound_outputs.pop(index, None)
        self._device_outputs.pop(index, None)
        self._kept_outputs.discard(index)
        if host is not None:
            self._bound_outputs[index] = host
        if device is not None:
            self._device_outputs[index] = device
        if kept:
            self._kept_outputs.add(index)

    def _results(self, targets: dict[int, Any], stream: int | None) -> dict[str, Any]:
        lib = _open()
        results: dict[str, Any] = {}
        for index, info in enumerate(self.outputs):
            target = targets.get(index)
            if index in self._device_outputs:
                results[info.name] = self._device_outputs[index].owner  # written in place by the run
                continue
            if index in self._bound_outputs:
                results[info.name] = target  # written in place by the run
                continue
            if index in self._kept_outputs:
                ptr = ctypes.c_uint64()
                _check(self._cuda_call("kiln_session_output_device")(self.handle, index, ctypes.byref(ptr)))
                results[info.name] = DeviceArray(self, self._runs, info.name, ptr.value, info.shape, info.dtype,
                                                 stream)
                continue
            data, nbytes = ctypes.c_void_p(), ctypes.c_size_t()
            _check(lib.kiln_session_output(self.handle, index, ctypes.byref(data), ctypes.byref(nbytes),
                                           None, None, None))
            if nbytes.value != info.nbytes or (data.value is None and info.nbytes):
                raise KilnError(StatusCode.INTERNAL, f"output '{info.name}': {nbytes.value} bytes at "
                                f"{data.value}, expected {info.nbytes} bytes of host memory")
            # A view of the session's memory (valid until the next run), copied below.
            result = np.frombuffer((ctypes.c_char * info.nbytes).from_address(data.value), dtype=info.dtype) \
                if info.nbytes else np.empty(0, info.dtype)
            result = result.reshape(info.shape)
            if target is not None:
                np.copyto(target, result)
                results[info.name] = target
            else:
                results[info.name] = result.copy()
        return results

    def close(self) -> None:
        if self._handle is not None:
            _open().kiln_session_release(self._handle)  # a CUDA session waits for its stream first
            self._handle = None
            self._bound_inputs.clear()
            self._bound_outputs.clear()
            self._device_outputs.clear()
            self._kept_outputs.clear()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if _lib is not None and getattr(self, "_handle", None) is not None:
            self.close()

    def __repr__(self) -> str:
        def fmt(ts: list[TensorInfo]) -> str:
            return ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in ts)
        where = f" on cuda:{self._device}" if self._device is not None else ""
        return f"<kiln.Session{where} ({fmt(self.inputs)}) -> ({fmt(self.outputs)})>"
