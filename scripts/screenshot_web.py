"""Play one episode through the server's ``/web`` page in headless Chromium and save a screenshot of it.

    pip install -c constraints/env.txt . playwright==1.65.2   # the lean set and Playwright's Python API
    apt-get install chromium                                   # Debian's browser: no Playwright download
    python scripts/screenshot_web.py --url http://127.0.0.1:7860 --output outputs/web/episode.png

What a newcomer does on the page: Reset (a medium scenario: the task, the prompt, the scenario), paste a
plan (here the kernel's exact optimum of the scenario the page shows) into the plan box, Run step; the
page then shows the verdict and the reward. The script checks that the reward shown is 1.0 and writes the
full-page screenshot; ``scripts/check_space_image.sh`` runs it against the image with ``SCREENSHOT=1``.
Chromium runs with the flags a closed network needs (no background networking, no sync, no QUIC).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from fleet_rl.kernel import solve
from fleet_rl.prompts import format_answer
from fleet_rl.scenario import Scenario

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 60_000


def _field(page, name: str) -> str:
    """The value the page shows beside the observation field ``name`` (its key/value tables), the latest
    where the reset's table and the step's both show it."""
    text = page.inner_text("body")
    matches = re.findall(rf"\n{re.escape(name)}\n(.+?)\n", text)
    if not matches:
        raise RuntimeError(f"the page shows no {name!r} field:\n{text[:2000]}")
    return matches[-1]


def play(url: str, output: Path, browser_path: str = CHROMIUM) -> dict:
    """Reset, paste the optimum, step; save the screenshot; return what the page showed."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path, headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url.rstrip("/") + "/web/", wait_until="domcontentloaded", timeout=TIMEOUT_MS)
            page.get_by_role("button", name="Reset").click(timeout=TIMEOUT_MS)
            page.get_by_text('{"cluster"').first.wait_for(timeout=TIMEOUT_MS)
            scenario = Scenario.from_json(_field(page, "scenario"))
            plan = format_answer(solve(scenario).plan)
            page.get_by_role("textbox").first.fill(plan)
            page.get_by_role("button", name="Run step").click(timeout=TIMEOUT_MS)
            page.get_by_text("plan_reward").first.wait_for(timeout=TIMEOUT_MS)  # the step's observation
            reward = float(_field(page, "reward"))
            output.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(output), full_page=True)
        finally:
            browser.close()
    return {"url": url, "jobs": len(scenario.jobs), "reward_shown": reward, "screenshot": str(output)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:7860")
    parser.add_argument("--output", type=Path, default=Path("outputs/web/episode.png"))
    parser.add_argument("--chromium", default=CHROMIUM, help="the browser binary (Debian's chromium)")
    args = parser.parse_args(argv)
    try:
        seen = play(args.url, args.output, args.chromium)
    except Exception as error:  # a page that never showed its reward, a browser that did not start
        print(f"screenshot_web failed: {type(error).__name__}: {str(error)[:500]}", file=sys.stderr)
        return 1
    print(json.dumps(seen))
    if seen["reward_shown"] != 1.0:
        shown = seen["reward_shown"]
        print(f"screenshot_web failed: the page shows reward {shown}, not 1.0", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
