"""``--web.config.file``: TLS and basic auth, in Prometheus exporter-toolkit's format.

The keys and their meaning are the toolkit's (``web/tls_config.go``, ``web-configuration.md``):
``tls_server_config`` (``cert_file``, ``key_file``, ``client_auth_type``, ``client_ca_file``,
``min_version``, ``max_version``), ``http_server_config`` (``http2``, ``headers``) and
``basic_auth_users`` (bcrypt hashes). Relative file names are read from the config file's
folder, unknown keys are refused (the toolkit reads strictly), and so are the toolkit keys this
server cannot honour, each with the reason, rather than ignored. Every issue is reported with
its line, as the rules file's are. This module only reads the file; ``service.web_guard``
builds the TLS context and checks passwords.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from metricbridge.config.yaml_nodes import Issues, boolean, compose, mapping, string
from metricbridge.errors import ConfigError, ConfigIssue

# client_auth_type values this server honours. The toolkit's RequestClientCert and
# RequireAnyClientCert ask for a certificate without verifying it, which Python's ssl module
# cannot do (it verifies every certificate it asks for); the toolkit calls them insecure.
CLIENT_AUTH_TYPES = ("NoClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert")
_UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")
TLS_VERSIONS = ("TLS10", "TLS11", "TLS12", "TLS13")  # in order
# The response headers the toolkit lets a config set, with their allowed values (None: any).
HEADERS: Mapping[str, tuple[str, ...] | None] = {
    "Strict-Transport-Security": None,
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": None,
    "Content-Security-Policy": None,
}
# A bcrypt hash in the modular crypt format: $2a$, $2b$ or $2y$, a cost of 04 to 31, then
# 22 characters of salt and 31 of hash. Checked at load, as the toolkit's bcrypt.Cost does.
BCRYPT_HASH = re.compile(r"\$2[aby]\$(?:0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
MAX_BYTES = 1 << 20  # a web config is a few lines; the toolkit reads it on every request

_TLS_FILES = ("cert_file", "key_file", "client_ca_file")
_TLS_KEYS = frozenset(
    {*_TLS_FILES, "client_auth_type", "client_ca", "min_version", "max_version"}
    | {"prefer_server_cipher_suites"}
)
_NOT_SUPPORTED = {
    "tls_server_config.cert": "an inline certificate cannot be loaded by Python's ssl module; "
    "use cert_file",
    "tls_server_config.key": "an inline key cannot be loaded by Python's ssl module; use key_file",
    "tls_server_config.cipher_suites": "Go's cipher suite names have no equivalent here; "
    "the defaults of the ssl module are used",
    "tls_server_config.curve_preferences": "not available in Python's ssl module",
    "tls_server_config.client_allowed_sans": "not implemented by metricbridge",
    "rate_limit": "not implemented by metricbridge (--web.max-connections bounds clients)",
}


@dataclass(frozen=True, slots=True)
class TLSServerConfig:
    """``tls_server_config``: the certificate, and how clients are authenticated."""

    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    client_ca: str | None = None  # PEM text, as the toolkit's inline client_ca
    min_version: str = "TLS12"
    max_version: str = "TLS13"
    prefer_server_cipher_suites: bool = True

    @property
    def files(self) -> tuple[Path, ...]:
        """The files this reads: watched for changes, as the toolkit re-reads them."""
        return (self.cert_file, self.key_file, *filter(None, (self.client_ca_file,)))


@dataclass(frozen=True, slots=True)
class WebConfig:
    """A web config file as read; an empty file is plain HTTP without authentication."""

    source: str
    tls: TLSServerConfig | None = None
    users: Mapping[str, str] = field(default_factory=dict)  # name -> bcrypt hash
    headers: Mapping[str, str] = field(default_factory=dict)
    http2: bool = True  # accepted for the toolkit's sake: this server speaks HTTP/1.1 only
    lines: Mapping[str, int] = field(default_factory=dict)  # key path -> line, for later issues

    def issue(self, path: str, message: str) -> ConfigIssue:
        """An issue found after reading (a certificate that cannot be loaded) at its key's line."""
        return ConfigIssue(self.source, self.lines.get(path), path, message)


