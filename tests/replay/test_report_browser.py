"""The report's interactive figures in a real headless browser (Debian's chromium, driven by
selenium through /usr/bin/chromedriver; ``scripts/browser.sh install``): the page loads from
a file with no network, the two Pareto plots and the swim lanes render, hovering a point
shows its numbers, unticking a run hides its points, and the console has no error.

Skips without the browser; CI sets AGENTLOAD_REQUIRE_BROWSER=1, which turns the skip into a
failure."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ready_file import skip_or_fail
from replay_servers import timed_serve
from replay_traces import linear_trace

from agentload.measure.report import write_report
from agentload.measure.results import load_results


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless chromium (selenium), closed at the end."""
    why = None
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        why = "selenium is not installed (pip install -e '.[test]')"
    driver = shutil.which("chromedriver")
    if why is None and (driver is None or shutil.which("chromium") is None):
        why = "no chromium/chromedriver (scripts/browser.sh install)"
    if why is not None:
        skip_or_fail(why, "AGENTLOAD_REQUIRE_BROWSER")
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or ""
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,1600",
                "--disable-dev-shm-usage", "--proxy-server=127.0.0.1:9"):  # fmt: skip
        opts.add_argument(arg)  # the proxy: any attempt to reach the network fails
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(options=opts, service=Service(executable_path=driver))
    try:
        yield d
    finally:
        d.quit()


def _run(url: str, trace: Path, out: Path, sweep: str) -> None:
    argv = [sys.executable, "-m", "agentload", "replay", str(trace), "--endpoint", url]
    argv += ["--model", "agentload-sim", "--sweep", sweep, "--duration", "1.5"]
    argv += ["--gap-scale", "0", "--gpus", "2", "--out", str(out)]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]


def test_the_interactive_report_works_offline_in_a_real_browser(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    trace = linear_trace(tmp_path / "lin.agentload.jsonl.zst", sessions=4, calls=6)
    with timed_serve(tmp_path, 400, 0.25) as url:
        _run(url, trace, tmp_path / "one", "1,2")
        _run(url, trace, tmp_path / "two", "2,4,6")
    runs = [load_results(tmp_path / "one"), load_results(tmp_path / "two")]
    html, *_ = write_report(runs, tmp_path / "report")
    text = html.read_text()
    assert "src='http" not in text and 'src="http' not in text  # nothing to fetch

    browser.get(html.as_uri())
    points = browser.find_elements(By.CSS_SELECTOR, "#al-pareto circle.point")
    assert len(points) == 5  # 2 + 3 points, both runs shown
    assert len(browser.find_elements(By.CSS_SELECTOR, "#al-jobs circle.point")) >= 1
    lanes = browser.find_elements(By.CSS_SELECTOR, "#al-lanes rect.call")
    assert len(lanes) > 4
    # Hover a point: its numbers appear.
    tip = browser.find_element(By.ID, "al-tip")
    assert not tip.is_displayed()
    first = next(p for p in points if p.get_attribute("data-load") == "c=1")
    ActionChains(browser).move_to_element(first).perform()
    assert tip.is_displayed()
    assert "c=1" in tip.text and "TTFT p50 (ms)" in tip.text and "one" in tip.text
    ActionChains(browser).move_to_element(lanes[0]).perform()
    assert "TTFT (ms)" in tip.text and "session" in tip.text
    # Untick the second run: only the first one's points remain.
    browser.find_element(By.CSS_SELECTOR, "#al-runs input[data-run='1']").click()
    left = browser.find_elements(By.CSS_SELECTOR, "#al-pareto circle.point")
    assert [p.get_attribute("data-run") for p in left] == ["0", "0"]
    # Nothing was fetched, and the console is clean.
    fetched = browser.execute_script("return performance.getEntriesByType('resource').length")
    assert fetched == 0
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert not errors, errors
