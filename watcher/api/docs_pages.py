"""The API explorer, served whole by the daemon: ``/docs`` (Swagger UI) and ``/redoc``.

FastAPI's own pages load Swagger UI and ReDoc from a CDN: blank on a machine without
internet, and every visit announced to a third party. Here the pages are FastAPI's, but
every asset they load (scripts, stylesheet, favicon) comes from ``/docs-assets/``, the
files the ``fastapi-offline`` package ships (Swagger UI 5, which reads OpenAPI 3.1, and
ReDoc 2); no Google fonts. tests/e2e/test_api.py checks that no asset URL leaves the host.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs-assets"
"""Where the explorer's files are served (read-only, from the installed package)."""


def install_docs(app: FastAPI, openapi_url: str = "/openapi.json") -> None:
    """Mount the assets and the two pages on ``app`` (built with ``docs_url=None`` and
    ``redoc_url=None``, so FastAPI's CDN pages are never served)."""
    static = files("fastapi_offline") / "static"
    app.mount(ASSETS, StaticFiles(directory=str(static)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        spec, assets = _urls(request, openapi_url)
        return get_swagger_ui_html(
            openapi_url=spec,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{assets}/swagger-ui-bundle.js",
            swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        spec, assets = _urls(request, openapi_url)
        return get_redoc_html(
            openapi_url=spec,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{assets}/redoc.standalone.js",
            redoc_favicon_url=f"{assets}/favicon.png",
            with_google_fonts=False,
        )


def _urls(request: Request, openapi_url: str) -> tuple[str, str]:
    """The document's and the assets' paths, under the app's root path (behind a proxy)."""
    root = request.scope.get("root_path", "")
    return f"{root}{openapi_url}", f"{root}{ASSETS}"
