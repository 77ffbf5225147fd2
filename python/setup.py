"""Builds the kiln package from the repository (pyproject.toml has the static metadata).

- Generates kiln/v1 (protobuf and gRPC stubs) from ../proto with grpcio-tools
  (gen_stubs.py, as the CMake build does).
- Takes its version from the CMake project and requires grpcio and protobuf at
  least as new as the stubs it generated need.
- With KILN_RUNTIME_LIBRARY=/path/to/libkiln_runtime.so set, bundles that
  library in kiln/lib/ (it links only libc and libstdc++), making a
  py3-none-<platform> wheel; without it, a pure-Python wheel that finds the
  runtime at run time (kiln.runtime.library_path()).
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gen_stubs  # noqa: E402  (beside this file)

# What an sdist carries of the repository, under this folder.
SDIST_REPO = "_repo"


def source_root() -> Path:
    """The Kiln repository (this folder's parent), or the part of it an sdist carries."""
    for root in (HERE.parent, HERE / SDIST_REPO):
        if (root / "proto" / "kiln" / "v1").is_dir() and (root / "CMakeLists.txt").is_file():
            return root
    sys.exit(f"kiln: no proto/kiln/v1 beside {HERE}: build from the Kiln repository (pip install ./python)")


def project_version() -> str:
    cmake = (source_root() / "CMakeLists.txt").read_text()
    match = re.search(r"project\(\s*kiln\s+VERSION\s+([0-9.]+)", cmake)
    if not match:
        sys.exit("kiln: no `project(kiln VERSION ...)` in CMakeLists.txt")
    return match.group(1)


def dependencies() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        gen_stubs.generate(source_root() / "proto", Path(tmp))
        protobuf, grpcio = gen_stubs.required_runtime_versions(Path(tmp) / "kiln" / "v1")
    return [f"grpcio>={grpcio}", f"protobuf>={protobuf}", "numpy>=1.21"]


def runtime_library() -> Path | None:
    path = os.environ.get("KILN_RUNTIME_LIBRARY")
    return Path(path).resolve() if path else None


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        package = Path(self.build_lib) / "kiln"
        gen_stubs.generate(source_root() / "proto", Path(self.build_lib))
        (package / "_version.py").write_text(f'__version__ = "{project_version()}"\n')
        lib_dir = package / "lib"
        shutil.rmtree(lib_dir, ignore_errors=True)  # nothing left from an earlier build in the same folder
        library = runtime_library()
        if library is not None:
            lib_dir.mkdir()
            shutil.copy2(library, lib_dir / "libkiln_runtime.so")


class BdistWheel(bdist_wheel):
    def get_tag(self) -> tuple[str, str, str]:
        python, abi, platform = super().get_tag()
        # A bundled runtime ties the wheel to a platform, not to a Python version (ctypes, no extension).
        return ("py3", "none", platform) if runtime_library() is not None else (python, abi, platform)


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        root, repo = source_root(), Path(base_dir) / SDIST_REPO
        shutil.copytree(root / "proto" / "kiln" / "v1", repo / "proto" / "kiln" / "v1",
                        ignore=shutil.ignore_patterns("*.h"))
        shutil.copy2(root / "CMakeLists.txt", repo / "CMakeLists.txt")


class KilnDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return runtime_library() is not None  # a bundled .so makes the wheel platform-specific


setup(version=project_version(), install_requires=dependencies(), distclass=KilnDistribution,
      cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel, "sdist": Sdist})
