"""mcptax.outbound.transport against real HTTP servers on loopback: a refused request never reaches
the server, and the connection goes to the address that was checked, never to a second answer."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import anyio
import httpx
import httpx2
import pytest

from mcptax.outbound import AsyncPinnedTransport, OutboundPolicy, OutboundRefused, PinnedTransport
from tests.helpers import CONNECT_BUDGET, Receiver


def _get_sync(policy: OutboundPolicy, url: str) -> int:
    with httpx.Client(transport=PinnedTransport(policy)) as client:
        return client.get(url).status_code


def _get_async(policy: OutboundPolicy, url: str) -> int:
    async def main() -> int:
        async with httpx2.AsyncClient(transport=AsyncPinnedTransport(policy)) as client:
            return (await client.get(url)).status_code

    return anyio.run(main)


FLAVOURS = [pytest.param(_get_sync, id="httpx"), pytest.param(_get_async, id="httpx2")]


@pytest.mark.parametrize("get", FLAVOURS)
def test_a_refused_address_receives_no_request(get) -> None:
    with Receiver() as server:
        for url in [f"http://127.0.0.1:{server.port}/", f"http://localhost:{server.port}/"]:
            with pytest.raises(OutboundRefused, match="loopback"):
                get(OutboundPolicy(), url)
        assert server.requests == []
        # The same server, once its network is allowed: the refusal above was the policy's doing.
        assert get(OutboundPolicy.from_entries(["127.0.0.0/8"]), f"http://localhost:{server.port}/") == 200
        assert len(server.requests) == 1


@contextlib.contextmanager
def _two_servers_on_one_port() -> Iterator[tuple[Receiver, Receiver]]:
    # 127.0.0.2 stands for the public address a name first resolves to, 127.0.0.1 for the inward
    # one a rebinding resolver answers next; both listen on the same port, as one name would.
    for _ in range(20):
        with Receiver(host="127.0.0.2") as public:
            try:
                inward = Receiver(host="127.0.0.1", port=public.port)
            except OSError:
                continue  # that port is taken on 127.0.0.1; try another
            with inward:
                yield public, inward
            return
    pytest.fail("no port free on both 127.0.0.1 and 127.0.0.2")


@pytest.mark.parametrize("get", FLAVOURS)
def test_a_rebinding_name_is_connected_to_the_address_that_was_checked(get) -> None:
    answers = iter([["127.0.0.2"], ["127.0.0.1"], ["127.0.0.1"]])
    asked: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        asked.append(host)
        return next(answers)

    policy = OutboundPolicy.from_entries(["127.0.0.2/32"], resolver=rebinding)
    with _two_servers_on_one_port() as (public, inward):
        assert get(policy, f"http://docs.rebind.test:{public.port}/page") == 200
        assert asked == ["docs.rebind.test"]  # resolved once
        assert [r["path"] for r in public.requests] == ["/page"]  # the server on 127.0.0.2
        assert public.requests[0]["headers"]["Host"] == f"docs.rebind.test:{public.port}"
        assert inward.requests == []
        # A new connection resolves again, and the inward answer is refused, not connected to.
        with pytest.raises(OutboundRefused, match="docs.rebind.test resolves to 127.0.0.1"):
            get(policy, f"http://docs.rebind.test:{public.port}/page")
        assert inward.requests == []


def test_a_name_that_does_not_resolve_is_a_connection_error() -> None:
    def nowhere(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    with pytest.raises(httpx.ConnectError, match="cannot resolve mcp.example.invalid"):
        _get_sync(OutboundPolicy(resolver=nowhere), "http://mcp.example.invalid/")
    with pytest.raises(httpx2.ConnectError, match="cannot resolve mcp.example.invalid"):
        _get_async(OutboundPolicy(resolver=nowhere), "http://mcp.example.invalid/")


def _certificate_for(name: str, directory) -> tuple[str, str]:
    """A self-signed certificate for ``name`` (and its key), as PEM files in ``directory``."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(cert_path), str(key_path)


def test_tls_names_the_host_and_verifies_its_certificate_while_connecting_to_the_checked_address(tmp_path):
    import ssl

    cert, key = _certificate_for("docs.pinned.test", tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    seen_names: list[str | None] = []
    server_context.sni_callback = lambda sock, name, ctx: seen_names.append(name)
    trust = ssl.create_default_context(cafile=cert)
    policy = OutboundPolicy.from_entries(["127.0.0.1/32"], resolver=lambda host, port: ["127.0.0.1"])
    with Receiver() as server:
        server.server.socket = server_context.wrap_socket(server.server.socket, server_side=True)
        # The receiver shakes hands in its accepting thread: on a loaded machine httpx's default
        # 5 s can run out before it gets there (seen once in CI). Not a test of timeouts.
        with httpx.Client(transport=PinnedTransport(policy, verify=trust), timeout=CONNECT_BUDGET) as client:
            assert client.get(f"https://docs.pinned.test:{server.port}/doc").status_code == 200
            # The same address under another name: the certificate does not match, so no request.
            with pytest.raises(httpx.ConnectError, match="certificate verify failed|match"):
                client.get(f"https://other.pinned.test:{server.port}/doc")
    assert seen_names == ["docs.pinned.test", "other.pinned.test"]
    assert [r["headers"]["Host"] for r in server.requests] == [f"docs.pinned.test:{server.port}"]


@pytest.fixture
def ca_loads(monkeypatch) -> list[object]:
    """Every CA bundle any SSL context loads from now on (the costly part of building one), with
    the transports' shared contexts forgotten so this test sees them built."""
    import ssl

    from mcptax.outbound import transport

    def forget() -> None:
        for name in ("_default_tls", "_default_tls_async"):
            if hasattr(transport, name):
                getattr(transport, name).cache_clear()

    forget()
    loads: list[object] = []
    real = ssl.SSLContext.load_verify_locations

    def counting(self, *args, **kwargs):
        loads.append(args or kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    yield loads
    forget()


@pytest.mark.parametrize("get", FLAVOURS)
def test_plain_http_builds_no_tls_context(get, ca_loads) -> None:
    policy = OutboundPolicy.from_entries(["127.0.0.1/32"])
    with Receiver() as server:
        for _ in range(3):
            assert get(policy, f"http://127.0.0.1:{server.port}/") == 200
    assert ca_loads == []


@pytest.mark.parametrize(
    ("transport_class", "core"), [(PinnedTransport, "httpcore"), (AsyncPinnedTransport, "httpcore2")]
)
def test_https_transports_share_one_tls_context_per_process(transport_class, core, ca_loads) -> None:
    import importlib

    origin = importlib.import_module(core).Origin(b"https", b"tls.pinned.test", 443)
    policy = OutboundPolicy.from_entries(["127.0.0.1/32"])
    contexts = set()
    for _ in range(4):
        pool = transport_class(policy)._pool
        pool.create_connection(origin)  # builds the connection object; nothing is sent
        contexts.add(id(pool._ssl_context))
    assert len(ca_loads) == 1
    assert len(contexts) == 1
