"""PostgreSQL over TLS for the tests: a self-signed CA, a server certificate for 127.0.0.1, and a
front on 127.0.0.1 (port 0) that speaks PostgreSQL's TLS opening and passes the session on to
the throwaway server's UNIX socket (tests/pg.py: PostgreSQL does no TLS on a UNIX socket, and
the throwaway server listens on nothing else).

The front answers a client's SSLRequest with `S` and a TLS handshake with its certificate, as a
server with `ssl = on` does, and turns away a client that starts in plain text (as
`hostssl`-only pg_hba does). Clients — asyncpg, pg_dump — then see a real TLS server.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import ssl
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, *, issuer: x509.Certificate | None,
          issuer_key: ec.EllipticCurvePrivateKey | None) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(issuer.subject if issuer else name).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(hours=1))
               .not_valid_after(now + dt.timedelta(days=1)))
    if issuer is None:  # the CA
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), True)
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    else:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.public_key()), False)
    return builder.sign(issuer_key or key, hashes.SHA256())


@dataclass
class Certificates:
    ca: Path  # the CA's certificate: sslrootcert
    other_ca: Path  # a CA that signed nothing here: verification against it fails
    cert: Path
    key: Path


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, other_key, server_key = _key(), _key(), _key()
    ca = _cert("cluster-bot test CA", ca_key, issuer=None, issuer_key=None)
    other = _cert("another CA", other_key, issuer=None, issuer_key=None)
    server = _cert("127.0.0.1", server_key, issuer=ca, issuer_key=ca_key)
    paths = Certificates(ca=directory / "ca.pem", other_ca=directory / "other-ca.pem",
                         cert=directory / "server.pem", key=directory / "server.key")
    paths.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths.other_ca.write_bytes(other.public_bytes(serialization.Encoding.PEM))
    paths.cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(_pem(server_key))
    paths.key.chmod(0o600)
    return paths


@dataclass
class TlsFront:
    port: int
    sessions: list[str] = field(default_factory=list)  # "tls" or "plain", one per client


@contextlib.asynccontextmanager
async def tls_front(socket_path: Path, certs: Certificates) -> AsyncIterator[TlsFront]:
    """A TLS-only PostgreSQL front on 127.0.0.1 for the server at `socket_path`."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs.cert, certs.key)
    tasks: set[asyncio.Task[None]] = set()
    front = TlsFront(port=0)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                length, code = struct.unpack("!ii", await reader.readexactly(8))
                if length == 8 and code == GSSENC_REQUEST:
                    writer.write(b"N")  # no GSSAPI: the client asks for TLS next
                    await writer.drain()
                    continue
                break
            if length != 8 or code != SSL_REQUEST:
                front.sessions.append("plain")
                return  # TLS only, as hostssl: a plain-text start is turned away
            writer.write(b"S")
            await writer.drain()
            await writer.start_tls(context)
            front.sessions.append("tls")
            upstream_r, upstream_w = await asyncio.open_unix_connection(str(socket_path))
            try:
                await asyncio.gather(_pipe(reader, upstream_w), _pipe(upstream_r, writer))
            finally:
                upstream_w.close()
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
            pass  # a client that gave up (a failed verification) or went away
        finally:
            writer.close()

    def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(serve(reader, writer))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    front.port = server.sockets[0].getsockname()[1]
    try:
        yield front
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()  # one side hung up: so does the other (TLS has no half-close)
