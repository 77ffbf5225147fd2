"""kiln.Client against a real kiln-server and kiln-worker on 127.0.0.1: compile
with progress, lookup, fetch, then run the package with kiln.runtime."""
from __future__ import annotations

import hashlib
import socket
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from conftest import X_SHAPE, Z_SHAPE, Farm, random_inputs, reference
from kiln import KilnError, StatusCode
from kiln.client import Client
from kiln.runtime import Package, Session
from kiln.v1 import compile_pb2

SHAPES = {"x": list(X_SHAPE), "z": list(Z_SHAPE)}


def test_compile_lookup_fetch_run(farm: Farm, model_bytes: bytes, model_path: Path) -> None:
    with Client(farm.address) as client:
        missing = client.lookup(model_bytes, shapes=SHAPES)
        assert not missing.found and missing.reason

        events: list[compile_pb2.Progress] = []
        # The name `kiln compile` and Client.compile send for model_path: it is
        # recorded in the package, so the same name gives the same package.
        name = model_path.stem
        result = client.compile(model_bytes, shapes=SHAPES, trials=2, model_name=name, progress=events.append)
        assert events, "the progress callback was never called"
        assert all(isinstance(e, compile_pb2.Progress) for e in events)
        assert {"tune", "package"} & {e.stage for e in events}, [e.stage for e in events]
        assert result.package_digest.startswith("sha256:")
        assert result.trials_measured > 0 and len(result.groups) >= 1

        found = client.lookup(model_bytes, shapes=SHAPES)
        assert found.found and found.package_digest == result.package_digest, found

        data = client.fetch(result.package_digest)
        assert len(data) == result.package_size
        assert "sha256:" + hashlib.sha256(data).hexdigest() == result.package_digest

        # The same model from a file and as an onnx.ModelProto: nothing left to
        # measure, the same package.
        again = client.compile(model_path, shapes=SHAPES, trials=2)
        assert again.trials_measured == 0 and again.package_digest == result.package_digest
        proto = client.compile(onnx.load(model_path), shapes=SHAPES, trials=2, model_name=name)
        assert proto.package_digest == result.package_digest

    with Package.from_bytes(data) as package, Session(package) as session:
        assert package.digest == result.package_digest
        inputs = random_inputs(21)
        np.testing.assert_allclose(session.run(inputs)["y"], reference(**inputs), rtol=1e-5, atol=1e-5)


def test_server_errors_are_kiln_errors(farm: Farm) -> None:
    with Client(farm.address) as client:
        with pytest.raises(KilnError) as e:
            client.compile(b"not an onnx model", shapes=SHAPES, trials=0)
        assert e.value.code == StatusCode.INVALID_ARGUMENT and e.value.message.startswith("compile: ")

        with pytest.raises(KilnError) as e:
            client.fetch("sha256:" + "0" * 64)
        assert e.value.code == StatusCode.NOT_FOUND


def test_progress_callback_that_raises_stops_the_compile(farm: Farm, model_bytes: bytes) -> None:
    class Stop(Exception):
        pass

    def stop(_: compile_pb2.Progress) -> None:
        raise Stop

    with Client(farm.address) as client, pytest.raises(Stop):
        client.compile(model_bytes, shapes=SHAPES, trials=0, progress=stop)


def test_unreachable_server_raises_within_the_connect_timeout() -> None:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(KilnError) as e:
        Client(f"127.0.0.1:{port}", connect_timeout=1.0)
    assert e.value.code == StatusCode.UNAVAILABLE
    assert f"127.0.0.1:{port}" in e.value.message and "1 s" in e.value.message
    assert time.monotonic() - start < 10  # the 1 s deadline, not gRPC's own retries
