#!/usr/bin/env python3
"""gpucap serve's dashboard in a real browser: headless Chromium (Debian's chromium and
chromium-driver, through python3-selenium) loads the page from a paced twin server under load,
sees its numbers move, sees the cap step of the server's schedule appear on the page and in the
chart, and saves a screenshot.

    /usr/bin/python3 tests/serve/dashboard_test.py --gpucap build-ci/gpucap --screenshot shot.png
    # docs/serve-dashboard.png is this screenshot: --screenshot docs/serve-dashboard.png

Exit 0 when every check passed; 1 with one line per failed check otherwise.
"""

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

CAP_STEP_S = 15  # the server's schedule: 250 W, then 180 W from here on
RUN_S = 22


def start_server(gpucap, data_dir, gpu, model, pace):
    args = [gpucap] + (["--data-dir", data_dir] if data_dir else []) + [
        "serve", "--gpu", gpu, "--model", model, "--cap-schedule", f"0:250,{CAP_STEP_S}:180", "--pace", pace,
        "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    urls = {}
    deadline = time.monotonic() + 60
    for line in server.stdout:
        match = re.search(r"inference \(KServe v2\)\s+(http://[0-9.:]+)/", line)
        if match:
            urls["inference"] = match.group(1)
        match = re.search(r"dashboard\s+(http://[0-9.:]+/)", line)
        if match:
            urls["dashboard"] = match.group(1)
        if "stop with Ctrl-C" in line or time.monotonic() > deadline:
            break
    return server, urls


def browser():
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def text(driver, element_id):
    return driver.find_element("id", element_id).text


def wait_for(condition, timeout_s, every_s=0.25):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every_s)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpucap", required=True)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--screenshot", default=None, help="where to save the page (default: a temporary file)")
    parser.add_argument("--gpu", default="a100")
    parser.add_argument("--model", default="vgg19")
    parser.add_argument("--rate", default="120", help="requests per second of the load beside it")
    parser.add_argument("--pace", default="realtime", help="the twin's pace (below 1: a slower GPU, for a busier picture)")
    parser.add_argument("--seconds", type=float, default=RUN_S, help="how long the load runs")
    args = parser.parse_args()
    failures = []
    server, urls = start_server(args.gpucap, args.data_dir, args.gpu, args.model, args.pace)
    load = None
    driver = None
    try:
        if "dashboard" not in urls or "inference" not in urls:
            print("dashboard_test: FAIL: the server did not announce its URLs", file=sys.stderr)
            return 1
        # Load beside it: a steady stream of binary image requests for the whole run.
        load = subprocess.Popen([args.gpucap, "load", "--url", urls["inference"], "--model", args.model, "--rate", args.rate,
                                 "--duration", str(args.seconds), "--binary", "--json"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        driver = browser()
        driver.get(urls["dashboard"])
        if f"gpucap serve: {args.model}" not in driver.title:
            failures.append(f"the page's title is '{driver.title}'")
        if "[simulated: the GPU twin]" not in driver.find_element("tag name", "h1").text:
            failures.append("the page does not say its figures are simulated")
        updated = wait_for(lambda: int(driver.find_element("tag name", "body").get_attribute("data-updates") or 0) >= 2, 15)
        if not updated:
            failures.append("the page never updated from /api/series")
        # Read as soon as the page shows data: a browser that starts slowly on a busy machine must
        # still be before the step.
        if text(driver, "cap") != "250 W":
            failures.append(f"before the step the cap tile shows '{text(driver, 'cap')}', not 250 W")
        if driver.execute_script("return typeof Chart") != "function":
            failures.append("the charting library (served by gpucap from libjs-chart.js) did not load")
        # The numbers move: the throughput tile shows traffic, and changes between two reads.
        first = wait_for(lambda: (t := text(driver, "throughput")) not in ("–", "0.0 /s") and t, 15)
        seen = {first}
        wait_for(lambda: seen.add(text(driver, "throughput")) or len(seen) >= 3, 10)
        if not first or len(seen) < 2:
            failures.append(f"the throughput did not move: {sorted(s for s in seen if s)}")
        # The cap step appears: on the tile, and in the power chart's cap line.
        pace = 1.0 if args.pace == "realtime" else float(args.pace)
        if not wait_for(lambda: text(driver, "cap") == "180 W", CAP_STEP_S / pace + 10):
            failures.append(f"the cap step to 180 W never appeared (the tile shows '{text(driver, 'cap')}')")
        caps = driver.execute_script("return Chart.getChart('power-chart').data.datasets[0].data.map(p => p.y)") or []
        if 250 not in caps or 180 not in caps:
            failures.append(f"the power chart's cap line does not hold both caps: {sorted(set(caps))}")
        powers = driver.execute_script("return Chart.getChart('power-chart').data.datasets[1].data.map(p => p.y)") or []
        if not [p for p in powers if p and p > 0]:
            failures.append("the power chart shows no power")
        time.sleep(3 / pace)  # a few more windows under the new cap, for the picture
        shot = args.screenshot or str(Path(tempfile.gettempdir()) / "gpucap-dashboard.png")
        if not driver.save_screenshot(shot):
            failures.append(f"the screenshot could not be saved to {shot}")
        else:
            print(f"dashboard_test: screenshot {shot}")
    finally:
        if driver:
            driver.quit()
        if load:
            load.kill()
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            failures.append("the server did not stop within 30 s of SIGTERM")
    for failure in failures:
        print(f"dashboard_test: FAIL: {failure}", file=sys.stderr)
    if not failures:
        print("dashboard_test: the page loaded in headless Chromium, its numbers moved and the cap step appeared")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
