"""``--web.config.file`` served: basic auth on every path, TLS, client certificates, reloads."""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
import trustme
from aiohttp import web

from helpers.service import FakeUpstream, bridge_app
from helpers.tls import PASSWORD, USER, Certificates, basic_auth_header, bcrypt_hash
from metricbridge.cli.serve import listen_capped
from metricbridge.errors import ConfigError
from metricbridge.service import web_guard
from metricbridge.service.web_guard import WebGuard


def _auth(user: str, password: str) -> dict[str, str]:
    return {"Authorization": basic_auth_header(user, password)}


AUTH = _auth(USER, PASSWORD)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _users(**extra: str) -> str:
    lines = [f"  {USER}: {bcrypt_hash(PASSWORD)}"]
    lines += [f"  {name}: {bcrypt_hash(password)}" for name, password in extra.items()]
    return "basic_auth_users:\n" + "\n".join(lines) + "\n"


async def _guarded(aiohttp_server, aiohttp_client, config: Path):
    upstream = await aiohttp_server(FakeUpstream().app())
    app = bridge_app(str(upstream.make_url("/metrics")))
    guard = WebGuard(config)
    guard.install(app)
    return guard, await aiohttp_client(app)


@asynccontextmanager
async def _https(aiohttp_server, config: Path) -> AsyncIterator[tuple[WebGuard, str]]:
    """The bridge behind ``config`` on a real TLS listener; yields its guard and base URL."""
    upstream = await aiohttp_server(FakeUpstream().app())
    app = bridge_app(str(upstream.make_url("/metrics")))
    guard = WebGuard(config)
    guard.install(app)
    runner = web.AppRunner(app)
    await runner.setup()
    listener = await listen_capped(runner, "127.0.0.1", 0, tls=guard.listener_context)
    port = listener.sockets[0].getsockname()[1]
    try:
        yield guard, f"https://127.0.0.1:{port}"
    finally:
        listener.close()
        await runner.cleanup()


async def _status(url: str, context: ssl.SSLContext, auth: dict[str, str] | None = None) -> int:
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
        session.get(url, headers=auth) as response,
    ):
        await response.read()
        return response.status


@pytest.mark.parametrize(
    "path", ["/metrics", "/contract", "/-/healthy", "/-/ready", "/", "/nowhere"]
)
async def test_every_path_needs_the_password(
    aiohttp_server, aiohttp_client, tmp_path, path
) -> None:
    """As exporter-toolkit: 401 with WWW-Authenticate: Basic without it, the probes included."""
    _, client = await _guarded(
        aiohttp_server, aiohttp_client, _write(tmp_path / "web.yml", _users())
    )
    response = await client.get(path)
    assert response.status == 401
    assert response.headers["WWW-Authenticate"] == "Basic"
    wrong = await client.get(path, headers=_auth(USER, "wrong"))
    assert wrong.status == 401
    right = await client.get(path, headers=AUTH)
    assert right.status == (404 if path == "/nowhere" else 200)


@pytest.mark.parametrize(
    "header",
    ["Basic", "Basic !!!", "Bearer abc", "Basic " + "QQ==", "basic"],
    ids=["empty", "not-base64", "not-basic", "no-colon", "lowercase-no-value"],
)
async def test_malformed_authorization_is_401_not_500(
    aiohttp_server, aiohttp_client, tmp_path, header
) -> None:
    """Whatever a client puts in Authorization, the answer is 401."""
    _, client = await _guarded(
        aiohttp_server, aiohttp_client, _write(tmp_path / "web.yml", _users())
    )
    response = await client.get("/metrics", headers={"Authorization": header})
    assert response.status == 401


async def test_unknown_user_and_long_password_are_refused(
    aiohttp_server, aiohttp_client, tmp_path
) -> None:
    """An unknown user is compared against a real hash and refused; so is a 100-byte password."""
    _, client = await _guarded(
        aiohttp_server, aiohttp_client, _write(tmp_path / "web.yml", _users())
    )
    assert (await client.get("/metrics", headers=_auth("mallory", PASSWORD))).status == 401
    assert (await client.get("/metrics", headers=_auth(USER, "x" * 100))).status == 401


async def test_verdicts_are_remembered_so_scrapes_do_not_pay_bcrypt_again(
    aiohttp_server, aiohttp_client, tmp_path, monkeypatch
) -> None:
    """One bcrypt comparison per user, hash and password, right or wrong, then none."""
    calls: list[bytes] = []
    real = web_guard._matches

    def counted(password: bytes, hashed: bytes) -> bool:
        calls.append(password)
        return real(password, hashed)

    monkeypatch.setattr(web_guard, "_matches", counted)
    _, client = await _guarded(
        aiohttp_server, aiohttp_client, _write(tmp_path / "web.yml", _users())
    )
    for _ in range(3):
        assert (await client.get("/-/healthy", headers=AUTH)).status == 200
        assert (await client.get("/-/healthy", headers=_auth(USER, "no"))).status == 401
    assert sorted(calls) == [b"no", PASSWORD.encode()]


