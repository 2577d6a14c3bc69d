"""GET /contract describes the fetch /metrics last served and never fetches itself (issue 27)."""

from __future__ import annotations

from typing import Any

from helpers.paths import FIXTURES
from helpers.service import FakeUpstream, bridge_app

_SERVED = {"native", "translated", "synthesized", "approximated"}


def _rules_with_approximations(tmp_path: Any) -> str:
    """The shipped contract with the approximations profile switched on in the file."""
    text = (
        (FIXTURES.parents[2] / "config" / "aliases.yaml")
        .read_text(encoding="utf-8")
        .replace("version: 1\n", "version: 1\nprofiles: [approximations]\n", 1)
    )
    path = tmp_path / "aliases.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


async def test_contract_and_metrics_agree_with_no_cache(
    aiohttp_server: Any, aiohttp_client: Any, tmp_path: Any
) -> None:
    """With --cache-ttl 0, /contract serves exactly the rows the last /metrics response had."""
    upstream = FakeUpstream(body=(FIXTURES / "tp1-cold.prom").read_bytes())
    server = await aiohttp_server(upstream.app())
    app = bridge_app(
        str(server.make_url("/metrics")), cache_ttl=0.0, config=_rules_with_approximations(tmp_path)
    )
    client = await aiohttp_client(app)
    before = await (await client.get("/contract")).json()
    assert {row["state"] for row in before["rows"]} == {"missing"}  # nothing served yet
    assert upstream.requests == 0  # /contract fetched nothing
    await client.get("/metrics")
    upstream.body = (FIXTURES / "tp1.prom").read_bytes()
    text = await (await client.get("/metrics")).text()
    fetches = upstream.requests
    report = await (await client.get("/contract")).json()
    assert upstream.requests == fetches
    families = {line.split(" ")[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    served = {row["family"] for row in report["rows"] if row["state"] in _SERVED}
    rows = {row["family"]: row for row in report["rows"]}
    assert rows["sglang:device_cache_hit_rate"]["state"] == "approximated"  # a rate: 2 fetches
    assert served == {row for row in rows if row in families}
