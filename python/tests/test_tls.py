"""kiln.Client against a kiln-server that serves TLS and checks credentials
(certificates made by OpenSSL here): a token with the client role compiles and
fetches; none, or one with another role, is a KilnError saying so; a token is
never sent without TLS."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from conftest import X_SHAPE, Z_SHAPE, Farm
from kiln import KilnError, StatusCode
from kiln.client import Client

SHAPES = {"x": list(X_SHAPE), "z": list(Z_SHAPE)}
EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(work: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=work, check=True, capture_output=True)


def _line(roles: str, identity: str, token: str) -> str:
    return f"{roles} {identity} sha256:{hashlib.sha256(token.encode()).hexdigest()}\n"


@pytest.fixture(scope="module")
def tls_farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    work = tmp_path_factory.mktemp("tls")
    (work / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl(work, "req", "-x509", *EC, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test-ca")
    _openssl(work, "req", *EC, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=kiln-server")
    _openssl(work, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "2", "-extfile", "san.ext")
    (work / "auth").write_text(_line("client", "notebook", "c-token") + _line("worker", "w", "w-token"))
    (work / "worker.token").write_text("w-token\n")
    farm = Farm(work,
                server_args=["--tls-cert", str(work / "server.pem"), "--tls-key", str(work / "server.key"),
                             "--auth-file", str(work / "auth")],
                worker_args=["--tls-ca", str(work / "ca.pem"), "--token-file", str(work / "worker.token")])
    try:
        farm.start()
        yield farm
    finally:
        farm.stop()


def test_a_client_token_compiles_over_tls(tls_farm: Farm, model_bytes: bytes) -> None:
    ca = str(tls_farm.work / "ca.pem")
    with Client(tls_farm.address, tls_ca=ca, token="c-token") as client:
        result = client.compile(model_bytes, shapes=SHAPES, trials=1)
        assert result.trials_measured > 0, tls_farm.logs()
        data = client.fetch(result.package_digest)
        assert "sha256:" + hashlib.sha256(data).hexdigest() == result.package_digest


def test_no_token_or_the_wrong_role_is_refused(tls_farm: Farm, model_bytes: bytes) -> None:
    ca = str(tls_farm.work / "ca.pem")
    with Client(tls_farm.address, tls_ca=ca) as anonymous:
        with pytest.raises(KilnError) as e:
            anonymous.lookup(model_bytes, shapes=SHAPES)
        assert e.value.code == StatusCode.UNAUTHENTICATED, e.value
    with Client(tls_farm.address, tls_ca=ca, token="w-token") as worker:
        with pytest.raises(KilnError) as e:
            worker.lookup(model_bytes, shapes=SHAPES)
        assert e.value.code == StatusCode.PERMISSION_DENIED, e.value
        assert "this call needs client" in str(e.value)


def test_a_token_is_never_sent_in_plaintext(tls_farm: Farm) -> None:
    with pytest.raises(KilnError) as e:
        Client(tls_farm.address, token="c-token")
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    # Plaintext to the TLS port does not connect.
    with pytest.raises(KilnError) as e:
        Client(tls_farm.address, connect_timeout=2)
    assert e.value.code == StatusCode.UNAVAILABLE
