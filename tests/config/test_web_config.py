"""Reading ``--web.config.file``: exporter-toolkit's keys, every issue with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.tls import bcrypt_hash
from metricbridge.cli import serve as cli_serve
from metricbridge.cli.main import main
from metricbridge.config.web_config import load_web_config, parse_web_config
from metricbridge.errors import ConfigError

HASH = "$2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG"  # the toolkit docs' example


def _issues(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_web_config(text, "web.yml", Path("/etc/mb"))
    return [str(issue) for issue in caught.value.issues]


def test_the_toolkits_example_shape_is_read() -> None:
    """Files relative to the config's folder; defaults TLS12-TLS13, NoClientCert, http2 true."""
    config = parse_web_config(
        "tls_server_config:\n  cert_file: tls/cert.pem\n  key_file: /abs/key.pem\n"
        f"basic_auth_users:\n  alice: {HASH}\n"
        "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: sameorigin\n",
        "web.yml",
        Path("/etc/mb"),
    )
    assert config.tls is not None
    assert config.tls.cert_file == Path("/etc/mb/tls/cert.pem")
    assert config.tls.key_file == Path("/abs/key.pem")
    assert (config.tls.min_version, config.tls.max_version) == ("TLS12", "TLS13")
    assert config.tls.client_auth_type == "NoClientCert"
    assert config.users == {"alice": HASH}
    assert config.headers == {"X-Frame-Options": "sameorigin"}
    assert config.http2 is False


@pytest.mark.parametrize(
    "text", ["", "# nothing\n", "tls_server_config: {}\n", "basic_auth_users: {}\n"]
)
def test_empty_configs_mean_plain_http_without_auth(text: str) -> None:
    """As the toolkit: nothing configured is nothing enforced."""
    config = parse_web_config(text, "web.yml", Path())
    assert config.tls is None
    assert not config.users


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "tls_server: {}\n",
            [
                "web.yml:1: tls_server: unknown key (did you mean 'tls_server_config'? known keys: basic_auth_users, http_server_config, rate_limit, tls_server_config)"
            ],
            id="unknown-top-key",
        ),
        pytest.param(
            "tls_server_config:\n  cert_file: c.pem\n",
            ["web.yml:1: tls_server_config: key_file is required when TLS is configured"],
            id="no-key-file",
        ),
        pytest.param(
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: RequireAnyClientCert\n",
            [
                "web.yml:4: tls_server_config.client_auth_type: RequireAnyClientCert is not supported: Python's ssl module verifies every client certificate it asks for; use VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            ],
            id="unverified-client-auth",
        ),
        pytest.param(
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: Sometimes\n",
            [
                "web.yml:4: tls_server_config.client_auth_type: unknown value 'Sometimes' (one of NoClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert)"
            ],
            id="unknown-client-auth",
        ),
        pytest.param(
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_ca_file: ca\n",
            ["web.yml:1: tls_server_config: a client CA is configured without a client_auth_type"],
            id="ca-without-auth",
        ),
        pytest.param(
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS13\n  max_version: TLS12\n",
            ["web.yml:1: tls_server_config: min_version TLS13 is above max_version TLS12"],
            id="versions-crossed",
        ),
        pytest.param(
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  max_version: TLS1.3\n",
            [
                "web.yml:4: tls_server_config.max_version: unknown TLS version 'TLS1.3' (one of TLS10, TLS11, TLS12, TLS13)"
            ],
            id="version-name",
        ),
        pytest.param(
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
            [
                "web.yml:4: tls_server_config.cipher_suites: not supported: Go's cipher suite names have no equivalent here; the defaults of the ssl module are used"
            ],
            id="cipher-suites",
        ),
        pytest.param(
            "rate_limit:\n  interval: 1s\n",
            [
                "web.yml:1: rate_limit: not supported: not implemented by metricbridge (--web.max-connections bounds clients)"
            ],
            id="rate-limit",
        ),
        pytest.param(
            "basic_auth_users:\n  bob: hunter2\n",
            [
                "web.yml:2: basic_auth_users.bob: not a bcrypt hash ($2y$10$ and 53 characters: htpasswd -nBC 10 '' | tr -d ':\\n')"
            ],
            id="plain-password",
        ),
        pytest.param(
            "basic_auth_users:\n  bob: 12\n",
            ["web.yml:2: basic_auth_users.bob: expected a string, got int '12'"],
            id="number-password",
        ),
        pytest.param(
            f"basic_auth_users:\n  'a:b': {HASH}\n",
            [
                "web.yml:2: basic_auth_users.a:b: a user name cannot contain ':' (basic auth splits there)"
            ],
            id="colon-in-name",
        ),
        pytest.param(
            f"basic_auth_users:\n  bob: {HASH}\n  bob: {HASH}\n",
            ["web.yml:3: basic_auth_users.bob: duplicate key (first defined at line 2)"],
            id="duplicate-user",
        ),
        pytest.param(
            "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
            [
                "web.yml:3: http_server_config.headers.X-Frame-Options: invalid value 'allow' (one of deny, sameorigin)"
            ],
            id="header-value",
        ),
        pytest.param(
            "http_server_config:\n  headers:\n    Server: x\n",
            [
                "web.yml:3: http_server_config.headers.Server: unknown key (known keys: Content-Security-Policy, Strict-Transport-Security, X-Content-Type-Options, X-Frame-Options, X-XSS-Protection)"
            ],
            id="header-name",
        ),
        pytest.param(
            "tls_server_config: [\n",
            ["web.yml:2: invalid YAML: expected the node content, but found '<stream end>'"],
            id="yaml-syntax",
        ),
    ],
)
def test_bad_configs_are_refused_with_their_line(text: str, expected: list[str]) -> None:
    """One message per issue, file:line: key: what is wrong, as the rules file's."""
    assert _issues(text) == expected


def test_every_issue_is_reported_at_once_in_line_order() -> None:
    """Not the first alone."""
    issues = _issues("basic_auth_users:\n  a: x\nhttp_server_config:\n  http2: maybe\nextra: 1\n")
    assert [issue.split(":")[1] for issue in issues] == ["2", "4", "5"]


def test_a_file_too_large_or_missing_is_refused(tmp_path: Path) -> None:
    """The toolkit reads it on every request: a huge file is a mistake, said so."""
    big = tmp_path / "web.yml"
    big.write_bytes(b"#" * (2 << 20))
    with pytest.raises(ConfigError, match="more than 1048576 bytes"):
        load_web_config(big)
    with pytest.raises(ConfigError, match="cannot read: No such file or directory"):
        load_web_config(tmp_path / "missing.yml")


def test_serve_refuses_a_bad_web_config_before_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 with the file's issues, as a bad rules file; nothing is listened on."""
    served: list[object] = []
    monkeypatch.setattr(cli_serve, "_serve", lambda *args: served.append(args))
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  ok: {bcrypt_hash('x')}\n  bad: nope\n")
    assert (
        main(["-u", ":1", "--web.listen-address", "127.0.0.1:0", "--web.config.file", str(config)])
        == 2
    )
    err = capsys.readouterr().err
    assert f"{config}:3: basic_auth_users.bad: not a bcrypt hash" in err
    assert "1 issue(s) found" in err
    assert not served
