"""Kiln from Python: the compile service's gRPC client and the package runtime.

    kiln.Client(address)             compile through a kiln-server, look up, fetch (kiln.client; needs grpcio)
    kiln.Package, kiln.Session       run a package on NumPy arrays, or CUDA device memory for a CUDA package
                                     (kiln.runtime; libkiln_runtime.so over ctypes)
    kiln.KilnError                   what either raises: .code (kiln.StatusCode) and .message
    kiln.v1                          the generated wire messages and stubs (proto/kiln/v1)

`import kiln.runtime` needs neither grpcio nor protobuf: a deployment that only
runs packages does not install the client's dependencies.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kiln._version import __version__
from kiln.errors import KilnError, StatusCode

if TYPE_CHECKING:
    from kiln.client import Client
    from kiln.runtime import DeviceArray, DevicePointer, Package, Session, TensorInfo

__all__ = ["Client", "DeviceArray", "DevicePointer", "KilnError", "Package", "Session", "StatusCode", "TensorInfo",
           "__version__"]

_LAZY = {"Client": "kiln.client", "DeviceArray": "kiln.runtime", "DevicePointer": "kiln.runtime",
         "Package": "kiln.runtime", "Session": "kiln.runtime", "TensorInfo": "kiln.runtime"}


def __getattr__(name: str) -> Any:
    # Imported on first use, so `import kiln` loads neither grpc nor libkiln_runtime.so.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kiln' has no attribute {name!r}")