def load_web_config(path: Path) -> WebConfig:
    """Read ``path``; raise ``ConfigError`` with every issue found."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError([ConfigIssue(str(path), None, "", f"cannot read: {reason}")]) from exc
    if len(data) > MAX_BYTES:
        message = f"more than {MAX_BYTES} bytes; a web config is a few lines"
        raise ConfigError([ConfigIssue(str(path), None, "", message)])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError([ConfigIssue(str(path), line, "", "cannot read: not UTF-8")]) from exc
    return parse_web_config(text, str(path), path.parent)


def parse_web_config(text: str, source: str, directory: Path) -> WebConfig:
    """Read a web config's text; relative file names are taken from ``directory``."""
    issues = Issues(source)
    lines: dict[str, int] = {}
    root = compose(text, issues)
    config = WebConfig(source, lines=lines)
    if root is not None and not (isinstance(root, yaml.ScalarNode) and root.value == ""):
        allowed = {"tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"}
        top = mapping(root, "", issues, allowed)
        _refuse_unsupported(top, "", issues)
        tls = None
        if "tls_server_config" in top:
            tls = _tls(top["tls_server_config"], issues, directory, lines)
        users = _users(top["basic_auth_users"], issues) if "basic_auth_users" in top else {}
        http2, headers = _http_server(top, issues)
        config = WebConfig(source, tls, users, headers, http2, lines)
    if issues.items:
        raise ConfigError(sorted(issues.items, key=lambda issue: issue.line or 0))
    return config


Entries = dict[str, tuple[yaml.Node, yaml.Node]]


def _refuse_unsupported(entries: Entries, prefix: str, issues: Issues) -> None:
    for key, (key_node, _) in entries.items():
        path = f"{prefix}{key}"
        if path in _NOT_SUPPORTED:
            issues.add(key_node, path, f"not supported: {_NOT_SUPPORTED[path]}")


def _text(entries: Entries, key: str, path: str, issues: Issues) -> str | None:
    """A string value; an empty one or null counts as unset, as Go's zero value does."""
    if key not in entries:
        return None
    node = entries[key][1]
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
        return None
    value = string(node, f"{path}.{key}", issues)
    return value or None


def _tls(
    node: tuple[yaml.Node, yaml.Node], issues: Issues, directory: Path, lines: dict[str, int]
) -> TLSServerConfig | None:
    key_node, value_node = node
    path = "tls_server_config"
    lines[path] = key_node.start_mark.line + 1
    entries = mapping(value_node, path, issues, {*_TLS_KEYS, *_unsupported_keys()})
    _refuse_unsupported(entries, f"{path}.", issues)
    for key, (entry_key, _) in entries.items():
        lines[f"{path}.{key}"] = entry_key.start_mark.line + 1
    text = {
        key: _text(entries, key, path, issues)
        for key in _TLS_KEYS - {"prefer_server_cipher_suites"}
    }
    if not any(text[key] for key in (*_TLS_FILES, "client_auth_type", "client_ca")):
        return None  # present but empty: no TLS, as the toolkit's IsEnabled says
    for required in ("cert_file", "key_file"):
        if text[required] is None:
            issues.add(key_node, path, f"{required} is required when TLS is configured")
    auth = _client_auth(entries, text["client_auth_type"], key_node, issues)
    has_ca = text["client_ca_file"] is not None or text["client_ca"] is not None
    if has_ca and auth == "NoClientCert":
        issues.add(key_node, path, "a client CA is configured without a client_auth_type")
    versions = [
        _version(entries, key, text[key], default, issues)
        for key, default in (("min_version", "TLS12"), ("max_version", "TLS13"))
    ]
    if TLS_VERSIONS.index(versions[0]) > TLS_VERSIONS.index(versions[1]):
        issues.add(key_node, path, f"min_version {versions[0]} is above max_version {versions[1]}")
    prefer = True
    if "prefer_server_cipher_suites" in entries:
        read = boolean(
            entries["prefer_server_cipher_suites"][1], f"{path}.prefer_server_cipher_suites", issues
        )
        prefer = True if read is None else read
    if text["cert_file"] is None or text["key_file"] is None:
        return None
    return TLSServerConfig(
        cert_file=directory / text["cert_file"],
        key_file=directory / text["key_file"],
        client_auth_type=auth,
        client_ca_file=directory / text["client_ca_file"] if text["client_ca_file"] else None,
        client_ca=text["client_ca"],
        min_version=versions[0],
        max_version=versions[1],
        prefer_server_cipher_suites=prefer,
    )


