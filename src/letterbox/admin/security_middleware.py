# Authentication and authorization of admin HTTP requests.
#
# Credentials come as Pulsar's admin clients send them: `Authorization: Bearer
# <token>`, `Authorization: Basic <base64 user:password>`, or the verified
# client certificate of an https:// connection (its common name). They are
# checked by service.authentication (the same providers as the binary port);
# the role found is request["role"] for the handlers. The route's rule
# (access_rules.py) is then checked by service.authorization.
#
# Answers: no or bad credentials while authentication is enabled -> 401 with
# {"reason"} and a WWW-Authenticate header; a role without the right -> 403
# with {"reason"}. OPEN routes skip both. A request that matches no route
# still needs valid credentials before it learns 404/405.
# With authentication disabled the role is None; with authorization disabled
# every authenticated request passes.
from __future__ import annotations

import asyncio
import base64
import binascii
from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.access_rules import Access, access_for
from letterbox.admin.http_errors import Handler, error_response
from letterbox.security.authentication import AuthenticationFailed, Credentials
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from aiohttp.typedefs import Middleware

    from letterbox.broker import BrokerService
    from letterbox.security.authorization import AuthorizationService

CHALLENGE = 'Bearer realm="letterbox", Basic realm="letterbox"'


def security_middleware(service: BrokerService) -> Middleware:
    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        resource = request.match_info.route.resource
        rule = access_for(request.method, resource.canonical) if resource is not None else None
        request["role"] = None
        if rule is Access.OPEN:
            return await handler(request)
        authn = service.authentication
        if authn.enabled:
            try:
                creds = credentials_of(request)
                if creds.method == "basic":  # password hashes (bcrypt) are slow: off the loop
                    role = await asyncio.get_running_loop().run_in_executor(None, authn.authenticate, creds)
                else:
                    role = authn.authenticate(creds)
            except AuthenticationFailed as exc:
                return unauthorized(f"Authentication required: {exc}")
            request["role"] = role
        authz = service.authorization
        if rule is not None and authz.enabled:
            role = request["role"]
            if role is None:
                return unauthorized("Authentication required: authorization is enabled and no role is known")
            if not allowed(authz, rule, role, request.match_info):
                return error_response(403, f"Role {role} is not authorized: this call needs {_needs(rule, request)}")
        return await handler(request)

    return check


def unauthorized(reason: str) -> web.Response:
    response = error_response(401, reason)
    response.headers["WWW-Authenticate"] = CHALLENGE
    return response


def credentials_of(request: web.Request) -> Credentials:
    cn = peer_common_name(request)
    header = request.headers.get("Authorization", "").strip()
    if not header:
        return Credentials("tls", b"", cn) if cn else Credentials("", b"", None)
    scheme, _, value = header.partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer" and value:
        return Credentials("token", value.encode(), cn)
    if scheme.lower() == "basic" and value:
        try:
            decoded = base64.b64decode(value, validate=True)
        except binascii.Error:
            raise AuthenticationFailed("the Basic credentials are not valid base64") from None
        return Credentials("basic", decoded, cn)
    raise AuthenticationFailed(f"unsupported Authorization header scheme {scheme!r}; use Bearer or Basic")


def peer_common_name(request: web.Request) -> str | None:
    """The common name of the verified client certificate, if the connection has one."""
    if request.transport is None:
        return None
    cert: Any = request.transport.get_extra_info("peercert")
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def allowed(authz: AuthorizationService, rule: Access, role: str, match: Any) -> bool:
    tenant = match.get("tenant")
    if rule is Access.SUPER_USER or tenant is None:
        return authz.is_super_user(role)
    if rule is Access.TENANT_ADMIN:
        return authz.is_tenant_admin(role, tenant)
    if "topic" not in match:
        return rule is Access.CONSUME and authz.can_consume_namespace(role, f"{tenant}/{match['namespace']}")
    topic = _topic(match)
    if rule is Access.LOOKUP:
        return authz.can_lookup(role, topic)
    return authz.can_consume(role, topic, match.get("subscription"))


def _topic(match: Any) -> TopicName:
    domain = match.get("domain", "persistent")
    return TopicName.parse(f"{domain}://{match['tenant']}/{match['namespace']}/{match['topic']}")


def _needs(rule: Access, request: web.Request) -> str:
    match = request.match_info
    if rule is Access.SUPER_USER or "tenant" not in match:
        return "a super user role"
    if rule is Access.TENANT_ADMIN:
        return f"a super user or an admin role of tenant {match['tenant']}"
    where = f"topic {_topic(match)}" if "topic" in match else f"namespace {match['tenant']}/{match['namespace']}"
    what = "produce or consume" if rule is Access.LOOKUP else "consume"
    return f"{what} permission on {where} (or tenant admin)"
