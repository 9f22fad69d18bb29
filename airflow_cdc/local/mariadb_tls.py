"""A throwaway MariaDB that serves TLS with a certificate from a throwaway CA, for tests of
``database.ssl.*``: users created ``REQUIRE X509`` must present a client certificate it signed.

``client_tls()`` gives the engine's settings (Debezium's names) for such a user: the CA as the
truststore and, as the keystore, one PEM file with the client's key and certificate. Connections
of the class itself (root: ``create_database``, readiness) need no certificate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.tls import CertificateAuthority


class MariaDBTlsServer(MariaDBServer):
    kind = "mariadbtls"

    def __init__(self, tls_dir: Path, **kwargs: Any) -> None:
        authority = CertificateAuthority(tls_dir, "airflow-cdc test MariaDB CA")
        server = authority.issue("mariadb-server", hosts=["127.0.0.1", "localhost"])
        client = authority.issue("cdc-client", client=True)
        self.ca = authority.cert
        self.keystore = tls_dir / "cdc-client.keystore.pem"
        self.keystore.write_bytes(client.key.read_bytes() + client.cert.read_bytes())
        self.keystore.chmod(0o600)
        tls = [f"--ssl-ca={authority.cert}", f"--ssl-cert={server.cert}", f"--ssl-key={server.key}"]
        super().__init__(extra_args=[*tls, *kwargs.pop("extra_args", [])], **kwargs)

    def client_tls(self) -> dict[str, str]:
        return {
            "database.ssl.mode": "verify_identity",
            "database.ssl.truststore": str(self.ca),
            "database.ssl.keystore": str(self.keystore),
        }
