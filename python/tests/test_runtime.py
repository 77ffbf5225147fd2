"""kiln.runtime on a real package: metadata, results against NumPy, zero-copy
binding of inputs and outputs (and the copies it falls back to), and errors."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from conftest import X_SHAPE, Z_SHAPE, random_inputs, reference
from kiln import KilnError, StatusCode
from kiln import runtime

needs_zero_copy = pytest.mark.skipif(
    not runtime.has_zero_copy(),
    reason=f"{runtime.library_path()} lacks kiln_session_bind_input/_output: only the copying path runs")


@pytest.fixture
def package(package_path: Path) -> runtime.Package:
    with runtime.Package.load(package_path) as p:
        yield p


@pytest.fixture
def session(package: runtime.Package) -> runtime.Session:
    with runtime.Session(package) as s:
        yield s


def test_library_version() -> None:
    abi = runtime.abi_version()
    assert abi is None or abi[0] == 1
    v = runtime.version()
    assert v is None or v.count(".") == 2


def test_package_metadata(package: runtime.Package, package_path: Path, session: runtime.Session) -> None:
    assert package.digest == "sha256:" + hashlib.sha256(package_path.read_bytes()).hexdigest()
    assert package.target is None or package.target  # a non-empty CPU description when the library has it
    assert session.inputs == [runtime.TensorInfo("x", np.dtype(np.float32), X_SHAPE),
                              runtime.TensorInfo("z", np.dtype(np.float32), Z_SHAPE)]
    assert session.outputs == [runtime.TensorInfo("y", np.dtype(np.float32), (X_SHAPE[0], Z_SHAPE[1]))]


def test_from_bytes(package_path: Path) -> None:
    data = package_path.read_bytes()
    for form in (data, bytearray(data), memoryview(data)):
        with runtime.Package.from_bytes(form) as p:
            assert p.digest == "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("threads", [1, 2])
def test_run_matches_numpy(package: runtime.Package, threads: int) -> None:
    session = runtime.Session(package, threads=threads)
    first_inputs = random_inputs(1)
    first = session.run(first_inputs)["y"]
    np.testing.assert_allclose(first, reference(**first_inputs), rtol=1e-5, atol=1e-5)
    # Returned outputs are copies: a later run leaves them as they were.
    kept = first.copy()
    second_inputs = random_inputs(2)
    second = session.run(second_inputs)["y"]
    np.testing.assert_allclose(second, reference(**second_inputs), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(first, kept)
    # Lists are converted to the input's dtype.
    listed = session.run({k: v.tolist() for k, v in first_inputs.items()})["y"]
    np.testing.assert_allclose(listed, kept, rtol=1e-6)


@pytest.mark.parametrize("threads", [1, 2])
def test_denormals_flushed_unless_kept(package: runtime.Package, threads: int) -> None:
    # y = Relu(0 @ W + z) = z: a denormal z comes out as 0 unless the session keeps denormals.
    tiny = np.float32(2.0 ** -130)
    inputs = {"x": np.zeros(X_SHAPE, np.float32), "z": np.full(Z_SHAPE, tiny, np.float32)}
    flushed = runtime.Session(package, threads=threads).run(inputs)["y"]
    np.testing.assert_array_equal(flushed, np.zeros((X_SHAPE[0], Z_SHAPE[1]), np.float32))
    kept = runtime.Session(package, threads=threads, flush_denormals=False).run(inputs)["y"]
    np.testing.assert_array_equal(kept, np.full((X_SHAPE[0], Z_SHAPE[1]), tiny, np.float32))
    # The calling thread's own mode is as it was: NumPy still underflows gradually.
    assert np.float32(2.0 ** -126) / np.float32(2) == np.float32(2.0 ** -127)


@needs_zero_copy
def test_aligned_contiguous_input_is_bound_without_a_copy(session: runtime.Session) -> None:
    inputs = random_inputs(3)
    assert session.set_input("x", inputs["x"]) is True
    assert session.set_input("z", inputs["z"]) is True
    before = session.run()["y"]
    np.testing.assert_allclose(before, reference(**inputs), rtol=1e-5, atol=1e-5)
    # The session reads the caller's array itself: changing it in place, without
    # giving it again, changes the next run's result.
    inputs["x"] *= -2
    after = session.run()["y"]
    np.testing.assert_allclose(after, reference(**inputs), rtol=1e-5, atol=1e-5)
    assert not np.allclose(before, after)


def test_other_layouts_are_copied(session: runtime.Session) -> None:
    inputs = random_inputs(4)
    # Non-contiguous: every other column of a wider array.
    wide = np.zeros((X_SHAPE[0], 2 * X_SHAPE[1]), np.float32)
    wide[:, ::2] = inputs["x"]
    strided = wide[:, ::2]
    # Unaligned: float32 elements starting one byte into a buffer.
    raw = np.zeros(inputs["z"].nbytes + 1, np.uint8)
    unaligned = raw[1:].view(np.float32).reshape(Z_SHAPE)
    unaligned[...] = inputs["z"]
    assert unaligned.ctypes.data % 4 != 0
    # Big-endian: right values, other byte order.
    swapped = inputs["x"].astype(">f4")
    assert session.set_input("x", strided) is False
    assert session.set_input("z", unaligned) is False
    before = session.run()["y"]
    np.testing.assert_allclose(before, reference(**inputs), rtol=1e-5, atol=1e-5)
    # Copied: changing the arrays afterwards changes nothing.
    wide[...] = 7
    unaligned[...] = -7
    np.testing.assert_array_equal(session.run()["y"], before)
    assert session.set_input("x", swapped) is False
    np.testing.assert_allclose(session.run({"z": inputs["z"]})["y"], reference(**inputs), rtol=1e-5, atol=1e-5)


def test_outputs_into_caller_arrays(session: runtime.Session) -> None:
    inputs = random_inputs(5)
    out = np.full((X_SHAPE[0], Z_SHAPE[1]), np.nan, np.float32)
    result = session.run(inputs, outputs={"y": out})
    assert result["y"] is out
    np.testing.assert_allclose(out, reference(**inputs), rtol=1e-5, atol=1e-5)
    # The caller's array receives only the runs it is passed to.
    kept = out.copy()
    other = session.run(random_inputs(6))["y"]
    np.testing.assert_array_equal(out, kept)
    assert not np.shares_memory(other, out)
    # A non-contiguous target is filled by a copy after the run.
    wide = np.zeros((X_SHAPE[0], 2 * Z_SHAPE[1]), np.float32)
    result = session.run(inputs, outputs={"y": wide[:, ::2]})
    np.testing.assert_allclose(wide[:, ::2], reference(**inputs), rtol=1e-5, atol=1e-5)
    assert not wide[:, 1::2].any()


@needs_zero_copy
def test_bound_output_is_written_in_place(session: runtime.Session) -> None:
    out = np.zeros((X_SHAPE[0], Z_SHAPE[1]), np.float32)
    inputs = random_inputs(7)
    session.run(inputs, outputs={"y": out})
    assert session._bound_outputs.get(0) is out  # bound, not copied into
    inputs2 = random_inputs(8)
    session.run(inputs2, outputs={"y": out})
    np.testing.assert_allclose(out, reference(**inputs2), rtol=1e-5, atol=1e-5)


def test_bad_inputs_raise_clear_errors(session: runtime.Session) -> None:
    inputs = random_inputs(9)
    with pytest.raises(KilnError) as e:
        session.run({**inputs, "x": inputs["x"].astype(np.float64)})
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    assert "input 'x'" in e.value.message and "float64" in e.value.message and "float32" in e.value.message

    with pytest.raises(KilnError) as e:
        session.run({**inputs, "x": inputs["x"].reshape(8, 4)})
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    assert "input 'x'" in e.value.message and "(8, 4)" in e.value.message and "(4, 8)" in e.value.message

    with pytest.raises(KilnError) as e:
        session.run({**inputs, "q": inputs["x"]})
    assert e.value.code == StatusCode.NOT_FOUND
    assert "'q'" in e.value.message and "x, z" in e.value.message

    with pytest.raises(KilnError) as e:
        session.run(inputs, outputs={"y": np.zeros((4, 16), np.float64)})
    assert e.value.code == StatusCode.INVALID_ARGUMENT and "output 'y'" in e.value.message


def test_missing_input_fails_the_run(package: runtime.Package) -> None:
    session = runtime.Session(package)
    with pytest.raises(KilnError) as e:
        session.run({"x": random_inputs(10)["x"]})
    assert e.value.code == StatusCode.FAILED_PRECONDITION
    assert "'z'" in e.value.message and str(e.value).startswith("FAILED_PRECONDITION: ")


def test_corrupt_or_missing_package(package_path: Path, tmp_path: Path) -> None:
    data = bytearray(package_path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(KilnError) as e:
        runtime.Package.from_bytes(bytes(data))
    assert e.value.code == StatusCode.DATA_LOSS, e.value
    assert "checksum" in e.value.message

    corrupt = tmp_path / "corrupt.kpkg"
    corrupt.write_bytes(data)
    with pytest.raises(KilnError) as e:
        runtime.Package.load(corrupt)
    assert e.value.code == StatusCode.DATA_LOSS

    with pytest.raises(KilnError) as e:
        runtime.Package.load(tmp_path / "absent.kpkg")
    assert e.value.code == StatusCode.NOT_FOUND and "absent.kpkg" in e.value.message


def test_closed_objects_refuse_use(package_path: Path) -> None:
    package = runtime.Package.load(package_path)
    session = runtime.Session(package)
    package.close()  # the session keeps the package alive
    assert session.run(random_inputs(11))["y"].shape == (X_SHAPE[0], Z_SHAPE[1])
    session.close()
    with pytest.raises(KilnError) as e:
        session.run()
    assert e.value.code == StatusCode.FAILED_PRECONDITION and "closed" in e.value.message


def test_copying_path(package: runtime.Package) -> None:
    # What a library without kiln_session_bind_input/_output gets: every input
    # copied in, every output copied out, with the same results.
    session = runtime.Session(package)
    session._zero_copy = False
    inputs = random_inputs(12)
    assert session.set_input("x", inputs["x"]) is False
    out = np.zeros((X_SHAPE[0], Z_SHAPE[1]), np.float32)
    assert session.run({"z": inputs["z"]}, outputs={"y": out})["y"] is out
    np.testing.assert_allclose(out, reference(**inputs), rtol=1e-5, atol=1e-5)
    inputs["x"] *= -2  # copied: the session does not see this
    np.testing.assert_array_equal(session.run()["y"], out)
