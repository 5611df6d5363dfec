"""``/ui/``: the console's HTML, JavaScript and CSS, served from the package with strict
headers.

The files are data-free: the page fetches everything from ``/v1`` itself. They are read
from ``watcher/ui/static/`` (the package ``watcher.ui``, shipped as package data, no build step, nothing from a CDN)
once, when the router is built. Only the files found there are served; any other name is
the API's 404. Every answer carries a Content-Security-Policy that allows scripts, styles,
images and connections from this origin only, with no inline script and no framing, and
``X-Content-Type-Options: nosniff``, so even a datum that slipped into the page as markup
could run nothing.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from watcher.api.errors import ApiError

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
"""The console's Content-Security-Policy: this origin only, no inline script, no frames."""

HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
"""Headers of every ``/ui/`` answer."""

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
"""What each shipped file is (a file of another type is not served)."""


def static_files() -> dict[str, tuple[bytes, str]]:
    """The shipped files by name: (bytes, media type)."""
    out: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files("watcher.ui").joinpath("static").iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if entry.is_file() and suffix in MEDIA_TYPES:
            out[entry.name] = (entry.read_bytes(), MEDIA_TYPES[suffix])
    return out


def router() -> APIRouter:
    """The console routes (left out of the OpenAPI document: they serve no JSON)."""
    api = APIRouter(include_in_schema=False)
    files = static_files()

    def answer(name: str) -> Response:
        found = files.get(name)
        if found is None:
            raise ApiError(404, f"path: /ui/{name} is not part of the console", fields=["path"])
        body, media_type = found
        return Response(body, media_type=media_type, headers=HEADERS)

    @api.get("/ui")
    def console_root() -> Response:
        """``/ui`` without its slash: the console's address is ``/ui/``."""
        return RedirectResponse("/ui/", status_code=308, headers=HEADERS)

    @api.get("/ui/")
    def console_page() -> Response:
        """The console's page."""
        return answer("index.html")

    @api.get("/ui/{name}")
    def console_asset(name: str) -> Response:
        """One of the console's scripts, styles or images."""
        return answer(name)

    return api