async def test_the_verdicts_kept_are_bounded(aiohttp_server, aiohttp_client, tmp_path) -> None:
    """A client trying passwords cannot grow the remembered verdicts past the bound."""
    guard, client = await _guarded(
        aiohttp_server, aiohttp_client, _write(tmp_path / "web.yml", _users())
    )
    for attempt in range(web_guard.VERDICTS_KEPT + 20):
        await client.get("/-/healthy", headers=_auth(USER, f"guess{attempt}"))
    assert len(guard._verdicts) == web_guard.VERDICTS_KEPT
    assert all(len(key) == 32 for key in guard._verdicts)  # digests, never passwords


async def test_configured_headers_are_on_every_answer(
    aiohttp_server, aiohttp_client, tmp_path
) -> None:
    """http_server_config.headers go on 200s and 401s alike, as the toolkit sets them first."""
    config = _users() + (
        "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
        "    X-Content-Type-Options: nosniff\n    Content-Security-Policy: ''\n"
    )
    _, client = await _guarded(aiohttp_server, aiohttp_client, _write(tmp_path / "web.yml", config))
    for auth, status in ((None, 401), (AUTH, 200)):
        response = await client.get("/metrics", headers=auth)
        assert response.status == status
        assert response.headers["X-Frame-Options"] == "deny"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert "Content-Security-Policy" not in response.headers  # blank: unset


async def test_no_users_means_no_authentication(aiohttp_server, aiohttp_client, tmp_path) -> None:
    """An empty web config serves as without one."""
    _, client = await _guarded(aiohttp_server, aiohttp_client, _write(tmp_path / "web.yml", ""))
    assert (await client.get("/-/healthy")).status == 200


async def test_a_changed_file_is_read_again_and_a_broken_one_keeps_the_old(
    aiohttp_server, aiohttp_client, tmp_path, caplog
) -> None:
    """As the toolkit re-reads its file: a new user works at once; a broken file is logged once
    and the users in force go on being checked."""
    config = _write(tmp_path / "web.yml", _users())
    _, client = await _guarded(aiohttp_server, aiohttp_client, config)
    other = _auth("grafana", "another")
    assert (await client.get("/-/healthy", headers=other)).status == 401
    _write(config, _users(grafana="another"))
    assert (await client.get("/-/healthy", headers=other)).status == 200
    caplog.set_level(logging.ERROR, "metricbridge")
    _write(config, "basic_auth_users:\n  grafana: not-a-hash\n  extra: [1]\n")
    for _ in range(3):
        assert (await client.get("/-/healthy", headers=other)).status == 200
        assert (await client.get("/-/healthy")).status == 401
    # By level: another test in this process may have left the logger at INFO, whose reload
    # line caplog then holds too.
    errors = [
        r.getMessage()
        for r in caplog.records
        if r.name == "metricbridge.web" and r.levelno >= logging.ERROR
    ]
    assert len(errors) == 2, errors  # the file's two issues, once
    assert errors[0].startswith(
        f"web config reload rejected, the one in force is kept: {config}:2: "
    )


async def test_https_with_basic_auth(aiohttp_server, tmp_path) -> None:
    """TLS from cert_file/key_file (relative to the config's folder), auth inside it."""
    certificates = Certificates.make(tmp_path)
    config = _write(
        tmp_path / "web.yml",
        "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n" + _users(),
    )
    async with _https(aiohttp_server, config) as (_, url):
        trusted = certificates.client_context()
        assert await _status(f"{url}/metrics", trusted, AUTH) == 200
        assert await _status(f"{url}/metrics", trusted, _auth(USER, "wrong")) == 401
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await _status(f"{url}/metrics", ssl.create_default_context(), AUTH)  # not trusted
        async with aiohttp.ClientSession() as session:  # plain HTTP on the TLS port
            with pytest.raises(aiohttp.ClientError):
                await session.get(url.replace("https", "http") + "/-/healthy")


async def test_a_rotated_certificate_is_served_on_the_next_connection(
    aiohttp_server, tmp_path
) -> None:
    """cert-manager rewrites the files: new connections get the new certificate, no restart."""
    certificates = Certificates.make(tmp_path)
    config = _write(
        tmp_path / "web.yml", "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
    )
    async with _https(aiohttp_server, config) as (_, url):
        old = certificates.client_context()
        assert await _status(f"{url}/-/healthy", old) == 200
        renewed = Certificates(tmp_path, trustme.CA())
        renewed.issue()
        assert await _status(f"{url}/-/healthy", renewed.client_context()) == 200
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await _status(f"{url}/-/healthy", old)


