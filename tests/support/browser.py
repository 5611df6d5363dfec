"""Debian's chromium, driven by Playwright's Python API, for the console's browser tests.

Only the system's browser is used (``/usr/bin/chromium``, installed by
scripts/bootstrap.sh): Playwright never downloads one here. Each :class:`ConsolePage`
records every request the page makes and every dialog it opens, so a test can assert that
nothing left for another origin and that no datum ran as script.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.anvil import ROOT, in_ci

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Request

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
"""Flags of every launch: headless, as root in CI, and no traffic of the browser's own."""

ARTIFACTS = ROOT / "tests" / "artifacts"
"""Where screenshots go (gitignored) so a person can look at what the tests saw."""


def need_chromium() -> None:
    """Skip (fail under CI) when the browser or Playwright is missing."""
    missing = None
    if shutil.which("chromium") is None and not Path(CHROMIUM).exists():
        missing = f"{CHROMIUM} (apt-get install -y chromium; scripts/bootstrap.sh does it as root)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "the playwright package (requirements-dev.lock)"
    if missing is not None:
        if in_ci():
            pytest.fail(f"{missing} is required under CI=true")
        pytest.skip(f"{missing} is not available")


@contextmanager
def chromium() -> Iterator[Browser]:
    """One headless chromium (a fresh temporary profile) for a module's tests."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class ConsolePage:
    """A console tab: its page, the URLs it requested and the dialogs it opened."""

    page: Page
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    resumed_from: list[str | None] = field(default_factory=list)
    """The ``Last-Event-ID`` each event stream request carried, in order."""

    def foreign(self, origin: str) -> list[str]:
        """Requests that went anywhere but ``origin`` (``data:`` and ``blob:`` are local)."""
        return [
            u
            for u in self.requests
            if not (u.startswith(origin + "/") or u.startswith(("data:", "blob:")))
        ]

    def shot(self, name: str) -> Path:
        """A full-page screenshot under tests/artifacts/."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"console-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@contextmanager
def console_tab(browser: Browser, base_url: str, token: str | None) -> Iterator[ConsolePage]:
    """A fresh context (its own session storage) with the console open and ``token``
    pasted into its form, as an operator would."""
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        tab = ConsolePage(page)

        def record(request: Request) -> None:
            tab.requests.append(request.url)
            if request.url.split("?")[0].endswith("/v1/events"):
                tab.resumed_from.append(request.headers.get("last-event-id"))

        page.on("request", record)

        def dismiss(dialog: object) -> None:
            tab.dialogs.append(str(getattr(dialog, "message", "")))
            dialog.dismiss()  # type: ignore[attr-defined]

        page.on("dialog", dismiss)
        page.goto("/ui/")
        if token is not None:
            page.fill("#token", token)
            page.click("#token-form button[type=submit]")
        yield tab
    finally:
        context.close()
