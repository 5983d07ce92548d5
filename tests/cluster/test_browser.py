"""The Dask dashboard and the /sweep page in a real headless Chromium, during a running sweep.

Screenshots are saved under artifacts/ (dashboard-status.png, sweep-page.png).
"""

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from sweep import Sweep
from tests.helpers import JOBS, ROOT, wait_for
from tests.requirements import CHROMIUM

ARTIFACTS = Path(os.environ.get("SWEEP_ARTIFACTS", ROOT / "artifacts"))
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [pytest.mark.slow, pytest.mark.browser]


# the WCAG contrast ratio of each heatmap cell's text on its background
CONTRASTS = r"""() => {
  const lum = c => {
    const [r, g, b] = c.match(/\d+/g).slice(0, 3).map(Number).map(v => v / 255)
      .map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  return [...document.querySelectorAll("table.heat td")].filter(td => td.innerText.trim()).map(td => {
    const style = getComputedStyle(td);
    const [a, b] = [lum(style.color), lum(style.backgroundColor)].sort((x, y) => y - x);
    return (a + 0.05) / (b + 0.05);
  });
}"""


@contextmanager
def watching(client, s: Sweep):
    """A page of a headless Chromium and the dashboard's base URL while ``s`` runs on ``client``
    (cancelled afterwards)."""
    playwright = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    run = s.start(client=client, progress=False)
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            yield (
                browser.new_page(viewport={"width": 1400, "height": 900}),
                client.dashboard_link.rsplit("/", 1)[0],
            )
            browser.close()
    finally:
        run.cancel()


def test_dashboard_and_sweep_page_render_a_running_sweep(client, tmp_path):
    s = Sweep(
        f"{JOBS}:reporting",
        {"grid": {"x": [1.0, 2.0, 3.0], "y": [0, 1]}, "fixed": {"steps": 40, "seconds": 0.25}},
        name="browser",
        output=tmp_path / "b.zarr",
    )
    with watching(client, s) as (page, base):
        page.goto(f"{base}/status")
        page.wait_for_selector("canvas", timeout=60_000)
        page.wait_for_timeout(3000)
        page.screenshot(path=str(ARTIFACTS / "dashboard-status.png"))
        assert "Dask" in page.title()

        page.goto(f"{base}/sweep")
        page.wait_for_selector("text=browser", timeout=30_000)
        wait_for(lambda: "running" in page.inner_text("#sweeps"), seconds=60)
        page.wait_for_selector("table.heat td", timeout=30_000)
        wait_for(lambda: page.locator("table.heat td").first.inner_text() != "", seconds=60)
        # every point's reported curve, and the watcher's live threads of the running points
        wait_for(lambda: page.locator("svg[id^=curves] polyline").count() >= 2, seconds=60)
        wait_for(
            lambda: any(t.strip() for t in page.locator("td.live-threads").all_inner_texts()), seconds=60
        )
        live = [t for t in page.locator("td.live-threads").all_inner_texts() if t.strip()]
        text = page.inner_text("#sweeps")
        ratios = page.evaluate(CONTRASTS)
        page.screenshot(path=str(ARTIFACTS / "sweep-page.png"), full_page=True)
        page.goto(f"{base}/workers")  # Dask's own navigation bar leads to the page
        page.click("a[href='sweep']", timeout=30_000)
        page.wait_for_selector("text=browser", timeout=30_000)
        assert page.url.endswith("/sweep")
    assert "6 points" in text and "peak threads" in text and "objective" in text
    assert "latest objective by x x y" in text and "reported by each point" in text
    threads, budget = (int(n) for n in live[0].replace("(", " ").replace(")", " ").split())
    assert 0 < threads <= budget, live
    assert ratios and min(ratios) >= 4.5, ratios  # WCAG AA for the heatmap's numbers
    assert (ARTIFACTS / "sweep-page.png").stat().st_size > 10_000


def test_the_sweep_page_of_a_search_draws_best_so_far_and_running_curves(client, tmp_path):
    search = {"sampler": "tpe", "n_trials": 40, "seed": 0, "axes": {"lr": [0.0, 2.0]}, "objective": "loss"}
    s = Sweep(
        f"{JOBS}:descend",
        {
            "search": search,
            "prune": {"kind": "median", "metric": "loss", "n_startup_trials": 3},
            "fixed": {"steps": 30, "every": 0.1},
        },
        name="browsersearch",
        output=tmp_path / "s.zarr",
    )
    with watching(client, s) as (page, base):
        wait_for(lambda: page.goto(f"{base}/sweep").ok, seconds=60)  # once the sweep added its page
        page.wait_for_selector("text=browsersearch", timeout=30_000)
        # two trials done: the best-so-far line; trials running: their curves in colour. The page
        # lists the newest sweep first: earlier searches of the session's scheduler come after it
        best, curves = page.locator("svg#best").first, page.locator("svg#curves").first
        wait_for(lambda: best.locator("polyline").count() == 1, seconds=90)
        wait_for(lambda: best.locator("circle").count() >= 2, seconds=90)
        wait_for(lambda: curves.locator("polyline.running-curve").count() >= 1, seconds=60)
        text = page.inner_text("#sweeps")
        page.screenshot(path=str(ARTIFACTS / "sweep-search-page.png"), full_page=True)
    assert "best loss so far (min)" in text and "40 points" in text and "lr" in text


def test_nan_and_inf_reports_keep_the_page_live_and_a_lost_server_is_shown(client, tmp_path):
    """Found: one NaN report put a bare NaN in /sweep/data.json; the page's parse failed and it
    froze on its last data, with no sign, for every sweep on the scheduler."""
    import json
    import urllib.request

    s = Sweep(
        f"{JOBS}:nonfinite_reports", {"grid": {"x": [0, 1]}}, name="nonfinite", output=tmp_path / "n.zarr"
    )
    with watching(client, s) as (page, base):
        # the page is added to the dashboard as the run sets up its workers
        wait_for(lambda: page.goto(f"{base}/sweep").ok, seconds=60, every=0.5)
        wait_for(lambda: "running" in page.inner_text("#sweeps"), seconds=60)
        with urllib.request.urlopen(f"{base}/sweep/data.json") as answer:
            text = answer.read().decode()
        wait_for(lambda: "Infinity" in page.inner_text("#sweeps") or "NaN" in page.inner_text("#sweeps"), 60)
        json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in data.json"))
        first = page.inner_text("#sweeps")
        wait_for(lambda: page.inner_text("#sweeps") != first, seconds=30)  # still updating
        assert page.locator("#stale").is_hidden()
        page.route("**/sweep/data.json", lambda route: route.abort())  # the server is gone
        page.wait_for_selector("#stale", state="visible", timeout=30_000)
        assert "stale" in page.inner_text("#stale") and "failed" in page.inner_text("#stale")
        page.screenshot(path=str(ARTIFACTS / "sweep-page-stale.png"), full_page=True)
