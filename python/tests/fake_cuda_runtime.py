"""The runtime's CUDA calls (ABI 1.2) over a CPU package, for the binding's CUDA
paths on machines without a GPU, where no CUDA package loads.

FakeCudaRuntime wraps the real libkiln_runtime.so: packages loaded through it
say they are CUDA packages ("cuda:sm_90"); their sessions are real CPU
sessions, with device memory being host memory (a device pointer is a host
address, as in tests/client/runtime/fake_cuda), so results are the real
kernels'. It follows kiln_runtime.h for the device calls: a device binding
makes the kernels write in place (real kiln_session_bind_output), an output
kept on the device or bound there has NULL host data, 0 unbinds. It checks
what the Python side alone decides (which calls, with which arguments, in
which order) and records them; the runtime's own checks of device memory
(alignment, allocation, overlap) are the C++ tests' and a GPU host's.
FakeCudaDriver stands for kiln.runtime._CudaDriver's stream calls.
"""
from __future__ import annotations

import ctypes
from typing import Any

_DEVICE_CUDA = 1


class FakeCudaRuntime:
    """Every function of the real library, with packages and sessions made through it acting as CUDA ones."""

    OWN_STREAM_BASE = 0x5E55_0000  # the streams "made" for sessions without the caller's

    def __init__(self, real: ctypes.CDLL) -> None:
        self._real = real
        self.packages: set[int] = set()
        self.sessions: dict[int, dict[str, Any]] = {}  # handle -> device, stream, outputs' places
        self.calls: list[tuple[Any, ...]] = []  # the device calls, as made

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)  # every other function: the real one

    # Packages.
    def kiln_package_load(self, path: bytes, out: Any) -> int:
        status = self._real.kiln_package_load(path, out)
        if status == 0:
            self.packages.add(out._obj.value)
        return status

    def kiln_package_load_bytes(self, data: Any, size: int, out: Any) -> int:
        status = self._real.kiln_package_load_bytes(data, size, out)
        if status == 0:
            self.packages.add(out._obj.value)
        return status

    def kiln_package_device(self, package: int, sm: Any) -> int:
        assert package in self.packages, "a package not loaded through the fake"
        return _DEVICE_CUDA

    def kiln_package_target(self, package: int) -> bytes:
        return b"cuda:sm_90" if package in self.packages else self._real.kiln_package_target(package)

    def kiln_package_release(self, package: int) -> None:
        self.packages.discard(package)
        self._real.kiln_package_release(package)

    # Sessions.
    def kiln_session_create(self, package: int, threads: int, out: Any) -> int:
        raise AssertionError("a CUDA package's session is made by kiln_session_create_cuda")

    def kiln_session_create_cuda(self, package: int, device: int, stream: int | None, out: Any) -> int:
        self.calls.append(("create_cuda", device, stream))
        assert device == 0, "the fake has one device"
        status = self._real.kiln_session_create(package, 1, out)
        if status == 0:
            own = self.OWN_STREAM_BASE + len(self.sessions) + 1
            self.sessions[out._obj.value] = {"device": device, "stream": stream or own, "place": {}}
        return status

    def kiln_session_cuda_stream(self, session: Any) -> int:
        return self.sessions[_value(session)]["stream"]

    def kiln_session_release(self, session: int) -> None:
        self.sessions.pop(session, None)
        self._real.kiln_session_release(session)

    def kiln_session_bind_input_device(self, session: int, name: bytes, ptr: int, nbytes: int) -> int:
        self.calls.append(("bind_input_device", name.decode(), ptr, nbytes))
        return self._real.kiln_session_bind_input(session, name, ptr, nbytes)

    def kiln_session_bind_output(self, session: int, index: int, data: Any, nbytes: int) -> int:
        self.calls.append(("bind_output", index, data, nbytes))
        status = self._real.kiln_session_bind_output(session, index, data, nbytes)
        if status == 0:
            self.sessions[session]["place"][index] = ("host", data) if data else ("session", None)
        return status

    def kiln_session_bind_output_device(self, session: int, index: int, ptr: int, nbytes: int) -> int:
        self.calls.append(("bind_output_device", index, ptr, nbytes))
        status = self._real.kiln_session_bind_output(session, index, ptr or None, nbytes)
        if status == 0:
            # 0 returns the output to the session's memory, copied to the host.
            self.sessions[session]["place"][index] = ("device", ptr) if ptr else ("session", None)
        return status

    def kiln_session_keep_output_on_device(self, session: int, index: int, keep: int) -> int:
        self.calls.append(("keep_output_on_device", index, keep))
        status = self._real.kiln_session_bind_output(session, index, None, 0)  # undoes a binding
        if status == 0:
            self.sessions[session]["place"][index] = ("kept", None) if keep else ("session", None)
        return status

    def kiln_session_output(self, session: int, index: int, data: Any, nbytes: Any, dtype: Any, dims: Any,
                            rank: Any) -> int:
        status = self._real.kiln_session_output(session, index, data, nbytes, dtype, dims, rank)
        place = self.sessions[session]["place"].get(index, ("session", None))[0]
        if status == 0 and data is not None and place in ("device", "kept"):
            data._obj.value = None  # not on the host
        return status

    def kiln_session_output_device(self, session: int, index: int, out: Any) -> int:
        place, ptr = self.sessions[session]["place"].get(index, ("session", None))
        if place != "device":
            host = ctypes.c_void_p()
            status = self._real.kiln_session_output(session, index, ctypes.byref(host), None, None, None, None)
            if status != 0:
                return status
            ptr = host.value
        out._obj.value = ptr
        return 0

    def kiln_session_run(self, session: int) -> int:
        self.calls.append(("run",))
        return self._real.kiln_session_run(session)

    def kiln_session_run_async(self, session: int) -> int:
        self.calls.append(("run_async",))
        return self._real.kiln_session_run(session)  # done at once: "ready once the stream has run it" holds


class FakeCudaDriver:
    """kiln.runtime._CudaDriver's calls, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def wait(self, device: int, stream: int, producer: int, what: str) -> None:
        self.calls.append(("wait", device, stream, producer, what))

    def synchronize(self, device: int, stream: int, what: str) -> None:
        self.calls.append(("synchronize", device, stream))


def _value(handle: Any) -> int:
    return handle.value if isinstance(handle, ctypes.c_void_p) else handle