def _client_auth(entries: Entries, value: str | None, tls_node: yaml.Node, issues: Issues) -> str:
    """``client_auth_type``: one this server can honour, else an issue."""
    path = "tls_server_config"
    auth = value or "NoClientCert"
    where = entries.get("client_auth_type", (tls_node,))[0]
    if auth in _UNVERIFIED_CLIENT_AUTH:
        issues.add(
            where,
            f"{path}.client_auth_type",
            f"{auth} is not supported: Python's ssl module verifies every client certificate it "
            "asks for; use VerifyClientCertIfGiven or RequireAndVerifyClientCert",
        )
    elif auth not in CLIENT_AUTH_TYPES:
        issues.add(
            where,
            f"{path}.client_auth_type",
            f"unknown value {auth!r} (one of {', '.join(CLIENT_AUTH_TYPES)})",
        )
    return auth


def _unsupported_keys() -> set[str]:
    """The toolkit's tls_server_config keys that are known, and refused with their reason."""
    prefix = "tls_server_config."
    return {key.removeprefix(prefix) for key in _NOT_SUPPORTED if key.startswith(prefix)}


def _version(entries: Entries, key: str, value: str | None, default: str, issues: Issues) -> str:
    if value is None:
        return default
    if value not in TLS_VERSIONS:
        node = entries[key][1]
        issues.add(
            node,
            f"tls_server_config.{key}",
            f"unknown TLS version {value!r} (one of {', '.join(TLS_VERSIONS)})",
        )
        return default
    return value


def _users(node: tuple[yaml.Node, yaml.Node], issues: Issues) -> dict[str, str]:
    users: dict[str, str] = {}
    for name, (key_node, value_node) in mapping(node[1], "basic_auth_users", issues).items():
        path = f"basic_auth_users.{name}"
        if ":" in name:
            issues.add(key_node, path, "a user name cannot contain ':' (basic auth splits there)")
            continue
        hashed = string(value_node, path, issues)
        if hashed is None:
            continue
        if not BCRYPT_HASH.fullmatch(hashed):
            issues.add(
                value_node,
                path,
                "not a bcrypt hash ($2y$10$ and 53 characters: htpasswd -nBC 10 '' | tr -d ':\\n')",
            )
            continue
        users[name] = hashed
    return users


def _http_server(top: Entries, issues: Issues) -> tuple[bool, dict[str, str]]:
    """``http_server_config``: whether HTTP/2 is asked for, and the extra response headers."""
    if "http_server_config" not in top:
        return True, {}
    path = "http_server_config"
    entries = mapping(top[path][1], path, issues, {"http2", "headers"})
    http2 = True
    if "http2" in entries:
        read = boolean(entries["http2"][1], f"{path}.http2", issues)
        http2 = True if read is None else read
    headers: dict[str, str] = {}
    if "headers" in entries:
        allowed_names = set(HEADERS)
        found = mapping(entries["headers"][1], f"{path}.headers", issues, allowed_names)
        for name, (_, value_node) in found.items():
            value = string(value_node, f"{path}.headers.{name}", issues)
            allowed = HEADERS[name]
            if value is None:
                continue
            if allowed is not None and value and value not in allowed:
                issues.add(
                    value_node,
                    f"{path}.headers.{name}",
                    f"invalid value {value!r} (one of {', '.join(allowed)})",
                )
            elif value:  # blank: unset, as the toolkit's documentation says
                headers[name] = value
    return http2, headers
