# The admin HTTP client behind `letterbox admin` and `letterbox dlq`: one
# blocking urllib call per request, JSON in and out, and the two ways a call
# fails turned into click exceptions that exit non-zero with a sentence a
# person can act on:
#   - AdminApiError: the API answered with a status >= 400; the message is the
#     body's {"reason"} (or its text) and the HTTP status.
#   - AdminUnreachable: nothing answered (connection refused, timeout, DNS);
#     the message names the URL and says the broker is probably not running.
#   - NeedsLetterbox: a letterbox-only route on an API without the extension
#     (Apache Pulsar): says so and what to use there (extension_routes.py).
# It also owns the per-invocation CLI state (AdminContext: client + output
# mode) and the `--output` option that every leaf command accepts. Calls carry
# the --auth-token / --tls-trust-certs identity (auth_flags.py).
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click

from letterbox.auth_flags import auth_options
from letterbox.auth_options import AuthOptions
from letterbox.cli.extension_routes import (
    CLOCK_ROUTE,
    NeedsLetterbox,
    extension_of,
    needs_letterbox,
)
from letterbox.cli.output import OUTPUT_CHOICE, echo_json
from letterbox.default_urls import ADMIN_URL_ENV, DEFAULT_ADMIN_URL

HTTP_TIMEOUT = 30.0


class AdminApiError(click.ClickException):
    """The API answered with an error status; the message is its {"reason"}."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{reason} (HTTP {status})")
        self.status = status
        self.reason = reason


class AdminUnreachable(click.ClickException):
    """Nothing answered at the admin URL."""


@dataclass
class Response:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)

    def json(self) -> Any:
        if not self.body.strip():
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            raise click.ClickException(
                f"the admin API answered HTTP {self.status} with a body that is not JSON: "
                f"{self.body[:200]!r}"
            ) from None


def unreachable_message(url: str, reason: object = None) -> str:
    msg = (
        f"cannot reach the letterbox admin API at {url}: is the broker running? "
        "(start it with `letterbox standalone`, or point --admin-url / LETTERBOX_ADMIN_URL "
        "at its admin port)"
    )
    if reason is not None and not isinstance(reason, ConnectionRefusedError):
        msg += f" [{reason}]"
    return msg


class AdminClient:
    def __init__(self, base_url: str, timeout: float = HTTP_TIMEOUT, auth: AuthOptions | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.auth = auth or AuthOptions()
        self._ssl = self.auth.ssl_context()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for name, value in self.auth.http_headers().items():
            req.add_header(name, value)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout, context=self._ssl) as resp:
                return Response(resp.status, resp.read(), list(resp.headers.items()))
        except urllib.error.HTTPError as exc:
            extension = extension_of(path) if exc.code in (404, 405) else None
            if extension is not None and (path == CLOCK_ROUTE or not self._has_extension()):
                raise needs_letterbox(self.base_url, extension) from None
            raise AdminApiError(exc.code, _reason(exc.read(), exc.reason)) from None
        except urllib.error.URLError as exc:
            raise AdminUnreachable(unreachable_message(self.base_url, exc.reason)) from None
        except ValueError as exc:  # "unknown url type", bad port, ...
            raise click.UsageError(f"invalid admin URL {self.base_url!r}: {exc}") from None
        except TimeoutError as exc:
            raise AdminUnreachable(unreachable_message(self.base_url, f"timed out: {exc}")) from None
        except OSError as exc:  # resets, broken pipes
            raise AdminUnreachable(unreachable_message(self.base_url, exc)) from None

    def get_json(self, path: str, query: dict[str, str] | None = None) -> Any:
        return self.request("GET", path, query=query).json()

    def _has_extension(self) -> bool:
        """Whether the API serves letterbox's own routes: its clock route answers anything but 404."""
        try:
            self.request("GET", CLOCK_ROUTE)
        except AdminApiError as exc:
            return exc.status not in (404, 405)
        except NeedsLetterbox:
            return False
        except click.ClickException:
            return True  # unreachable now: keep the original error
        return True

    def post_json(self, path: str, body: Any, timeout: float | None = None) -> Any:
        return self.request("POST", path, body, timeout=timeout).json()


def _reason(raw: bytes, fallback: str) -> str:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        text = raw.decode("utf-8", "replace").strip()
        return text[:500] or str(fallback)
    if isinstance(value, dict) and value.get("reason"):
        return str(value["reason"])
    return str(fallback)


@dataclass
class AdminContext:
    """What one `letterbox admin|dlq ...` invocation works with."""

    client: AdminClient
    output: str = "human"

    @property
    def json(self) -> bool:
        return self.output == "json"

    def report(self, message: str, result: Any) -> None:
        """`result` as JSON with --output json, else the sentence `message`."""
        if self.json:
            echo_json(result)
        else:
            click.echo(message)

    def done(self, message: str, **fields: Any) -> None:
        """Report a call that returns no body (204)."""
        self.report(message, {"result": "ok", **fields})

    def names(self, values: Any) -> None:
        if self.json:
            echo_json(values)
        else:
            for v in values or []:
                click.echo(v)


pass_admin = click.make_pass_decorator(AdminContext)


def _set_output(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    obj = ctx.find_object(AdminContext)
    if obj is not None:
        obj.output = value.lower()


# Every leaf command takes --output too, so it can follow the arguments.
output_option = click.option(
    "--output", "-o", type=OUTPUT_CHOICE, default=None, expose_value=False, callback=_set_output,
    is_eager=False, help="human (default) or json; same as the group's --output.",
)


def admin_command(group: click.Group | None, name: str, argument: str | None = None,
                  argument_type: Any = None) -> Callable[[Callable[..., Any]], click.Command]:
    """The decorators every admin call command carries, in one: command `name` of `group`
    (a free command when None), its ARGUMENT, the options written below this decorator,
    then --output; the function gets the AdminContext first."""

    def decorate(f: Callable[..., Any]) -> click.Command:
        f = output_option(pass_admin(f))
        params: list[click.Parameter] = f.__click_params__  # type: ignore[attr-defined]
        params.insert(0, params.pop())  # --output after the options written below
        if argument is not None:
            f = click.argument(argument, type=argument_type)(f)
        return (group.command if group is not None else click.command)(name)(f)

    return decorate


def _check_admin_url(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    parsed = urllib.parse.urlsplit(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise click.BadParameter(
            f"invalid admin URL {value!r}: use http://HOST:PORT (the broker's --admin-port, default 8080)"
        )
    return value


def admin_group_options(f: Any) -> Any:
    """--admin-url, --output and the auth/TLS options on the `admin` and `dlq` groups."""
    f = auth_options(f)
    f = click.option(
        "--output", "-o", type=OUTPUT_CHOICE, default="human", show_default=True,
        help="human: tables and `key: value` lines; json: machine-readable JSON.",
    )(f)
    f = click.option(
        "--admin-url", envvar=ADMIN_URL_ENV, default=DEFAULT_ADMIN_URL, show_default=True,
        callback=_check_admin_url,
        help="Admin API base URL (env LETTERBOX_ADMIN_URL).",
    )(f)
    return f
