"""The page in a real headless Chromium: open it, play a legal move by clicking, see the reply.

Drives Debian's ``chromium`` through ``chromium-driver`` (scripts/setup.sh installs both);
skipped, with the reason, only where they are not installed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from play_helpers import Server, make_folders

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
WAIT_S = 120  # the first answer loads the network in the server; generous on a busy machine
WHITE_REPLIES = {"21-17", "22-17", "22-18", "23-18", "23-19", "24-19", "24-20"}

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="chromium and chromium-driver are not installed (bash scripts/setup.sh installs them)",
)


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    service = webdriver.ChromeService(executable_path=DRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("play-page")
    runs, models, _ = make_folders(root)
    # The page asks for the reply and its analysis at once: on a loaded machine the second may
    # wait for a search slot longer than the default 10 s, so the test lets it queue.
    srv = Server(
        runs,
        models,
        root / "server.log",
        "default_simulations=16",
        "limits.queue_wait_s=110",
        "runs.live_within_s=86400",  # the run folder's live game stays live through the test
    )
    yield srv
    srv.stop()


def page_state(browser, server) -> str:
    """What the page shows and the server logged: the message of a wait that timed out."""
    from selenium.webdriver.common.by import By

    shown = {
        key: browser.find_element(By.ID, key).text
        for key in ("status", "movelist", "wdl-text", "newgame-error", "run-title", "live-info")
    }
    log = server.log_path.read_text()[-2000:] if server.log_path.exists() else "(no log)"
    return f"the page shows {shown}; the server's log ends:\n{log}"


class Wait:
    """WebDriverWait whose timeout says what the page showed instead of a bare TimeoutException."""

    def __init__(self, browser, server) -> None:
        from selenium.webdriver.support.ui import WebDriverWait

        self.browser, self.server = browser, server
        self.wait = WebDriverWait(browser, WAIT_S)

    def until(self, condition, what: str) -> None:
        from selenium.common.exceptions import TimeoutException

        try:
            self.wait.until(condition)
        except TimeoutException:
            pytest.fail(f"waited {WAIT_S} s for {what}; {page_state(self.browser, self.server)}")


def test_play_a_move_by_clicking_and_see_the_network_answer(browser, server, tmp_path):
    from selenium.webdriver.common.by import By

    wait = Wait(browser, server)
    browser.get(server.url + "/")
    wait.until(
        lambda d: "Black to move (you)" in d.find_element(By.ID, "status").text, "the user's turn"
    )
    movable = browser.find_elements(By.CSS_SELECTOR, "#board circle.movable")
    assert sorted(int(c.get_attribute("data-square")) for c in movable) == [9, 10, 11, 12]

    browser.find_element(By.CSS_SELECTOR, '#board circle[data-square="11"]').click()
    targets = browser.find_elements(By.CSS_SELECTOR, "#board rect.sq-target")
    assert sorted(int(t.get_attribute("data-square")) for t in targets) == [15, 16]
    browser.find_element(By.CSS_SELECTOR, '#board rect[data-square="15"]').click()

    # The network replies, and it is the user's turn again.
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#movelist span")) == 2, "the reply")
    wait.until(
        lambda d: "Black to move (you)" in d.find_element(By.ID, "status").text,
        "the user's turn after the reply",
    )
    moves = [s.text.rstrip("?!") for s in browser.find_elements(By.CSS_SELECTOR, "#movelist span")]
    assert moves[0] == "11-15" and moves[1] in WHITE_REPLIES
    pieces = {
        int(c.get_attribute("data-square"))
        for c in browser.find_elements(By.CSS_SELECTOR, "#board circle.piece-b")
    }
    assert 15 in pieces and 11 not in pieces
    # The analysis panel has the network's view of the new position.
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#top tbody tr")) > 0, "analysis")
    assert "Black to move: win" in browser.find_element(By.ID, "wdl-text").text
    assert "11-15" in browser.find_element(By.ID, "pdn-out").get_attribute("value")

    out = Path(os.environ.get("PLAY_SCREENSHOTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(out / "play.png"))
    assert (out / "play.png").stat().st_size > 10_000


def test_the_live_view_shows_the_runs_game_in_progress_read_only(browser, server):
    from selenium.webdriver.common.by import By

    wait = Wait(browser, server)
    browser.get(server.url + "/?view=train#train")  # a new page load (a hash alone is not)

    def open_run(name: str) -> None:
        wait.until(
            lambda d: any(c.text == name for c in d.find_elements(By.CSS_SELECTOR, "#runs td")),
            f"run {name} in the list",
        )
        next(
            c for c in browser.find_elements(By.CSS_SELECTOR, "#runs td") if c.text == name
        ).click()
        wait.until(lambda d: d.find_element(By.ID, "run-title").text.startswith(name), name)

    open_run("2026-01-01_00-00-00")
    browser.find_element(By.ID, "live").click()
    wait.until(lambda d: "actor 3" in d.find_element(By.ID, "live-info").text, "the live game")
    info = browser.find_element(By.ID, "live-info").text
    assert "read-only" in info and "weights v5" in info and "ACF 1" in info and "last 22-17" in info

    def squares(colour: str) -> set[int]:
        found = browser.find_elements(By.CSS_SELECTOR, f"#viewer circle.piece-{colour}")
        return {int(c.get_attribute("data-square")) for c in found}

    wait.until(lambda d: 15 in squares("b"), "the live game's moves")  # 11-15 23-19 8-11 22-17
    assert squares("b") == {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 15}
    assert squares("w") == {17, 19, 21, *range(24, 33)}
    assert not browser.find_elements(By.CSS_SELECTOR, "#viewer .movable")  # nothing to play

    open_run("2026-01-02_00-00-00")  # its live game is two days old, and it has no network
    browser.find_element(By.ID, "live").click()
    wait.until(
        lambda d: "no self-play game in progress" in d.find_element(By.ID, "live-info").text,
        "no live game",
    )
