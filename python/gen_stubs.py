"""Generates the kiln.v1 protobuf and gRPC stubs from proto/kiln/v1/*.proto.

The proto package `kiln.v1` (files imported as "kiln/v1/x.proto") becomes the
Python package `kiln.v1`: generated with `-I <proto dir>` into the folder that
holds the `kiln` package, the stubs' own imports (`from kiln.v1 import
graph_pb2`) resolve without path tricks. Used by CMake and by setup.py.

    python gen_stubs.py PROTO_DIR OUT_DIR   # writes OUT_DIR/kiln/v1/*_pb2*.py
"""
from __future__ import annotations

import re
import sys
from pathlib import Path


def generate(proto_dir: Path, out_dir: Path) -> list[Path]:
    """Runs grpc_tools.protoc over every proto_dir/kiln/v1/*.proto; returns the files written."""
    from grpc_tools import protoc  # a build-time dependency only

    protos = sorted((proto_dir / "kiln" / "v1").glob("*.proto"))
    if not protos:
        raise RuntimeError(f"no .proto files under {proto_dir / 'kiln' / 'v1'}")
    out_dir.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf/*.proto
    args = ["grpc_tools.protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out_dir}",
            f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}", *map(str, protos)]
    if protoc.main(args) != 0:
        raise RuntimeError(f"grpc_tools.protoc failed on {proto_dir}")
    v1 = out_dir / "kiln" / "v1"
    init = v1 / "__init__.py"
    if not init.exists():
        init.write_text('"""Stubs generated from proto/kiln/v1 (the wire API)."""\n')
    return sorted(v1.glob("*_pb2*.py*"))


def required_runtime_versions(generated: Path) -> tuple[str, str]:
    """The (protobuf, grpcio) versions the stubs in `generated` (a kiln/v1 folder) need at least."""
    pb = re.search(r"Protobuf Python Version: ([0-9.]+)", (generated / "compile_pb2.py").read_text())
    grpc = re.search(r"GRPC_GENERATED_VERSION = '([0-9.]+)'", (generated / "compile_pb2_grpc.py").read_text())
    return (pb.group(1) if pb else "4.21"), (grpc.group(1) if grpc else "1.50")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    generate(Path(sys.argv[1]), Path(sys.argv[2]))
