"""Who is calling: bearer tokens from ``[[api.tokens]]``, each a named caller with scopes.

A route declares the scope it needs with a parameter ``caller: Reader`` (``Registrar``,
``Admin``) and gets the :class:`Caller` (whose name its settlements belong to). Without a
valid ``Authorization: Bearer TOKEN`` the answer is 401 with ``WWW-Authenticate: Bearer``
(another scheme, Basic included, is no token); a valid token without the scope is 403
naming it (``register`` does not imply ``read``). With no tokens configured (allowed only
on loopback, see :mod:`watcher.config.api`) every request is the one :data:`ANONYMOUS`
caller holding every scope, so the API answers as it did before tokens existed.

A presented token is hashed and compared with every configured digest in constant time
(``hmac.compare_digest`` over SHA-256 digests, no early exit): neither a token's length nor
its prefix leaks through timing. The token itself is never logged or answered.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError, error_response
from watcher.config.api import SCOPES, ApiConfig


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: the ``[[api.tokens]]`` name and the scopes its token holds."""

    name: str
    """The token's name; ``"anonymous"`` when no tokens are configured."""
    scopes: frozenset[str]
    """A subset of ``{"read", "register", "admin"}``."""


ANONYMOUS = Caller("anonymous", frozenset(SCOPES))
"""The one caller of an API without tokens: every scope."""

_AUTHORIZATION = "Authorization"


class Unauthenticated(ApiError):
    """No valid bearer token: answered 401 with ``WWW-Authenticate: Bearer``."""

    def __init__(self, message: str) -> None:
        super().__init__(401, f"{_AUTHORIZATION}: {message}", fields=[_AUTHORIZATION])


class Callers:
    """The configured tokens, by digest: who a presented ``Authorization`` header is."""

    def __init__(self, api: ApiConfig) -> None:
        self._tokens = [(t.digest, Caller(t.name, frozenset(t.scopes))) for t in api.tokens]

    @property
    def open(self) -> bool:
        """Whether no tokens are configured (every request is :data:`ANONYMOUS`)."""
        return not self._tokens

    def identify(self, authorization: str | None) -> Caller:
        """The caller a header names; :class:`Unauthenticated` if it names none."""
        if self.open:
            return ANONYMOUS
        if not authorization:
            raise Unauthenticated("a Bearer token is required")
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            raise Unauthenticated("only Bearer tokens are accepted")
        digest = hashlib.sha256(credentials.strip().encode("utf-8", "surrogatepass")).digest()
        found: Caller | None = None
        for known, caller in self._tokens:  # no early exit: the same work for every token
            if hmac.compare_digest(known, digest):
                found = caller
        if found is None:
            raise Unauthenticated("the Bearer token is not valid")
        return found


class Require:
    """A FastAPI dependency: the :class:`Caller`, who must hold ``scope`` (else 401/403).

    The tokens are the ones :func:`install_auth` put on the application (or the
    ``callers`` given here): an application without them refuses every request.
    """

    def __init__(self, scope: str, callers: Callers | None = None) -> None:
        if scope not in SCOPES:
            raise ValueError(f"unknown scope {scope!r}")
        self.scope = scope
        """The scope the route needs (the OpenAPI document lists it per operation)."""
        self.callers = callers

    async def __call__(self, request: Request) -> Caller:
        return self.check(request.app, request.headers.get("authorization"))

    def check(self, app: object, authorization: str | None) -> Caller:
        """The caller an ``Authorization`` header names on ``app`` (the application whose
        state holds the tokens), holding this scope; the 401/403 :class:`ApiError` if not.
        What the dependency does, for a route that reads the header itself."""
        callers = self.callers or getattr(getattr(app, "state", None), "callers", None)
        if not isinstance(callers, Callers):
            raise Unauthenticated("this API has no tokens installed")  # fail closed
        caller = callers.identify(authorization)
        if self.scope not in caller.scopes:
            raise ApiError(
                403,
                f"{_AUTHORIZATION}: the token of caller {caller.name!r} lacks the "
                f"{self.scope!r} scope this route needs",
                fields=[_AUTHORIZATION],
                scope=self.scope,
            )
        return caller


def require(deps: ApiDeps, scope: str) -> Require:
    """The dependency a route needing ``scope`` declares (``Depends(require(deps, "read"))``);
    the aliases below are the same with the application's tokens."""
    return Require(scope, Callers(deps.config.api))


Reader = Annotated[Caller, Depends(Require("read"))]
"""A route parameter ``caller: Reader``: the caller, holding ``read``."""
Registrar = Annotated[Caller, Depends(Require("register"))]
"""A route parameter ``caller: Registrar``: the caller, holding ``register``."""
Admin = Annotated[Caller, Depends(Require("admin"))]
"""A route parameter ``caller: Admin``: the caller, holding ``admin``."""


def install_auth(app: FastAPI, api: ApiConfig) -> None:
    """Check callers against ``api.tokens``, and answer :class:`Unauthenticated` in the error
    shape with ``WWW-Authenticate: Bearer``."""
    callers = app.state.callers = Callers(api)

    @app.exception_handler(Unauthenticated)
    async def _unauthenticated(_: Request, exc: Unauthenticated) -> JSONResponse:
        response = error_response(exc.status, exc.message, **exc.extra)
        response.headers["WWW-Authenticate"] = 'Bearer realm="finality"'
        return response

    # A body that is not JSON at all is refused by FastAPI before any dependency runs, so a
    # stranger would get the 422 (and learn about the route's input) before the 401.
    invalid = app.exception_handlers[RequestValidationError]

    @app.exception_handler(RequestValidationError)
    async def _invalid_input(request: Request, exc: RequestValidationError) -> Response:
        if not callers.open and _needs_token(request.scope.get("route")):
            try:
                callers.identify(request.headers.get("authorization"))
            except Unauthenticated as problem:
                return await _unauthenticated(request, problem)
        answered = invalid(request, exc)  # errors.install's handler: a coroutine
        return await answered if inspect.isawaitable(answered) else answered


def _needs_token(route: object) -> bool:
    """Whether a matched route declares a :class:`Require` (some scope) anywhere in its
    dependencies; False for an open one (``/healthz`` by default, a source's webhook)."""
    dependant = getattr(route, "dependant", None)
    todo = [] if dependant is None else [dependant]
    while todo:
        current = todo.pop()
        if isinstance(current.call, Require):
            return True
        todo.extend(current.dependencies)
    return False
