"""Reader-page fixtures: data builders over the services, and Playwright on Debian's Chromium.

Browser tests drive `/usr/bin/chromium` (installed by tests/run.sh; never downloaded) against
pytest-django's live server, which also serves static files (django.contrib.staticfiles).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from knowledge import services
from knowledge.models import Document
from workspaces import services as workspace_services
from workspaces.models import Namespace

# Playwright's sync API runs an event loop in this thread; the ORM calls in the tests are fine.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"

# Installed before any page script runs: records dialogs, CSP violations and a canary that
# injected markup would have to call to prove it ran.
PAGE_HOOKS = """
(() => {
  window.__kbEvents = [];
  const record = (kind, detail) => { window.__kbEvents.push({kind, detail: String(detail)}); };
  for (const name of ["alert", "confirm", "prompt", "print"]) {
    window[name] = (...args) => { record(name, args.join(" ")); return name === "confirm" ? false : null; };
  }
  window.__kbPwned = (detail) => record("pwned", detail);
  document.addEventListener("securitypolicyviolation", (event) => {
    record("csp", `${event.violatedDirective} ${event.blockedURI} ${event.sourceFile}:${event.lineNumber}`);
  });
  window.addEventListener("error", (event) => record("error", event.message));
})();
"""


def make_namespace(member: Any, slug: str, **fields: Any) -> Namespace:
    return workspace_services.namespace_create(actor=member.actor, slug=slug, **fields)


def make_document(member: Any, namespace: Namespace, path: str, content: str, **fields: Any) -> Document:
    return services.document_create(actor=member.actor, namespace=namespace, path=path, content=content, **fields)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright import sync_api  # requirements/local.txt; a missing package fails loudly

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: tests/run.sh installs Debian's chromium (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


class BrowserSession:
    """A logged-in browser context on the live server, with the page hooks installed."""

    def __init__(self, browser: Any, base_url: str, user: Any, *, bypass_csp: bool = False) -> None:
        from django.conf import settings
        from django.test import Client

        client = Client()
        client.force_login(user)
        self.base_url = base_url
        self.context = browser.new_context(
            base_url=base_url, viewport={"width": 1400, "height": 900}, bypass_csp=bypass_csp
        )
        self.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url)
        self.context.add_cookies(
            [{"name": settings.SESSION_COOKIE_NAME, "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
              "url": base_url}]
        )  # fmt: skip
        self.context.add_init_script(PAGE_HOOKS)
        self.page = self.context.new_page()
        self.console: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda message: self.console.append(f"{message.type}: {message.text}"))
        self.page.on("request", lambda request: self.requests.append(request.url))

    def foreign_requests(self) -> list[str]:
        """Requests that left the live server (a CDN, a tracker): there must be none."""
        return [url for url in self.requests if not url.startswith((self.base_url, "data:", "blob:", "about:"))]

    def open(self, path: str, *, wait: str = "load") -> Any:
        response = self.page.goto(path, wait_until=wait)
        return response

    def events(self) -> list[dict[str, str]]:
        return self.page.evaluate("window.__kbEvents || []")

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        target = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(target), full_page=True)
        return target

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def browse(browser: Any, live_server: Any, transactional_db: Any) -> Iterator[Any]:
    """browse(member, bypass_csp=False) -> BrowserSession logged in as that member."""
    sessions: list[BrowserSession] = []

    def open_session(member: Any, *, bypass_csp: bool = False) -> BrowserSession:
        session = BrowserSession(browser, live_server.url, member.user, bypass_csp=bypass_csp)
        sessions.append(session)
        return session

    yield open_session
    for session in sessions:
        session.close()
