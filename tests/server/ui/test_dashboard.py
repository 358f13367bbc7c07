"""The dashboard in a real browser: Debian's headless Chromium, driven by
Selenium through chromedriver, against a real chronoqd started here.

    CHRONOQD=build/dev/src/server/chronoqd /usr/bin/python3 -m pytest tests/server/ui -v

Screenshots of each page go to $CHRONOQ_UI_SCREENSHOTS (ctest: the build
tree's ui-screenshots/), as test artefacts. Every wait is for a condition,
with a deadline that says what it waited for.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "clients" / "python"))
from chronoq import Client  # noqa: E402

CHRONOQD = os.environ.get("CHRONOQD", str(ROOT / "build" / "dev" / "src" / "server" / "chronoqd"))
SCREENSHOTS = Path(os.environ.get("CHRONOQ_UI_SCREENSHOTS", tempfile.gettempdir() + "/chronoq-ui"))
DEADLINE_S = 20.0  # chronoqd may run under ASan, the browser on a busy machine


class Chronoqd:
    """chronoqd on a free loopback port with a temporary data directory."""

    def __init__(self, data: str, token: Optional[str] = None) -> None:
        args = [CHRONOQD, "--listen", "127.0.0.1:0", "--data", data]
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHRONOQ_TOKEN")}
        if token:
            env["CHRONOQ_TOKEN"] = token
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env)
        lines: "queue.Queue[str]" = queue.Queue()
        self.log: List[str] = []

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.log.append(line)
                lines.put(line)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + DEADLINE_S
        self.url = ""
        while not self.url:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                pytest.fail("chronoqd did not say 'listening on' in time: " + "".join(self.log))
            try:
                m = re.search(r"listening on (http://[0-9.]+:\d+)", lines.get(timeout=left))
            except queue.Empty:
                continue
            if m:
                self.url = m.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=DEADLINE_S)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,800", "--force-prefers-reduced-motion"):
        options.add_argument(arg)
    try:
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    except WebDriverException as e:
        pytest.fail(f"headless Chromium did not start (Debian's chromium, chromium-driver): {e}")
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[Chronoqd]:
    s = Chronoqd(str(tmp_path / "data"))
    try:
        yield s
    finally:
        s.stop()


def wait_until(cond: Callable[[], object], what: str) -> object:
    """Polls cond until it returns something true; fails naming `what` after the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {DEADLINE_S:.0f} s waiting for {what}")
        time.sleep(0.05)


def screenshot(driver: WebDriver, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(SCREENSHOTS / f"{name}.png")), f"no screenshot {name}"


