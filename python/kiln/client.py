"""The Kiln service client: compile with streamed progress, cached lookup, artifact fetch (gRPC).

    with kiln.Client("kiln.internal:7070") as client:
        result = client.compile("model.onnx", shapes={"x": [1, 3, 224, 224]}, trials=16,
                                progress=lambda p: print(p.stage, p.groups_done, p.groups_total))
        package_bytes = client.fetch(result.package_digest)

Requests and answers are the wire messages of proto/kiln/v1 (kiln.v1.compile_pb2,
kiln.v1.lookup_pb2): the .proto files document every field. Errors are
kiln.KilnError with the gRPC status code's name.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Callable, Mapping, Sequence, Union

import grpc

from kiln.errors import KilnError, StatusCode
from kiln.v1 import compile_pb2, compile_pb2_grpc, lookup_pb2, lookup_pb2_grpc

__all__ = ["Client", "Model"]

# A model: a path to an .onnx file, its serialized bytes, or an object with
# SerializeToString() (an onnx.ModelProto; onnx.load inlines external data).
Model = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, Any]
ProgressCallback = Callable[[compile_pb2.Progress], None]

# As the C++ client: packages arrive in chunks, models may be large.
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 1 << 30)]


def _model_bytes(model: Model) -> tuple[bytes, str]:
    """(serialized ModelProto, a name for reports) of any accepted model form."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), ""
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        with open(path, "rb") as f:
            return f.read(), os.path.splitext(os.path.basename(path))[0]
    if hasattr(model, "SerializeToString"):
        return model.SerializeToString(), ""
    raise TypeError(f"model: expected a path, bytes or an onnx.ModelProto, got {type(model).__name__}")


def _shape_bindings(shapes: Mapping[str, Sequence[int]] | None) -> list[compile_pb2.ShapeBinding]:
    return [compile_pb2.ShapeBinding(input=name, dims=[int(d) for d in dims]) for name, dims in (shapes or {}).items()]


def _error(e: grpc.RpcError, what: str) -> KilnError:
    code = e.code() if isinstance(e, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (e.details() if isinstance(e, grpc.Call) else None) or str(e)
    return KilnError(StatusCode.of(code.value[0]), f"{what}: {details}")


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _channel(address: str, tls_ca: str | None, tls_cert: str | None, tls_key: str | None,
             token: str | None) -> grpc.Channel:
    tls_ca = tls_ca or os.environ.get("KILN_TLS_CA")
    tls_cert = tls_cert or os.environ.get("KILN_TLS_CERT")
    tls_key = tls_key or os.environ.get("KILN_TLS_KEY")
    if token is None and os.environ.get("KILN_TOKEN_FILE"):
        token = _read(os.environ["KILN_TOKEN_FILE"]).decode().strip()
    if not tls_ca:
        if token or tls_cert or tls_key:
            raise KilnError(StatusCode.INVALID_ARGUMENT,
                            "a token or client certificate needs tls_ca: it must not go over plaintext")
        return grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
    if bool(tls_cert) != bool(tls_key):
        raise KilnError(StatusCode.INVALID_ARGUMENT, "tls_cert and tls_key go together")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(tls_ca),
        private_key=_read(tls_key) if tls_key else None,
        certificate_chain=_read(tls_cert) if tls_cert else None)
    if token:
        credentials = grpc.composite_channel_credentials(credentials, grpc.access_token_call_credentials(token))
    return grpc.secure_channel(address, credentials, options=_CHANNEL_OPTIONS)


