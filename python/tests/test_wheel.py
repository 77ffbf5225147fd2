"""The pip build: `pip wheel ./python` with KILN_RUNTIME_LIBRARY set makes a wheel
with the generated stubs and the runtime bundled, which works once installed
(offline: --no-build-isolation, the test venv has setuptools and grpcio-tools)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

SOURCE = Path(os.environ.get("KILN_SOURCE_DIR", Path(__file__).resolve().parents[2]))


def run(cmd: list[str], **kwargs: object) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)  # type: ignore[arg-type]
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_wheel_bundles_stubs_and_runtime(tmp_path: Path, package_path: Path) -> None:
    # A copy of what the build reads, so that setuptools' build/ and egg-info
    # land in tmp_path, not in the source tree.
    repo = tmp_path / "repo"
    shutil.copytree(SOURCE / "python", repo / "python",
                    ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    shutil.copytree(SOURCE / "proto" / "kiln", repo / "proto" / "kiln")
    shutil.copy2(SOURCE / "CMakeLists.txt", repo / "CMakeLists.txt")

    library = os.environ["KILN_RUNTIME_LIBRARY"]
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index", "-q",
         "-w", str(dist), str(repo / "python")], env={**os.environ, "KILN_RUNTIME_LIBRARY": library})
    wheels = list(dist.glob("kiln-*.whl"))
    assert len(wheels) == 1, wheels
    assert wheels[0].name.startswith("kiln-") and "-py3-none-linux_" in wheels[0].name, wheels[0].name
    with zipfile.ZipFile(wheels[0]) as z:
        names = set(z.namelist())
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for expected in ("kiln/__init__.py", "kiln/runtime.py", "kiln/client.py", "kiln/_version.py",
                     "kiln/v1/__init__.py", "kiln/v1/compile_pb2.py", "kiln/v1/compile_pb2_grpc.py",
                     "kiln/v1/lookup_pb2_grpc.py", "kiln/lib/libkiln_runtime.so"):
        assert expected in names, f"{expected} not in {wheels[0].name}"
    assert "_build_tree" not in " ".join(names)
    for requirement in ("Requires-Dist: grpcio>=", "Requires-Dist: protobuf>=", "Requires-Dist: numpy"):
        assert requirement in metadata, metadata

    # Installed elsewhere and imported without KILN_RUNTIME_LIBRARY: it finds
    # its own copy of the runtime and runs a package.
    site = tmp_path / "site"
    run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site),
         str(wheels[0])])
    env = {k: v for k, v in os.environ.items() if k not in ("KILN_RUNTIME_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    script = (
        "import sys, numpy as np, kiln, kiln.client, kiln.runtime as rt\n"
        "print(kiln.__file__); print(rt.library_path())\n"
        "s = rt.Session(rt.Package.load(sys.argv[1]))\n"
        "print(s.run({t.name: np.ones(t.shape, t.dtype) for t in s.inputs})['y'].shape)\n")
    lines = run([sys.executable, "-c", script, str(package_path)], env=env, cwd=tmp_path).split("\n")
    assert lines[0].startswith(str(site)), lines
    assert lines[1].startswith(str(site / "kiln" / "lib")), lines
    assert lines[2] == "(4, 16)", lines
