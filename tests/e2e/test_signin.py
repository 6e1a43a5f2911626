"""Signing in from a browser (N2), in Chromium: the login URL becomes a session cookie and the UI works, the
sign-in page takes a pasted token, and a cross-site form cannot post to the service."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import App

pytestmark = pytest.mark.browser


def test_the_login_url_sets_a_session_cookie_and_the_ui_works(browser: Any, app: App) -> None:
    context = browser.new_context(base_url=app.url)
    try:
        page = context.new_page()
        page.goto(f"/?token={app.token}")
        assert page.url == f"{app.url}/"  # the token left the address bar
        cookies = {c["name"]: c for c in context.cookies()}
        session = cookies["contextshift_session"]
        assert session["httpOnly"] is True and session["sameSite"] == "Strict" and session["value"] != app.token
        assert page.evaluate("document.cookie").find("contextshift_session") == -1  # the script cannot read it
        expect(page.get_by_role("heading", name="Welcome to contextshift")).to_be_visible()
        page.locator("#import-examples").click()  # a cookie-signed change: it carries the CSRF header
        expect(page.locator(".sidebar")).to_contain_text("Example", timeout=15_000)
        assert len(app.api("GET", "/bots", expect=200)["bots"]) >= 1
    finally:
        context.close()


def test_without_a_session_the_sign_in_page_takes_a_token(browser: Any, app: App) -> None:
    context = browser.new_context(base_url=app.url)
    try:
        page = context.new_page()
        page.goto("/")
        expect(page.get_by_role("heading", name="Sign in to contextshift")).to_be_visible()
        page.locator("#signin-token").fill("cs_this-is-not-a-token-00000")
        page.locator("#signin-submit").click()
        expect(page.locator("#signin-error")).to_have_text("That token is not valid.")
        page.locator("#signin-token").fill(app.token)
        page.locator("#signin-submit").click()
        expect(page.get_by_role("heading", name="Welcome to contextshift")).to_be_visible()
        page.goto("/?token=cs_wrong-token-in-a-link-000000")
        expect(page.locator("#signin-error")).to_have_text("That token is not valid.")
    finally:
        context.close()


class _EvilPage(BaseHTTPRequestHandler):
    target = ""

    def do_GET(self) -> None:
        body = (
            "<!doctype html><title>Win a prize</title>"
            f'<form id="f" method="post" action="{self.target}/api/v2/bots" enctype="text/plain">'
            '<input name=\'{"name": "planted", "x": "\' value=\'"}\'></form>'
            "<script>document.getElementById('f').submit()</script>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        return


@pytest.fixture
def evil_site(app: App) -> Iterator[str]:
    """Another site (same machine, another port: the session cookie is even sent to the service)."""
    handler = type("Evil", (_EvilPage,), {"target": app.url})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_cross_site_form_post_is_refused(browser: Any, app: App, evil_site: str) -> None:
    context = browser.new_context(base_url=app.url)
    try:
        page = context.new_page()
        page.goto(f"/?token={app.token}")  # signed in: the attack rides on the session
        answers: list[int] = []
        posted = lambda r: r.request.method == "POST" and r.url.endswith("/api/v2/bots")  # noqa: E731
        page.on("response", lambda r: answers.append(r.status) if posted(r) else None)
        with page.expect_navigation(url=f"{app.url}/api/v2/bots"):
            page.goto(evil_site)
        assert answers == [403]
        assert "ORIGIN_NOT_ALLOWED" in page.content()
    finally:
        context.close()
    assert app.api("GET", "/bots", expect=200)["bots"] == []
