"""What ``--web.config.file`` puts in front of every request: TLS, basic auth, extra headers.

The semantics are exporter-toolkit's (``web/tls_config.go``, ``web/handler.go``):

- Every path is behind basic auth when users are configured, the probes and unknown paths
  included; a missing or wrong password gets 401 with ``WWW-Authenticate: Basic``.
- A bcrypt comparison costs tens of milliseconds of CPU: it runs off the event loop, one at a
  time, and its verdict is remembered for that user, hash and password (at most 100 of them, by
  digest, never the password itself), so Prometheus' scrapes do not pay it again. An unknown
  user is compared against a configured hash all the same, so timing does not tell users apart.
- The file, and the certificate, key and CA files it names, are read again when any of them
  changes (checked on each new connection and request, as the toolkit re-reads them) and on
  SIGHUP. A reload that fails is logged once and the configuration in force stays: requests
  keep being authenticated with it. What the listening socket fixed at start (TLS on or off)
  cannot change without a restart; a reload that asks for it is refused the same way.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import bcrypt
from aiohttp import hdrs, web

from metricbridge.config.web_config import TLSServerConfig, WebConfig, load_web_config
from metricbridge.errors import ConfigError

log = logging.getLogger("metricbridge.web")
_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_VERIFY = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
VERDICTS_KEPT = 100  # as the toolkit's cache of bcrypt verdicts
# A TLS handshake not finished in this long is dropped: a silent client must not hold a
# connection for asyncio's default of 60 s.
HANDSHAKE_TIMEOUT = 10.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Signature = tuple[tuple[int, int, int] | None, ...]


def tls_context(config: WebConfig) -> ssl.SSLContext | None:
    """The server-side context ``config`` asks for (None: plain HTTP); ConfigError if unusable."""
    tls = config.tls
    if tls is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _VERSIONS[tls.min_version]
    context.maximum_version = _VERSIONS[tls.max_version]
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        message = f"cannot load {tls.cert_file} with {tls.key_file}: {reason}"
        raise ConfigError([config.issue("tls_server_config.cert_file", message)]) from exc
    _client_verification(context, tls, config)
    if tls.prefer_server_cipher_suites:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    # aiohttp serves HTTP/1.1 only: a client offering h2 (Go's does) is told so in the handshake.
    context.set_alpn_protocols(["http/1.1"])
    return context


def _client_verification(context: ssl.SSLContext, tls: TLSServerConfig, config: WebConfig) -> None:
    context.verify_mode = _VERIFY[tls.client_auth_type]
    if context.verify_mode == ssl.CERT_NONE:
        return
    try:
        if tls.client_ca_file is not None:
            context.load_verify_locations(cafile=tls.client_ca_file)
        elif tls.client_ca is not None:
            context.load_verify_locations(cadata=tls.client_ca)
        else:  # Go verifies against the system's roots then, and so does this
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except (OSError, ssl.SSLError, ValueError) as exc:
        key = "client_ca_file" if tls.client_ca_file is not None else "client_ca"
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        issue = config.issue(f"tls_server_config.{key}", f"cannot load the client CA: {reason}")
        raise ConfigError([issue]) from exc


def _signature(paths: tuple[Path, ...]) -> Signature:
    """What says a file changed: inode, size and modification time (None: unreadable)."""
    found: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            stat = path.stat()
        except OSError:
            found.append(None)
        else:
            found.append((stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return tuple(found)


class WebGuard:
    """The web config in force and what serves it: the TLS context, the auth middleware."""

    def __init__(self, path: Path) -> None:
        """Read ``path`` and build its TLS context; raise ``ConfigError`` if either fails."""
        self.path = path
        self.config = load_web_config(path)
        self._tls = tls_context(self.config)
        # The listener's context, fixed at start: each handshake switches to the latest one.
        self.listener_context = self._tls
        if self.listener_context is not None:
            self.listener_context.sni_callback = self._for_handshake
        self._signature = _signature(self._watched())
        self._failed: Signature | None = None  # a change already reported as unusable
        self._verdicts: dict[bytes, bool] = {}
        self._bcrypt = asyncio.Lock()

    def describe(self) -> str:
        """What it enforces, for the start-up log."""
        tls, users = self.config.tls, len(self.config.users)
        parts = ["no TLS"]
        if tls is not None:
            parts = [f"TLS {tls.min_version}-{tls.max_version} over HTTP/1.1"]
            parts.append(f"client certificates: {tls.client_auth_type}")
        parts.append(f"basic auth for {users} user(s)" if users else "no basic auth")
        return ", ".join(parts)

    def _watched(self) -> tuple[Path, ...]:
        return (self.path, *(self.config.tls.files if self.config.tls else ()))

    def install(self, app: web.Application) -> None:
        """Authenticate every request of ``app`` and add the configured headers to each answer."""
        app[GUARD] = self
        app.middlewares.append(self._authenticate)
        app.on_response_prepare.append(self._add_headers)

    def reload(self) -> list[str]:
        """Read the file again now (SIGHUP); on failure keep the one in force. Returns issues."""
        signature = _signature(self._watched())
        try:
            config, context = self._read()
        except ConfigError as exc:
            issues = [str(issue) for issue in exc.issues]
        else:
            issues = []
        if issues:
            self._failed = signature
            for issue in issues:
                log.error("web config reload rejected, the one in force is kept: %s", issue)
            return issues
        self.config, self._tls = config, context
        if context is not None and self.listener_context is not None:
            # What a handshake takes from the listener's own context, not from the one it
            # switches to: the verification mode and the protocol versions.
            for setting in ("verify_mode", "minimum_version", "maximum_version", "options"):
                setattr(self.listener_context, setting, getattr(context, setting))
        self._signature = _signature(self._watched())
        self._failed = None
        self._verdicts.clear()
        log.info("web config reloaded from %s: %s", self.path, self.describe())
        return []

    def _read(self) -> tuple[WebConfig, ssl.SSLContext | None]:
        config = load_web_config(self.path)
        context = tls_context(config)
        if (context is None) != (self.listener_context is None):
            now, wanted = ("on", "off") if context is None else ("off", "on")
            message = f"TLS is {now} since start: turning it {wanted} needs a restart"
            raise ConfigError([config.issue("tls_server_config", message)])
        return config, context

    def refresh(self) -> None:
        """Reload if the file or a file it names changed since it was last read (or tried)."""
        signature = _signature(self._watched())
        if signature not in (self._signature, self._failed):
            self.reload()

    def _for_handshake(
        self, connection: ssl.SSLObject, _server_name: str | None, listener: ssl.SSLContext
    ) -> None:
        """Each TLS handshake uses the certificate, key and client CAs in force now."""
        self.refresh()
        if self._tls is not None and self._tls is not listener:
            connection.context = self._tls

    async def _add_headers(self, _: web.Request, response: web.StreamResponse) -> None:
        for name, value in self.config.headers.items():
            response.headers[name] = value

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.refresh()
        users = self.config.users
        if users and not await self._authorized(request.headers.get(hdrs.AUTHORIZATION)):
            return web.Response(
                status=401, text="Unauthorized\n", headers={hdrs.WWW_AUTHENTICATE: "Basic"}
            )
        return await handler(request)

    async def _authorized(self, header: str | None) -> bool:
        credentials = basic_credentials(header)
        if credentials is None:
            return False
        user, password = credentials
        known = {name.encode(): hashed.encode() for name, hashed in self.config.users.items()}
        hashed = known.get(user)
        # An unknown user is compared against a real hash too: the answer takes as long.
        compared = hashed if hashed is not None else next(iter(known.values()))
        key = hashlib.sha256(b"\0".join((user, compared, password))).digest()
        verdict = self._verdicts.get(key)
        if verdict is None:
            async with self._bcrypt:  # one comparison at a time: each is CPU-bound
                verdict = self._verdicts.get(key)
                if verdict is None:
                    matched = await asyncio.to_thread(_matches, password, compared)
                    verdict = matched and hashed is not None
                    self._remember(key, verdict)
        return verdict

    def _remember(self, key: bytes, verdict: bool) -> None:
        if len(self._verdicts) >= VERDICTS_KEPT:
            del self._verdicts[next(iter(self._verdicts))]  # the oldest
        self._verdicts[key] = verdict


def basic_credentials(header: str | None) -> tuple[bytes, bytes] | None:
    """User and password of an ``Authorization: Basic`` header (RFC 7617), as bytes; else None.

    As Go's ``Request.BasicAuth``, which the toolkit uses: the scheme in any case, standard
    base64, split at the first colon; names and passwords are compared as the bytes sent.
    (aiohttp's ``BasicAuth.decode`` is deprecated since 3.14.)
    """
    scheme, _, encoded = (header or "").partition(" ")
    if scheme.lower() != "basic" or not encoded.isascii():
        return None
    try:
        decoded = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        return None
    user, colon, password = decoded.partition(b":")
    return (user, password) if colon else None


def _matches(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # longer than bcrypt's 72 bytes: no configured password is
        return False


GUARD = web.AppKey("web_guard", WebGuard)  # the app's guard, for SIGHUP
