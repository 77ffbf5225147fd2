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
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping, NamedTuple

import numpy as np

from kiln.errors import KilnError, StatusCode

__all__ = ["Package", "Session", "TensorInfo", "abi_version", "has_zero_copy", "library_path", "version"]

# The ABI major version this binding speaks (KILN_RUNTIME_ABI_MAJOR in kiln_runtime.h).
_ABI_MAJOR = 1
_MAX_RANK = 16  # KILN_MAX_RANK

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
}
_OPTIONAL = {"kiln_runtime_version", "kiln_runtime_abi_version", "kiln_package_load_bytes", "kiln_package_target",
             "kiln_session_bind_input", "kiln_session_bind_output"}

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


class Session:
    """Runs one package: its own buffers, `threads` threads (1: the calling thread; 0: every hardware thread).

    Not for concurrent use from several threads; make one session per thread.
    run() releases the GIL while the package runs.
    """

    def __init__(self, package: Package, threads: int = 1) -> None:
        lib = _open()
        handle = _c_handle()
        _check(lib.kiln_session_create(package.handle, int(threads), ctypes.byref(handle)), "session")
        self._handle: int | None = handle.value
        self._package = package
        self._zero_copy = has_zero_copy()
        self.inputs: list[TensorInfo] = [self._info(i, True) for i in range(lib.kiln_session_num_inputs(handle))]
        self.outputs: list[TensorInfo] = [self._info(i, False) for i in range(lib.kiln_session_num_outputs(handle))]
        self._input_index = {t.name: i for i, t in enumerate(self.inputs)}
        self._output_index = {t.name: i for i, t in enumerate(self.outputs)}
        # Arrays the C side reads or writes without a copy: kept alive while bound.
        self._bound_inputs: dict[str, np.ndarray] = {}
        self._bound_outputs: dict[int, np.ndarray] = {}

    @property
    def package(self) -> Package:
        return self._package

    @property
    def handle(self) -> int:
        if self._handle is None:
            raise KilnError(StatusCode.FAILED_PRECONDITION, "the session is closed")
        return self._handle

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

    def set_input(self, name: str, value: Any) -> bool:
        """Gives input `name` its value for the next runs; returns True if bound without a copy.

        A bound array is read by every later run, until the input is given again:
        changing it in place changes what the next run reads.
        """
        lib = _open()
        if name not in self._input_index:
            raise KilnError(StatusCode.NOT_FOUND,
                            f"no input named '{name}' (inputs: {', '.join(t.name for t in self.inputs)})")
        info = self.inputs[self._input_index[name]]
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

    def run(self, inputs: Mapping[str, Any] | None = None,
            outputs: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Sets `inputs` (set_input for each), runs the package and returns every output by name.

        Inputs not named keep what they were given last (a never-given one fails:
        FAILED_PRECONDITION). Arrays in `outputs` receive their output (written
        in place when C-contiguous, aligned, of the output's dtype and shape;
        otherwise copied into after the run) and are returned as themselves;
        every other output is returned as a new array (a copy: it stays valid
        after later runs).
        """
        lib = _open()
        for name, value in (inputs or {}).items():
            self.set_input(name, value)
        targets: dict[int, np.ndarray] = {}
        for name, array in (outputs or {}).items():
            if name not in self._output_index:
                raise KilnError(StatusCode.NOT_FOUND,
                                f"no output named '{name}' (outputs: {', '.join(t.name for t in self.outputs)})")
            index = self._output_index[name]
            if not isinstance(array, np.ndarray) or not array.flags.writeable:
                raise KilnError(StatusCode.INVALID_ARGUMENT, f"output '{name}': needs a writeable numpy array")
            targets[index] = self._checked_array(array, self.outputs[index], "output")
        self._bind_outputs(targets)
        _check(lib.kiln_session_run(self.handle))
        results: dict[str, np.ndarray] = {}
        for index, info in enumerate(self.outputs):
            target = targets.get(index)
            if target is not None and self._bound_outputs.get(index) is target:
                results[info.name] = target  # written in place by the run
                continue
            data, nbytes = ctypes.c_void_p(), ctypes.c_size_t()
            _check(lib.kiln_session_output(self.handle, index, ctypes.byref(data), ctypes.byref(nbytes),
                                           None, None, None))
            if nbytes.value != info.nbytes:
                raise KilnError(StatusCode.INTERNAL, f"output '{info.name}': {nbytes.value} bytes, expected "
                                f"{info.nbytes}")
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

    def _bind_outputs(self, targets: dict[int, np.ndarray]) -> None:
        # Binds the outputs this run writes in place and unbinds the ones an
        # earlier run bound: a caller's array receives only the runs it is passed to.
        if not self._zero_copy:
            return
        lib = _open()
        for index in list(self._bound_outputs):
            if self._bound_outputs[index] is not targets.get(index):
                _check(lib.kiln_session_bind_output(self.handle, index, None, 0))
                del self._bound_outputs[index]
        for index, array in targets.items():
            info = self.outputs[index]
            if index not in self._bound_outputs and self._bindable(array, info):
                _check(lib.kiln_session_bind_output(self.handle, index, array.ctypes.data, info.nbytes))
                self._bound_outputs[index] = array

    def close(self) -> None:
        if self._handle is not None:
            _open().kiln_session_release(self._handle)
            self._handle = None
            self._bound_inputs.clear()
            self._bound_outputs.clear()

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
        return f"<kiln.Session ({fmt(self.inputs)}) -> ({fmt(self.outputs)})>"
