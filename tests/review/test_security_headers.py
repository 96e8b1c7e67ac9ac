"""Security headers and a page that runs under a strict CSP: no inline script or style, htmx
vendored and configured for CSP, no CDN, and HSTS when served over TLS."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse

from tests.review.rows import build_run

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


@pytest.fixture
def pages(client_for, checkpoint_keyring) -> dict[str, str]:  # type: ignore[no-untyped-def]
    build_run(checkpoint_keyring, run_id="run-csp", owner_worker="w1")
    client = client_for("admin")
    urls = [
        reverse("review:runs"),
        reverse("review:run", args=["run-csp"]),
        reverse("review:trace"),
        reverse("review:health"),
        "/no-such-page/",
    ]
    result = {url: client.get(url) for url in urls}
    result[reverse("login")] = client_for("anonymous").get(reverse("login"))
    return result


def test_it_sends_a_strict_content_security_policy_and_the_other_headers(pages) -> None:
    for url, response in pages.items():
        csp = response["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "style-src 'self'" in csp, url
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, url
        assert "frame-ancestors 'none'" in csp
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"


def test_its_pages_have_no_inline_script_style_or_event_handler(pages) -> None:
    for url, response in pages.items():
        html = response.content.decode()
        for script in re.findall(r"<script\b[^>]*>", html):
            assert "src=" in script, f"inline script on {url}"
        assert "<style" not in html, url
        assert not re.search(r"\sstyle=", html), url
        assert not re.search(r"\son[a-z]+=", html), f"inline event handler on {url}"
        assert not re.search(r"\shx-on", html), url


def test_it_configures_htmx_for_csp_and_loads_it_from_this_origin(pages) -> None:
    html = pages[reverse("review:runs")].content.decode()
    config = re.search(r'<meta name="htmx-config" content=\'([^\']+)\'>', html).group(1)
    assert '"includeIndicatorStyles": false' in config and '"allowEval": false' in config
    assert '<script src="/static/review/htmx.min.js" defer></script>' in html
    assert not re.search(r'(src|href)="(https?:)?//', html), "nothing is loaded from another origin"


def test_the_vendored_htmx_keeps_its_licence_header() -> None:
    path = finders.find("review/htmx.min.js")
    assert path is not None
    head = Path(path).read_text()[:400]
    assert head.startswith("/*! htmx 2.") and "0BSD" in head


def test_no_template_links_a_cdn() -> None:
    for template in TEMPLATES.rglob("*.html"):
        text = template.read_text()
        assert not re.search(r'(src|href)="(https?:)?//', text), template.name


def test_hsts_and_secure_cookies_are_off_on_plain_http_by_default(pages) -> None:
    """The embedded default serves plain HTTP on localhost; HSTS there would lock browsers out.
    ``test_deploy_check`` proves RATCHET_TLS=1 turns them on."""
    response = pages[reverse("review:runs")]
    assert "Strict-Transport-Security" not in response