def cell_texts(driver: WebDriver) -> List[List[str]]:
    """The overview's rows: the queue's name, then each cell's text. Read in one script: the
    overview is drawn anew at each refresh, so elements found one call earlier may be gone."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('main tbody tr')].map(tr =>"
        " [tr.querySelector('.name').textContent,"
        "  ...[...tr.querySelectorAll('td')].map(td => td.innerText)])")
    return [list(r) for r in rows]


def text_of(driver: WebDriver, selector: str) -> str:
    """An element's text, read in one script (see cell_texts)."""
    return str(driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.innerText : ''", selector))


def seed(url: str, token: Optional[str] = None) -> None:
    """Three queues: tasks waiting, a dead one, and a paused queue."""
    c = Client(url, token=token, timeout=10)
    c.enqueue_many([{"queue": "expire-share", "payload": {"share": i}} for i in range(5)])
    c.enqueue("purge", {"days": 30}, max_attempts=1)
    lease = c.claim("purge", lease=60).tasks[0]
    c.fail(lease.id, lease.token, "disk full")
    c.enqueue("customer-events-with-a-rather-long-queue-name", {"n": 1})
    c.pause_queue("customer-events-with-a-rather-long-queue-name")


def test_overview_lists_every_queue(browser: WebDriver, server: Chronoqd) -> None:
    seed(server.url)
    browser.get(server.url + "/")  # redirected to /ui/
    wait_until(lambda: browser.current_url.endswith("/ui/"), "/ to redirect to /ui/")
    rows = wait_until(lambda: len(cell_texts(browser)) == 3 and cell_texts(browser),
                      "the overview to list three queues")
    by_name = {r[0]: r[1:] for r in rows}  # name: [name and flags, scheduled, running, ...]
    assert by_name["expire-share"][1:6] == ["5", "0", "0", "0", "0"], rows
    assert by_name["purge"][4] == "1", rows  # dead
    long_name = "customer-events-with-a-rather-long-queue-name"
    assert "paused" in by_name[long_name][0] and "paused" not in by_name["purge"][0], rows
    totals = text_of(browser, "main .totals")
    assert "3\nqueues" in totals and "1\ndead" in totals, totals
    assert "updated" in text_of(browser, "#status")
    screenshot(browser, "overview")


def test_a_phone_screen_scrolls_only_down(browser: WebDriver, server: Chronoqd) -> None:
    seed(server.url)
    browser.set_window_size(390, 844)
    try:
        browser.get(server.url + "/ui/")
        wait_until(lambda: len(cell_texts(browser)) == 3, "the overview on a phone screen")
        scroll = browser.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert scroll[0] <= scroll[1], f"horizontal scroll on a phone: {scroll}"
        screenshot(browser, "overview-phone")
    finally:
        browser.set_window_size(1280, 800)


def test_the_token_is_asked_for_and_a_wrong_one_refused(browser: WebDriver,
                                                         tmp_path: Path) -> None:
    s = Chronoqd(str(tmp_path / "data"), token="s3cret")
    try:
        seed(s.url, token="s3cret")
        browser.get(s.url + "/ui/")
        browser.execute_script("sessionStorage.clear()")
        browser.refresh()
        dialog = browser.find_element(By.ID, "login")
        wait_until(lambda: dialog.get_attribute("open") is not None, "the sign-in dialog")
        screenshot(browser, "sign-in")
        field = browser.find_element(By.ID, "login-token")
        field.send_keys("wrong")
        browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
        error = browser.find_element(By.ID, "login-error")
        wait_until(lambda: error.text == "That token was refused." and dialog.get_attribute("open")
                   is not None, "the wrong token to be refused")
        field.send_keys("s3cret")
        browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
        wait_until(lambda: len(cell_texts(browser)) == 3, "the overview after signing in")
        assert dialog.get_attribute("open") is None
        # Kept for the tab only, never in the URL.
        assert browser.execute_script("return sessionStorage.getItem('chronoq.token')") == "s3cret"
        assert "s3cret" not in browser.current_url
    finally:
        s.stop()


def open_queue(browser: WebDriver, url: str, name: str) -> None:
    browser.get(f"{url}/ui/#/queue/{name}")
    wait_until(lambda: browser.find_elements(By.ID, "settings")
               and browser.find_element(By.ID, "queue-title").text.startswith(name),
               f"the page of queue {name}")


def test_pausing_a_queue_stops_its_claims(browser: WebDriver, server: Chronoqd) -> None:
    seed(server.url)
    c = Client(server.url, timeout=10)
    browser.get(server.url + "/ui/")
    wait_until(lambda: len(cell_texts(browser)) == 3, "the overview")
    # Clicked in one script: the overview is drawn anew at each refresh.
    browser.execute_script("[...document.querySelectorAll('a.name')]"
                           ".find(a => a.textContent === arguments[0]).click()", "expire-share")
    open_queue(browser, server.url, "expire-share")
    button = browser.find_element(By.ID, "pause")
    assert button.text == "Pause"
    button.click()
    wait_until(lambda: button.text == "Resume", "the queue to be paused")
    assert c.get_queue("expire-share").paused
    assert c.claim("expire-share", max=10).tasks == [], "a paused queue gave tasks"
    screenshot(browser, "queue-paused")
    button.click()
    wait_until(lambda: button.text == "Pause", "the queue to be resumed")
    assert len(c.claim("expire-share", max=10, lease=60).tasks) == 5


def test_a_bad_rate_limit_is_shown_at_its_field(browser: WebDriver, server: Chronoqd) -> None:
    seed(server.url)
    c = Client(server.url, timeout=10)
    open_queue(browser, server.url, "expire-share")
    count = browser.find_element(By.ID, "set-rate_limit.count")
    period = browser.find_element(By.ID, "set-rate_limit.period_ms")
    count.send_keys("0")
    period.send_keys("1000")
    browser.find_element(By.CSS_SELECTOR, "#settings button[type=submit]").click()
    error = browser.find_element(By.ID, "err-rate_limit.count")
    wait_until(lambda: "rate_limit.count" in error.text or "count" in error.text,
               "the rate limit's error at its field")
    assert count.get_attribute("aria-invalid") == "true"
    assert c.get_queue("expire-share").rate_limit is None, "a refused setting was stored"
    screenshot(browser, "queue-settings-error")
    count.clear()
    count.send_keys("100")
    browser.find_element(By.CSS_SELECTOR, "#settings button[type=submit]").click()
    wait_until(lambda: error.text == "" and count.get_attribute("aria-invalid") is None,
               "the error to go once the value is right")
    limit = c.get_queue("expire-share").rate_limit
    assert limit == {"count": 100, "period_ms": 1000}, limit


def schedule_rows(driver: WebDriver) -> dict:
    """The schedules page: name -> its cells' texts (read in one script, see cell_texts)."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('main tbody tr')].map(tr =>"
        " [tr.dataset.schedule, ...[...tr.querySelectorAll('td')].map(td => td.innerText)])")
    return {r[0]: list(r[1:]) for r in rows}


def test_schedules_show_their_next_runs_in_their_zone(browser: WebDriver,
                                                      server: Chronoqd) -> None:
    c = Client(server.url, timeout=10)
    c.create_schedule("nightly-purge", "maintenance", cron="0 0 3 * * *", tz="Asia/Seoul")
    c.create_schedule("refresh", "cache", every=timedelta(seconds=30))
    browser.get(server.url + "/ui/#/schedules")
    rows = wait_until(lambda: len(schedule_rows(browser)) == 2 and schedule_rows(browser),
                      "the schedules page to list two schedules")
    purge = rows["nightly-purge"]
    assert "cron 0 0 3 * * * (Asia/Seoul)" in purge[2], purge
    seoul = purge[3].split("\n")
    assert len(seoul) == 5 and all(r.endswith(" 03:00:00") for r in seoul), seoul
    # The viewer's zone (the test's browser runs in UTC): 03:00 in Seoul is 18:00 the day before.
    viewer = purge[4].split("\n")
    zone = browser.execute_script("return Intl.DateTimeFormat().resolvedOptions().timeZone")
    if zone in ("UTC", "Etc/UTC"):
        assert all(r.endswith(" 18:00:00") for r in viewer), viewer
    assert "every 30 s" in rows["refresh"][2], rows["refresh"]
    screenshot(browser, "schedules")
    browser.execute_script("document.querySelector('button[data-schedule=\"nightly-purge\"]').click()")
    wait_until(lambda: c.get_schedule("nightly-purge").paused, "the schedule to be paused")
    wait_until(lambda: "paused" in schedule_rows(browser)["nightly-purge"][0],
               "the page to show it paused")


def task_rows(driver: WebDriver) -> List[List[str]]:
    """The task browser's rows: the task id, then each cell's text (one script, see cell_texts)."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('#task-results tbody tr')].map(tr =>"
        " [tr.dataset.task, ...[...tr.querySelectorAll('td')].map(td => td.innerText)])")
    return [list(r) for r in rows]


