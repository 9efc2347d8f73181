"""`letterbox migrate`, `import` and `redrive-back` refuse a bad far end before anything is
written: unreachable, credentials refused (on the binary protocol: a letterbox broker with token
authentication, and a stand-in that refuses CONNECT as Apache Pulsar does; on the admin API: a
stand-in answering 401), an Apache Pulsar too old (a CONNECTED with protocol version 15, an admin
API saying 2.7.0), a namespace that is not there, a --data-dir that is no stopped broker's. Each
refusal is one line, exit status 2, without the token; the stand-ins' records and both brokers'
state show nothing was written."""
from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest
from click.testing import Result

from tests.cli.copy_stubs import admin_stub, broker_stub
from tests.cli.helpers import closed_port, run
from tests.conftest import BrokerProcess

SECRET = b"letterbox-copy-refusals-secret-0123456789"
GOOD = jwt.encode({"sub": "admin"}, SECRET, algorithm="HS256")
BAD = jwt.encode({"sub": "admin"}, b"another-secret-of-enough-length-0123456789", algorithm="HS256")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A letterbox broker with token authentication on (HS256, SECRET)."""
    root = tmp_path_factory.mktemp("secured")
    (root / "secret.key").write_bytes(SECRET)
    b = BrokerProcess(root / "data", args=["--authentication-enabled", "--authentication-providers", "token",
                                           "--token-secret-key", f"file://{root / 'secret.key'}"]).start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A letterbox broker with tenant `src` (namespace src/app, a topic of 3 messages)."""
    b = BrokerProcess(tmp_path_factory.mktemp("source") / "data").start()
    _call(b.admin_url, "PUT", "/admin/v2/tenants/src", {"adminRoles": [], "allowedClusters": ["standalone"]})
    _call(b.admin_url, "PUT", "/admin/v2/namespaces/src/app")
    _call(b.admin_url, "POST", "/admin/v2/namespaces/src/app/retention",
          {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10})
    import pulsar

    c = pulsar.Client(b.url)
    p = c.create_producer("persistent://src/app/orders")
    for i in range(3):
        p.send(f"m{i}".encode())
    c.close()
    yield b
    b.stop()


