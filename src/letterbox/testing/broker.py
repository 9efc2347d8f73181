# letterbox.testing.Broker: a real broker for a test or a script, on free ports
# of 127.0.0.1 and a data directory of its own (a temporary one unless given),
# as a context manager. Two modes with the same API: a child process (the
# default: isolated as a container) or embedded (a background thread of this
# process, up in well under a second: notebooks, quick scripts, the pytest
# plugin). Options: the manual clock, token authentication (a super-user token
# the broker's clients and admin calls use), --pulsar-compatible-only, and any
# other BrokerConfig setting by name.
# An embedded broker's admin server starts on first use of admin_url/admin();
# its clock is moved on its own loop (clock_in_process), not over HTTP.
# Invariants: every pulsar.Client made by client() is closed by stop(); a
# temporary data directory is removed by stop(); the log is kept after stop.
from __future__ import annotations

import base64
import contextlib
import json
import logging
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from letterbox.testing.choices import AUTH_MODES, CLOCKS, SUPER_USER
from letterbox.testing.clock import BrokerClock
from letterbox.testing.embedded import EmbeddedRunner
from letterbox.testing.errors import AdminCallError
from letterbox.testing.runners import ProcessRunner, Runner

__all__ = ["AdminCallError", "Broker"]


class Broker:
    """A letterbox broker on free ports, started by `with Broker() as broker:` (or start())."""

    def __init__(self, *, embedded: bool = False, clock: str = "real", auth: str = "none",
                 pulsar_compatible_only: bool = False, data_dir: Path | str | None = None,
                 settings: Mapping[str, Any] | None = None, start_timeout: float = 30.0) -> None:
        if clock not in CLOCKS:
            raise ValueError(f"clock must be one of {', '.join(CLOCKS)}, not {clock!r}")
        if auth not in AUTH_MODES:
            raise ValueError(f"auth must be one of {', '.join(AUTH_MODES)}, not {auth!r}")
        self.embedded = embedded
        self.clock_kind = clock
        self.auth = auth
        self.start_timeout = start_timeout
        self._given_dir = Path(data_dir) if data_dir is not None else None
        self._temp_dir: Path | None = None
        self.data_dir = self._given_dir
        self.token: str | None = None
        self._settings: dict[str, Any] = {
            "bind": "127.0.0.1", "port": 0, "admin_port": 0,
            "clock": clock, "allow_test_clock": clock == "manual",
            "pulsar_compatible_only": pulsar_compatible_only,
            **(settings or {}),
        }
        self._runner: Runner | None = None
        self._clients: list[Any] = []
        self._lines: list[str] = []
        self.clock = BrokerClock(self)

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> Broker:
        if self._runner is not None:
            return self
        if self._given_dir is None:
            self._temp_dir = Path(tempfile.mkdtemp(prefix="letterbox-"))
            self.data_dir = self._temp_dir / "data"
        settings = {**self._settings, "data_dir": str(self.data_dir)}
        if self.auth == "token":
            settings.update(self._token_settings())
        runner: Runner = EmbeddedRunner(settings) if self.embedded else ProcessRunner(settings)
        self._lines = runner.lines
        try:
            runner.start(self.start_timeout)
        except BaseException:
            self._remove_temp_dir()
            raise
        self._runner = runner
        return self

    def stop(self) -> None:
        if self._clients:
            import pulsar

            for client in self._clients:
                with contextlib.suppress(pulsar.PulsarException):  # closed by its user already
                    client.close()
            self._clients.clear()
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.stop()
        self._remove_temp_dir()

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _remove_temp_dir(self) -> None:
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    def _token_settings(self) -> dict[str, Any]:
        from letterbox.security.tokens import create_secret_key, create_token

        secret = "data:;base64," + base64.b64encode(create_secret_key()).decode()
        self.token = create_token(SUPER_USER, secret=secret)
        return {"authentication_enabled": True, "authentication_providers": ["token"],
                "authorization_enabled": True, "super_user_roles": [SUPER_USER],
                "token_secret_key": secret}

    # -- where it is ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._runner is not None

    def _ports(self) -> Runner:
        if self._runner is None:
            raise RuntimeError("the broker is not running: use `with Broker() as broker:` or start()")
        return self._runner

    @property
    def port(self) -> int:
        return self._ports().port

    @property
    def admin_port(self) -> int:
        return self._ports().admin_port

    @property
    def url(self) -> str:
        """The service URL for pulsar.Client: pulsar://127.0.0.1:PORT."""
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def clock_in_process(self, advance_ms: int | None) -> dict[str, Any] | None:
        """The clock's state ({"clock", "nowMs"}) read, or moved on by advance_ms, on an
        embedded broker's own loop; None where the admin API is the way (a child process,
        --pulsar-compatible-only). BrokerClock calls it."""
        runner = self._ports()
        return runner.clock(advance_ms) if isinstance(runner, EmbeddedRunner) else None

    def log(self) -> str:
        """Everything the broker has logged (kept after stop)."""
        return "".join(self._lines)

    def log_lines(self) -> list[str]:
        return list(self._lines)

    # -- using it -------------------------------------------------------------------------------

    def client(self, **kwargs: Any) -> Any:
        """A pulsar.Client for this broker (with the super-user token when authentication is
        on); closed by stop() unless closed before."""
        import pulsar

        if self.token is not None:
            kwargs.setdefault("authentication", pulsar.AuthenticationToken(self.token))
        kwargs.setdefault("operation_timeout_seconds", 10)
        kwargs.setdefault("logger", logging.getLogger("pulsar"))  # the client's lines go to logging
        client = pulsar.Client(self.url, **kwargs)
        self._clients.append(client)
        return client

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        """One admin API call (JSON in and out, None for an empty answer); an error status
        raises AdminCallError with the broker's reason."""
        import urllib.error  # only a broker whose admin API is used needs it
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.admin_url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token is not None:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                reason = str(json.loads(raw).get("reason") or raw.decode())
            except (ValueError, AttributeError):
                reason = raw.decode("utf-8", "replace") or str(exc.reason)
            raise AdminCallError(exc.code, reason) from None
        return json.loads(raw) if raw.strip() else None

    def topic_stats(self, topic: str) -> Any:
        """GET .../stats of a topic given by full name (persistent://t/ns/name) or short name."""
        if "://" not in topic:
            topic = f"persistent://public/default/{topic}"
        domain, rest = topic.split("://", 1)
        return self.admin("GET", f"/admin/v2/{domain}/{rest}/stats")
