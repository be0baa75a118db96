"""The browser workspace in a real browser: Debian's headless Chromium, driven by Playwright.

`make run`'s own session (the bot, the embedded simulator, FakeSlack, the page's server) is
driven end to end the way a newcomer would: the slash command typed into the composer, Request
launch pressed, the form filled, an approver (then the second one: above $100/h the demo policy
wants two) approving behind the confirm dialog, AI Reserve's clock moved with the page's own
control, and the owner finding the cluster running and its SSH details in their DM. Screenshots
of each step are saved and checked.

Nothing downloads a browser: Chromium is the system's (.ci/run installs the `chromium` package);
without it this test skips on a developer's machine and fails in CI.
"""

from __future__ import annotations

import asyncio
import io
import os
import struct
from pathlib import Path

import pytest

from bot.config.settings import load_settings
from devslack.browser import BrowserWorkspace
from devslack.local import session
from tests.conftest import in_ci

# A real Chromium: `make test-boundary` (tests/conftest.py).
pytestmark = pytest.mark.boundary

CHROMIUM = Path("/usr/bin/chromium")
# Root needs --no-sandbox; the rest keeps Chromium off the network and quiet (this machine has
# none: every background connection would be refused).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-quic"]
VIEWPORT = {"width": 1280, "height": 860}
WAIT_MS = 60_000  # generous: two cores shared by a whole test suite
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDevslackBrowserTestKey alice@example"


def _require_chromium() -> None:
    missing = None
    if not CHROMIUM.exists():
        missing = f"{CHROMIUM} (Debian's chromium package)"
    else:
        try:
            import playwright.async_api  # noqa: F401
        except ImportError:
            missing = "the playwright package (the test extra)"
    if missing is not None:
        if in_ci():
            pytest.fail(f"the browser workspace's test needs {missing} in CI", pytrace=False)
        pytest.skip(f"needs {missing}")


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert len(data) > 10_000, f"{path.name} is nearly empty ({len(data)} bytes)"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


async def test_a_launch_from_quote_to_ssh_details_in_chromium(tmp_path, monkeypatch):
    _require_chromium()
    from playwright.async_api import async_playwright, expect

    monkeypatch.chdir(tmp_path)  # no .env; the SQLite file lands here
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}"})
    read_end, write_end = os.pipe()  # the terminal waits on it; "quit" ends the session
    terminal_input = os.fdopen(read_end, "r")
    output = io.StringIO()
    served: asyncio.Future[BrowserWorkspace] = asyncio.get_running_loop().create_future()
    running = asyncio.create_task(session(settings, input=terminal_input, output=output,
                                          on_browser=served.set_result))
    shots = tmp_path / "screenshots"
    shots.mkdir()
    try:
        browser_ws = await asyncio.wait_for(asyncio.shield(served), 120)
        assert browser_ws.url.startswith("http://127.0.0.1:")
        assert f"The same workspace in a browser: {browser_ws.url}" in output.getvalue()
        async with async_playwright() as playwright:
            context = await playwright.chromium.launch_persistent_context(
                str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM),
                headless=True, args=FLAGS, viewport=VIEWPORT)
            try:
                page = context.pages[0] if context.pages else await context.new_page()
                page.set_default_timeout(WAIT_MS)
                errors: list[str] = []
                page.on("pageerror", lambda error: errors.append(str(error)))
                await _launch_as_alice(page, expect, browser_ws.url, shots)
                for approver, name in (("U0BOB", "bob"), ("U0CAROL", "carol")):
                    await _approve(page, expect, shots, approver, name)
                await page.locator("[data-line='sim advance 1m']").click()
                await _see_it_running(page, expect, shots)
                assert errors == []
            finally:
                await context.close()
    finally:
        os.write(write_end, b"quit\n")
        os.close(write_end)
        await asyncio.wait_for(running, 120)
        terminal_input.close()
    for name in ("1-form", "2-confirm-bob", "3-running", "4-dm"):
        assert _png_size(shots / f"{name}.png") == (VIEWPORT["width"], VIEWPORT["height"])


async def _launch_as_alice(page, expect, url: str, shots: Path) -> None:
    """alice in #general: the quote, Request launch, the form (hints, placeholders) sent."""
    await page.goto(url)
    await expect(page.locator("#title")).to_have_text("# general")
    await page.fill("#compose", "/cluster quote h100x8 nodes=4")
    await page.press("#compose", "Enter")
    quote = page.locator(".msg").filter(has_text="Only visible to you").filter(
        has=page.get_by_role("button", name="Request launch"))
    await expect(quote.locator(".header")).to_contain_text("4 × 8 NVIDIA H100 80GB SXM")
    await expect(quote.get_by_role("button", name="Request launch")).to_have_class(
        "btn btn-primary")
    await quote.get_by_role("button", name="Request launch").click()
    form = page.locator(".modal")
    await expect(form.locator(".modal-title")).to_have_text("Request launch")
    name = form.locator(".block.input").filter(has_text="Cluster name")
    await expect(name.locator("input")).to_have_attribute("placeholder", "dsv3-serve")
    ports = form.locator(".block.input").filter(has_text="Ports")
    await expect(ports.locator(".hint")).to_contain_text("Comma-separated")
    await name.locator("input").fill("llama-demo")
    await form.locator(".block.input").filter(has_text="SSH public keys").locator(
        "textarea").fill(KEY)
    await page.screenshot(path=str(shots / "1-form.png"))
    await form.get_by_role("button", name="Ask for approval").click()
    await expect(form).to_have_count(0)
    await expect(page.locator(".msg").filter(has_text="Waiting for approval")).to_be_visible()


async def _approve(page, expect, shots: Path, approver: str, name: str) -> None:
    """Become `approver`, find the card in #approvals, approve it behind its confirm."""
    await page.select_option("#person", approver)
    await page.locator("#sidebar [data-place=C0APPROVALS]").click()
    await expect(page.locator("body")).to_have_attribute("data-viewer", approver)
    await expect(page.locator("#title")).to_have_text("# approvals")
    card = page.locator(".msg").filter(has_text="asks to launch").last
    await card.get_by_role("button", name="Approve").click()
    dialog = page.locator(".dialog")
    await expect(dialog.locator(".dialog-title")).to_have_text("Approve $124.85/h?")
    if name == "bob":
        await page.screenshot(path=str(shots / "2-confirm-bob.png"))
    await dialog.locator("[data-answer=yes]").click()
    # The card is edited in place: one of two approvals, then both and the launch.
    await expect(card).to_contain_text("launched as" if name == "carol" else "1 of 2")


async def _see_it_running(page, expect, shots: Path) -> None:
    """alice again: the cluster's message in #general edited to Running, the DM with SSH."""
    await page.select_option("#person", "U0ALICE")
    await page.locator("#sidebar [data-place=C0GENERAL]").click()
    await expect(page.locator("body")).to_have_attribute("data-viewer", "U0ALICE")
    cluster = page.locator(".msg").filter(has_text="Running since").filter(
        has_text="llama-demo")
    await expect(cluster.locator(".edited")).to_have_text("(edited)")
    await expect(cluster.get_by_role("button", name="Terminate")).to_have_class(
        "btn btn-danger")
    await page.screenshot(path=str(shots / "3-running.png"))
    await page.locator("#sidebar [data-place^=D]").click()
    ready = page.locator(".msg").filter(has_text="is ready")
    await expect(ready.locator("pre").first).to_contain_text("ssh -p")
    await expect(ready).to_contain_text("llama-demo")
    await page.screenshot(path=str(shots / "4-dm.png"))