async def test_client_certificates_are_required_and_verified(aiohttp_server, tmp_path) -> None:
    """RequireAndVerifyClientCert with client_ca_file: no certificate, or one of another CA, fails."""
    certificates = Certificates.make(tmp_path)
    clients = trustme.CA()
    clients.cert_pem.write_to_path(str(tmp_path / "clients.pem"))
    config = _write(
        tmp_path / "web.yml",
        "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: clients.pem\n",
    )
    async with _https(aiohttp_server, config) as (_, url):
        assert (
            await _status(f"{url}/-/healthy", certificates.client_context(client_cert=clients))
            == 200
        )
        for context in (
            certificates.client_context(),
            certificates.client_context(client_cert=trustme.CA()),
        ):
            with pytest.raises(aiohttp.ClientError):
                await _status(f"{url}/-/healthy", context)


async def test_client_auth_turned_on_by_a_reload_applies_to_new_connections(
    aiohttp_server, tmp_path
) -> None:
    """What the listener fixed at start (verification, versions) follows a reload too."""
    certificates = Certificates.make(tmp_path)
    clients = trustme.CA()
    clients.cert_pem.write_to_path(str(tmp_path / "clients.pem"))
    tls = "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
    config = _write(tmp_path / "web.yml", tls)
    async with _https(aiohttp_server, config) as (guard, url):
        assert await _status(f"{url}/-/healthy", certificates.client_context()) == 200
        _write(
            config,
            tls + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: clients.pem\n",
        )
        assert guard.reload() == []
        with pytest.raises(aiohttp.ClientError):
            await _status(f"{url}/-/healthy", certificates.client_context())
        assert (
            await _status(f"{url}/-/healthy", certificates.client_context(client_cert=clients))
            == 200
        )


async def test_min_version_is_held_to(aiohttp_server, tmp_path) -> None:
    """min_version TLS13 refuses a TLS 1.2 client."""
    certificates = Certificates.make(tmp_path)
    config = _write(
        tmp_path / "web.yml",
        "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  min_version: TLS13\n",
    )
    async with _https(aiohttp_server, config) as (_, url):
        old_client = certificates.client_context()
        old_client.maximum_version = ssl.TLSVersion.TLSv1_2
        with pytest.raises(aiohttp.ClientError):
            await _status(f"{url}/-/healthy", old_client)
        assert await _status(f"{url}/-/healthy", certificates.client_context()) == 200


def test_turning_tls_off_needs_a_restart(tmp_path) -> None:
    """The listening socket is TLS or not from start: a reload asking otherwise is refused."""
    Certificates.make(tmp_path)
    config = _write(
        tmp_path / "web.yml", "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
    )
    guard = WebGuard(config)
    _write(config, _users())
    (issue,) = guard.reload()
    assert (
        issue
        == f"{config}: tls_server_config: TLS is on since start: turning it off needs a restart"
    )
    assert guard.config.tls is not None
    assert not guard.config.users


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {},
            "tls_server_config.cert_file: cannot load {dir}/cert.pem with {dir}/key.pem: No such file or directory",
        ),
        (
            {"cert.pem": "x", "key.pem": "y"},
            "tls_server_config.cert_file: cannot load {dir}/cert.pem with {dir}/key.pem: [SSL]",
        ),
    ],
    ids=["missing", "not-pem"],
)
def test_unusable_certificate_files_are_refused_at_their_line(tmp_path, files, message) -> None:
    """The file's line is named, as for a bad value."""
    for name, text in files.items():
        _write(tmp_path / name, text)
    config = _write(
        tmp_path / "web.yml",
        "# TLS\ntls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n",
    )
    with pytest.raises(ConfigError) as caught:
        WebGuard(config)
    (issue,) = caught.value.issues
    assert str(issue).startswith(f"{config}:3: " + message.format(dir=tmp_path))


def test_a_mismatched_key_is_refused(tmp_path) -> None:
    """A key that is not the certificate's."""
    Certificates.make(tmp_path)
    trustme.CA().issue_cert("127.0.0.1").private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    config = _write(
        tmp_path / "web.yml", "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
    )
    with pytest.raises(ConfigError, match=r"KEY_VALUES_MISMATCH|key values mismatch"):
        WebGuard(config)


async def test_bcrypt_runs_off_the_event_loop(aiohttp_server, aiohttp_client, tmp_path) -> None:
    """A costly hash (cost 12, a quarter second) does not stall other requests' answers."""
    config = _write(
        tmp_path / "web.yml", f"basic_auth_users:\n  {USER}: {bcrypt_hash(PASSWORD, cost=12)}\n"
    )
    guard, client = await _guarded(aiohttp_server, aiohttp_client, config)
    loop = asyncio.get_running_loop()
    ticks: list[float] = []

    async def tick() -> None:
        for _ in range(20):
            ticks.append(loop.time())
            await asyncio.sleep(0.01)

    started = loop.time()
    ticker = asyncio.create_task(tick())
    assert (await client.get("/-/healthy", headers=AUTH)).status == 200
    took = loop.time() - started
    await ticker
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    # The loop went on ticking during the comparison: no gap near the comparison's own length.
    assert max(gaps) < took / 2, (max(gaps), took)
    assert guard.config.users