def _call(admin_url: str, method: str, path: str, body: object = None, token: str | None = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    req = urllib.request.Request(admin_url + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read()
    return json.loads(raw) if raw.strip() else None


def _refused(r: Result, *needles: str) -> str:
    assert r.exit_code == 2, f"exit {r.exit_code}: {r.output}"
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    for secret in (GOOD, BAD):
        assert secret not in r.output
    return lines[0]


def _migrate(src: BrokerProcess, target_url: str, target_admin: str, *args: str) -> Result:
    return run("migrate", "--service-url", src.url, "--admin-url", src.admin_url, "--target-url", target_url,
               "--target-admin-url", target_admin, "--tenant", "src", *args)


def _tenants(b: BrokerProcess) -> object:
    return _call(b.admin_url, "GET", "/admin/v2/tenants", token=GOOD)


def test_migrate_refuses_an_unreachable_target_or_source(source: BrokerProcess, secured: BrokerProcess) -> None:
    down = closed_port()
    r = _migrate(source, f"pulsar://127.0.0.1:{down}", f"http://127.0.0.1:{down}")
    _refused(r, f"the target Apache Pulsar at pulsar://127.0.0.1:{down} does not answer", "--target-url")
    r = run("migrate", "--service-url", f"pulsar://127.0.0.1:{down}", "--admin-url", f"http://127.0.0.1:{down}",
            "--target-url", secured.url, "--target-admin-url", secured.admin_url, "--target-auth-token", GOOD)
    _refused(r, "the source letterbox's admin API", "does not answer", "--admin-url")
    assert "src" not in _tenants(secured)  # type: ignore[operator]


def test_migrate_refuses_a_token_the_target_refuses(source: BrokerProcess, secured: BrokerProcess) -> None:
    r = _migrate(source, secured.url, secured.admin_url, "--target-auth-token", BAD)
    _refused(r, f"at {secured.url} refuses the credentials", "--target-auth-token")
    with admin_stub(status=401) as (admin_url, seen):  # the binary side takes the token, the admin API not
        r = _migrate(source, secured.url, admin_url, "--target-auth-token", GOOD)
        _refused(r, "admin API", "refuses the credentials (HTTP 401)", "--target-auth-token")
    assert seen.requests and not seen.writes, seen.requests
    with broker_stub(refuse="Unable to authenticate") as (url, seen_binary), admin_stub() as (admin_url, seen):
        _refused(_migrate(source, url, admin_url, "--target-auth-token", BAD), "AuthenticationError")
    assert seen_binary.requests == ["CONNECT"] and not seen.requests
    assert "src" not in _tenants(secured)  # type: ignore[operator]


def test_migrate_refuses_an_old_pulsar(source: BrokerProcess) -> None:
    with broker_stub("Pulsar Server2.5.0", 15) as (url, seen_binary), admin_stub() as (admin_url, seen):
        _refused(_migrate(source, url, admin_url), "protocol version 15", "Apache Pulsar 2.8.0 or later")
    assert not seen_binary.writes and not seen.requests
    with broker_stub("Pulsar Server", 21) as (url, seen_binary), admin_stub("2.7.0") as (admin_url, seen):
        _refused(_migrate(source, url, admin_url), "is Apache Pulsar 2.7.0", "2.8.0 or later", "upgrade")
    assert not seen_binary.writes and seen.requests == ["GET /admin/v2/brokers/version"]


def test_migrate_says_which_tenants_it_creates(source: BrokerProcess, secured: BrokerProcess) -> None:
    r = _migrate(source, secured.url, secured.admin_url, "--target-auth-token", GOOD, "--dry-run")
    assert r.exit_code == 0, r.output
    assert "note: the target has no tenant src: migrate creates it" in r.stderr
    assert "tenant src" in r.stdout and "src" not in _tenants(secured)  # type: ignore[operator]


@pytest.fixture
def stopped(tmp_path: Path, source: BrokerProcess) -> Path:
    """A stopped broker's data directory (a broker started and stopped on it)."""
    b = BrokerProcess(tmp_path / "stopped").start()
    b.stop()
    return b.data_dir


def test_migrate_data_dir_refusals(source: BrokerProcess, secured: BrokerProcess, stopped: Path,
                                   tmp_path: Path) -> None:
    target = ["--target-url", secured.url, "--target-admin-url", secured.admin_url, "--target-auth-token", GOOD]
    empty = tmp_path / "empty"
    empty.mkdir()
    _refused(run("migrate", "--data-dir", str(empty), *target), "holds no letterbox.db", "--data-dir")
    _refused(run("migrate", "--data-dir", str(source.data_dir), *target), "is in use by pid", "stopped broker")
    _refused(run("migrate", "--data-dir", str(stopped), "--service-url", source.url, *target),
             "--data-dir is the source: give it without --service-url")
    def files() -> dict[str, int]:  # the lock file aside: the directory's check takes the lock and frees it
        return {p.name: p.stat().st_mtime_ns for p in stopped.iterdir() if p.name != "letterbox.lock"}

    before = files()
    with broker_stub("Pulsar Server2.5.0", 15) as (url, _seen), admin_stub() as (admin_url, _seen_admin):
        r = run("migrate", "--data-dir", str(stopped), "--target-url", url, "--target-admin-url", admin_url)
        _refused(r, "protocol version 15")
    assert files() == before  # no broker started on it


def _import(local: BrokerProcess, pulsar_url: str, *args: str) -> Result:
    return run("import", "persistent://public/default/dlq", "--pulsar-url", pulsar_url,
               "--service-url", local.url, "--admin-url", local.admin_url, *args)


def _deduplication(b: BrokerProcess) -> object:
    return _call(b.admin_url, "GET", "/admin/v2/namespaces/public/default/deduplication")


def test_import_refuses_before_writing_locally(source: BrokerProcess, secured: BrokerProcess) -> None:
    _refused(_import(source, secured.url, "--pulsar-auth-token", BAD), "Apache Pulsar at", "refuses the credentials",
             "--pulsar-auth-token")
    with broker_stub("Pulsar Server2.5.0", 15) as (url, seen):
        _refused(_import(source, url), "protocol version 15")
    assert seen.requests[0] == "CONNECT" and not seen.writes, seen.requests
    _refused(_import(source, secured.url, "--pulsar-auth-token", GOOD, "--as", "persistent://nosuch/ns/home"),
             "the local letterbox has no tenant nosuch", "letterbox admin namespaces create nosuch/ns")
    _refused(_import(source, secured.url, "--pulsar-auth-token", GOOD, "--as", "persistent://src/nope/home"),
             "the local letterbox has no namespace src/nope")
    down = closed_port()
    r = run("import", "t", "--pulsar-url", secured.url, "--pulsar-auth-token", GOOD,
            "--service-url", f"pulsar://127.0.0.1:{down}", "--admin-url", f"http://127.0.0.1:{down}")
    _refused(r, "the local letterbox's admin API", "does not answer")
    assert _deduplication(source) in (None, False)  # import had not switched it on
    topics = _call(source.admin_url, "GET", "/admin/v2/persistent/public/default")
    assert not [t for t in topics if "home" in t or t.endswith("/dlq")], topics  # type: ignore[union-attr]


def test_redrive_back_refuses_before_sending(source: BrokerProcess, secured: BrokerProcess) -> None:
    local = ["--service-url", source.url, "--admin-url", source.admin_url]
    topic = "persistent://src/app/orders"
    with broker_stub("Pulsar Server2.5.0", 15) as (url, seen):
        _refused(run("redrive-back", topic, "--pulsar-url", url, *local), "protocol version 15")
    assert seen.requests[0] == "CONNECT" and not seen.writes, seen.requests
    _refused(run("redrive-back", topic, "--pulsar-url", secured.url, "--pulsar-auth-token", BAD, *local),
             "refuses the credentials")
    with admin_stub(status=401) as (admin_url, seen_admin):
        r = run("redrive-back", topic, "--pulsar-url", secured.url, "--pulsar-auth-token", GOOD,
                "--pulsar-admin-url", admin_url, "--to", "persistent://public/default/back", *local)
        _refused(r, "refuses the credentials (HTTP 401)")
    assert not seen_admin.writes
    r = run("redrive-back", topic, "--pulsar-url", secured.url, "--pulsar-auth-token", GOOD, "--pulsar-admin-url",
            secured.admin_url, "--to", "persistent://public/nowhere/back", *local)
    _refused(r, "Apache Pulsar has no namespace public/nowhere")
    assert "persistent://public/default/back" not in _call(secured.admin_url, "GET",  # type: ignore[operator]
                                                          "/admin/v2/persistent/public/default", token=GOOD)
