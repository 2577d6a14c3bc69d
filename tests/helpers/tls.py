"""Throwaway certificates made at test time (trustme), and web config files that use them.

No key is ever committed: each test makes its own CA, and writes the server's certificate and
key next to its web config, in its own ``tmp_path``.
"""

from __future__ import annotations

import base64
import ssl
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import trustme

# Cost 4, bcrypt's lowest: the tests check what is compared, not how slowly.
PASSWORD = "s3cret pass"  # noqa: S105 - a test password, hashed at test time
USER = "prometheus"


def basic_auth_header(user: str, password: str) -> str:
    """An ``Authorization`` value (aiohttp's encode_basic_auth is newer than its lowest version)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def bcrypt_hash(password: str, cost: int = 4) -> str:
    """A bcrypt hash of ``password`` in the form htpasswd writes ($2y$)."""
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(cost)).decode()
    return "$2y$" + hashed.removeprefix("$2b$")


@dataclass
class Certificates:
    """A CA and a server certificate for 127.0.0.1 and localhost, written under ``folder``."""

    folder: Path
    ca: trustme.CA

    @classmethod
    def make(cls, folder: Path) -> Certificates:
        """A new CA, with its server certificate written as cert.pem and key.pem."""
        certificates = cls(folder, trustme.CA())
        certificates.issue()
        return certificates

    def issue(self) -> None:
        """(Re)write cert.pem and key.pem: a server certificate this CA signs."""
        server = self.ca.issue_cert("127.0.0.1", "localhost")
        server.cert_chain_pems[0].write_to_path(str(self.folder / "cert.pem"))
        server.private_key_pem.write_to_path(str(self.folder / "key.pem"))

    def write_ca(self, name: str = "ca.pem") -> Path:
        """The CA's certificate, as a client (Prometheus' ca_file) or client_ca_file reads it."""
        path = self.folder / name
        self.ca.cert_pem.write_to_path(str(path))
        return path

    def client_context(self, *, client_cert: trustme.CA | None = None) -> ssl.SSLContext:
        """A client trusting this CA, with a certificate of ``client_cert``'s if given."""
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        if client_cert is not None:
            client_cert.issue_cert("client@example.test").configure_cert(context)
        return context
