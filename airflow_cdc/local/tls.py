"""A private certificate authority for the local services' TLS (tests, benchmarks, the Docker
stack): a CA, and server and client certificates it signs, as PEM files in a directory
(``cryptography``: ``pip install airflow-cdc[tls]``).

``CertificateAuthority(dir).issue("server", hosts=["127.0.0.1", "localhost"])`` writes
``server.crt`` and ``server.key`` beside ``ca.crt``; ``.java_keystores(...)`` gives what a JVM
service (Kafka) reads. From a shell (docker/compose.yaml's ``engine-certs``)::

    python -m airflow_cdc.local.tls --dir /certs --server engine --days 365

writes ``ca.crt``, ``engine.crt`` and ``engine.key`` once (a directory that has them is left
alone). A production deployment takes its certificates from its own CA (cert-manager, a
corporate PKI) instead.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "airflow-cdc test CA", *, days: int = 2) -> None:
        self.directory = directory
        self.days = days
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )  # keyCertSign, cRLSign
            .sign(self._key, hashes.SHA256())
        )
        self.cert = directory / "ca.crt"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, hosts: list[str] | None = None, *, client: bool = False) -> Issued:
        """A certificate for ``name`` (its common name), valid for ``hosts`` (IPs or names) as a
        server, or as a client with ``client``."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=max(1, self.days - 1)))
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]),
                critical=False,
            )
        )
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        issued = Issued(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        issued.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        issued.key.chmod(0o600)
        return issued

    def java_keystores(self, issued: Issued, password: str) -> tuple[Path, Path]:
        """``(keystore, truststore)`` in PKCS12 for a JVM service: its key and certificate, and
        this CA (``keytool``, from the JDK)."""
        from cryptography.hazmat.primitives.serialization import pkcs12

        key = serialization.load_pem_private_key(issued.key.read_bytes(), None)
        cert = x509.load_pem_x509_certificate(issued.cert.read_bytes())
        keystore = issued.cert.with_suffix(".keystore.p12")
        keystore.write_bytes(
            pkcs12.serialize_key_and_certificates(
                issued.cert.stem.encode(),
                key,  # type: ignore[arg-type]
                cert,
                [self._cert],
                serialization.BestAvailableEncryption(password.encode()),
            )
        )
        truststore = self.directory / "truststore.p12"
        if not truststore.exists():
            subprocess.run(
                ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(self.cert), "-keystore",
                 str(truststore), "-storetype", "PKCS12", "-storepass", password],
                check=True,
                capture_output=True,
            )  # fmt: skip
        return keystore, truststore


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m airflow_cdc.local.tls", description="A private CA and a server certificate it signs."
    )
    parser.add_argument("--dir", type=Path, required=True, help="where ca.crt, <server>.crt and <server>.key go")
    parser.add_argument("--server", required=True, help="the server's name (the certificate's common name)")
    parser.add_argument("--host", action="append", default=[], help="a name or IP it is reached by (repeatable)")
    parser.add_argument("--days", type=int, default=365, help="how long the certificates are valid")
    args = parser.parse_args(argv)
    if (args.dir / "ca.crt").exists() and (args.dir / f"{args.server}.key").exists():
        print(f"{args.dir}: certificates already there, left alone")
        return 0
    ca = CertificateAuthority(args.dir, "airflow-cdc private CA", days=args.days)
    issued = ca.issue(args.server, [args.server, *args.host])
    print(f"{ca.cert}, {issued.cert}, {issued.key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
