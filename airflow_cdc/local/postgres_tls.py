"""A throwaway PostgreSQL that lets clients in over TCP only with TLS and a client certificate,
as production servers with ``hostssl ... cert`` rules do (tests of ``database.sslrootcert``,
``database.sslcert`` and ``database.sslkey``).

Its CA, server certificate and a client certificate for the ``postgres`` user (cert
authentication maps the certificate's common name to the user) come from
:mod:`airflow_cdc.local.tls`. The server reads its key as the ``postgres`` user and refuses one
that others may read, so key and certificate are copied into the data directory, owned by
``postgres``, mode 0600. Unix-socket connections stay trusted; the class's own connections
(readiness, ``create_database``) go over TCP with the client certificate, like the engine's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.local.tls import CertificateAuthority, Issued

PG_HBA = (
    "# written by airflow_cdc/local/postgres_tls.py: TCP only with TLS and a client certificate\n"
    "local   all         all              trust\n"
    "local   replication all              trust\n"
    "hostssl all         all 127.0.0.1/32 cert\n"
    "hostssl replication all 127.0.0.1/32 cert\n"
)


class PostgresTlsServer(PostgresServer):
    """``PostgresServer`` with ``ssl=on`` and ``hostssl ... cert`` rules; ``client_tls()``
    gives the engine's ``database.ssl*`` settings that get in."""

    kind = "pgtls"

    def __init__(self, tls_dir: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tls_dir = tls_dir
        authority = CertificateAuthority(tls_dir, "airflow-cdc test PostgreSQL CA")
        self.ca = authority.cert
        self.server_cert: Issued = authority.issue("postgres-server", hosts=["127.0.0.1", "localhost"])
        # The common name is the database user the certificate logs in as.
        self.client_cert: Issued = authority.issue("postgres", client=True)
        self.settings.update(
            {"ssl": "on", "ssl_cert_file": "server.crt", "ssl_key_file": "server.key", "ssl_ca_file": "root.crt"}
        )

    def client_tls(self) -> dict[str, str]:
        """The engine's settings (Debezium's names) that pass the ``cert`` rule."""
        return {
            "database.sslmode": "verify-full",
            "database.sslrootcert": str(self.ca),
            "database.sslcert": str(self.client_cert.cert),
            "database.sslkey": str(self.client_cert.key),
        }

    def dsn(self, dbname: str = "postgres", **params: Any) -> str:
        tls = {key.removeprefix("database."): value for key, value in self.client_tls().items()}
        return super().dsn(dbname, **{**tls, **params})

    def _initialize(self) -> None:
        super()._initialize()
        data = self.data_dir
        assert data is not None
        for source, name in (
            (self.server_cert.cert, "server.crt"),
            (self.server_cert.key, "server.key"),
            (self.ca, "root.crt"),
        ):
            target = data / name
            shutil.copyfile(source, target)
            target.chmod(0o600)
            if os.geteuid() == 0:
                shutil.chown(target, "postgres", "postgres")
        (data / "pg_hba.conf").write_text(PG_HBA)