class Client:
    """A connection to one kiln-server. Thread-safe; close() it or use it in a `with` block."""

    def __init__(self, address: str, connect_timeout: float = 10.0, *, tls_ca: str | None = None,
                 tls_cert: str | None = None, tls_key: str | None = None, token: str | None = None) -> None:
        """Connects to `address` ("HOST:PORT"); raises KilnError(UNAVAILABLE) if that takes over connect_timeout s.

        A server that serves TLS needs `tls_ca` (the PEM file of its certificate's CA); one that checks
        credentials needs a bearer `token` or a client certificate (`tls_cert`, `tls_key`: PEM files), as
        docs/operations.md ("Certificates and roles") says. Unset, they come from KILN_TLS_CA, KILN_TLS_CERT,
        KILN_TLS_KEY and KILN_TOKEN_FILE, as for the kiln CLI.
        """
        self.address = address
        self._channel = _channel(address, tls_ca, tls_cert, tls_key, token)
        ready = grpc.channel_ready_future(self._channel)
        try:
            ready.result(timeout=connect_timeout)
        except grpc.FutureTimeoutError:
            ready.cancel()
            self._channel.close()
            raise KilnError(StatusCode.UNAVAILABLE,
                            f"kiln server {address}: not reachable within {connect_timeout:g} s") from None
        self._compile = compile_pb2_grpc.CompileServiceStub(self._channel)
        self._lookup = lookup_pb2_grpc.LookupServiceStub(self._channel)

    def compile(self, model: Model, *, target: str = "cpu", shapes: Mapping[str, Sequence[int]] | None = None,
                trials: int = 16, threads: int = 1, search: str = "", budget_trials: int = 0,
                budget_seconds: float = 0.0, progressive: bool = False, model_name: str | None = None,
                progress: ProgressCallback | None = None,
                timeout: float | None = None) -> compile_pb2.CompileResult:
        """Compiles `model` on the server and returns the CompileResult (package_digest, groups, ...).

        Arguments are CompileRequest's fields (compile.proto), with `kiln compile`'s
        defaults: `trials` is trials_per_group (0: no tuning), `shapes` binds input
        dimensions ({"x": [1, 3, 224, 224]}). `progress` is called with every
        kiln.v1.Progress event as the server streams them. `timeout`: seconds for
        the whole compile (None: no limit). `model_name` is recorded in the
        package (so it enters the digest); None: a path's file name without its
        extension, as `kiln compile` sends it, else "". Fetch the package with fetch().
        """
        data, name = _model_bytes(model)
        request = compile_pb2.CompileRequest(
            onnx_model=data, target=target, shapes=_shape_bindings(shapes), trials_per_group=trials,
            threads=threads, search=search, budget_trials=budget_trials, budget_seconds=budget_seconds,
            progressive=progressive, model_name=name if model_name is None else model_name)
        result: compile_pb2.CompileResult | None = None
        stream = self._compile.Compile(request, timeout=timeout, wait_for_ready=True)
        try:
            for event in stream:
                if event.HasField("progress") and progress is not None:
                    progress(event.progress)
                elif event.HasField("result"):
                    result = event.result
        except grpc.RpcError as e:
            raise _error(e, "compile") from None
        finally:
            stream.cancel()  # the server sees CANCELLED if we leave early (a callback raised); else a no-op
        if result is None:
            raise KilnError(StatusCode.INTERNAL, "compile: the stream ended without a result")
        return result

    def lookup(self, model: Model, *, target: str = "cpu", shapes: Mapping[str, Sequence[int]] | None = None,
               threads: int = 1, timeout: float = 60.0) -> lookup_pb2.LookupResponse:
        """The package an earlier compile of the same model, shapes, target and threads produced; never compiles.

        Returns the LookupResponse: `found`, `package_digest` (fetch it with
        fetch()), or `reason` when there is none.
        """
        data, _ = _model_bytes(model)
        request = lookup_pb2.LookupRequest(onnx_model=data, target=target, shapes=_shape_bindings(shapes),
                                           threads=threads)
        try:
            return self._lookup.Lookup(request, timeout=timeout)
        except grpc.RpcError as e:
            raise _error(e, "lookup") from None

    def fetch(self, digest: str, timeout: float | None = 600.0) -> bytes:
        """The stored artifact (a package) with `digest` ("sha256:<hex>"), verified against it.

        KilnError NOT_FOUND for an unknown digest, DATA_LOSS if the bytes do not hash to it.
        """
        parts: list[bytes] = []
        size = 0
        stream = self._compile.FetchArtifact(compile_pb2.FetchArtifactRequest(digest=digest), timeout=timeout)
        try:
            for chunk in stream:
                if chunk.offset != size:
                    raise KilnError(StatusCode.DATA_LOSS,
                                    f"fetch {digest}: chunk at offset {chunk.offset} after {size} bytes")
                parts.append(chunk.data)
                size += len(chunk.data)
        except grpc.RpcError as e:
            raise _error(e, f"fetch {digest}") from None
        finally:
            stream.cancel()
        data = b"".join(parts)
        got = "sha256:" + hashlib.sha256(data).hexdigest()
        if got != digest:
            raise KilnError(StatusCode.DATA_LOSS, f"fetch {digest}: the bytes arrived with digest {got}")
        return data

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