def test_a_dead_task_found_in_the_browser_is_retried_and_succeeds(browser: WebDriver,
                                                                  server: Chronoqd) -> None:
    seed(server.url)
    c = Client(server.url, timeout=10)
    browser.get(server.url + "/ui/#/tasks")
    wait_until(lambda: len(task_rows(browser)) == 7, "the task browser to list every task")
    # Filter down to the one dead task.
    browser.find_element(By.ID, "f-queue").send_keys("purge")
    browser.execute_script("document.getElementById('f-state').value = 'dead'")
    browser.find_element(By.CSS_SELECTOR, "#task-filter button[type=submit]").click()
    rows = wait_until(lambda: len(task_rows(browser)) == 1 and task_rows(browser),
                      "the filter to leave the dead task alone")
    dead_id = rows[0][0]
    assert rows[0][3] == "dead" and "disk full" in rows[0][7], rows
    assert "state=dead" in browser.current_url and "queue=purge" in browser.current_url
    screenshot(browser, "tasks-dead")
    # Its page shows the error and the payload in full.
    browser.get(f"{server.url}/ui/#/task/{dead_id}")
    wait_until(lambda: text_of(browser, "#task-state") == "dead", "the dead task's page")
    assert '"days": 30' in text_of(browser, "#task-payload")
    assert "disk full" in text_of(browser, "pre.error-text")
    screenshot(browser, "task")
    browser.execute_script(
        "document.querySelector('button[data-task=\"' + arguments[0] + '\"]').click()", dead_id)
    wait_until(lambda: c.get(dead_id).state == "scheduled", "the retry to schedule the task")
    lease = c.claim("purge", lease=60).tasks[0]
    assert lease.id == dead_id
    c.ack(lease.id, lease.token)
    wait_until(lambda: text_of(browser, "#task-state") == "succeeded",
               "the task's page to show it succeeded")
