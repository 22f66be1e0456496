"""The page in a real headless Chromium: play a move by clicking and see the reply; the analysis
board (stepping by moves, keys and graph, variations, FEN and set-up, PDN files in and out,
deepening analysis, stale panels, whole-game analysis, orientation, square numbers); the phone
layout; the training view's live game and Elo chart.

Drives Debian's ``chromium`` through ``chromium-driver`` (scripts/setup.sh installs both);
skipped, with the reason, only where they are not installed.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from play_helpers import Server, make_folders

from game.pdn import game_from_position, read_pdn, write_pdn
from game.position import Position

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
WAIT_S = 120  # the first answer loads the network in the server; generous on a busy machine
WHITE_REPLIES = {"21-17", "22-17", "22-18", "23-18", "23-19", "24-19", "24-20"}

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="chromium and chromium-driver are not installed (bash scripts/setup.sh installs them)",
)


@pytest.fixture(scope="module")
def downloads(tmp_path_factory):
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(downloads):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    options = webdriver.ChromeOptions()
    prefs = {"download.default_directory": str(downloads), "download.prompt_for_download": False}
    options.add_experimental_option("prefs", prefs)
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
    driver.execute_cdp_cmd(
        "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
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
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        self.browser, self.server = browser, server
        # An element the page redrew while a condition read it: the condition is asked again.
        self.wait = WebDriverWait(
            browser, WAIT_S, ignored_exceptions=[StaleElementReferenceException]
        )

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
    moves = [t.rstrip("?!") for t in Page(browser, server).texts("#movelist span.mv")]
    assert moves[0] == "11-15" and moves[1] in WHITE_REPLIES
    pieces = {
        int(c.get_attribute("data-square"))
        for c in browser.find_elements(By.CSS_SELECTOR, "#board circle.piece-b")
    }
    assert 15 in pieces and 11 not in pieces
    # The analysis panel has the default engine's view of the new position: the alpha-beta's
    # best moves with their scores and lines.
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#lines tbody tr")) > 0, "analysis")
    assert "Black to move: " in browser.find_element(By.ID, "wdl-text").text
    assert "depth" in browser.find_element(By.ID, "wdl-text").text
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
    # One rated version: its step once under the chart (it read "weights v5weights v5").
    labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#elo text.elo-x")]
    assert labels == ["100"]
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


# --- the analysis board ------------------------------------------------------------------------


def a_game(start: Position, plies: int, pick: int) -> list[str]:
    """A legal game of ``plies`` moves from ``start``, each move chosen by a fixed rule."""
    pos, moves = start.copy(), []
    for i in range(plies):
        legal = pos.legal_moves()
        move = legal[(pick * i + 1) % len(legal)]
        moves.append(str(move))
        pos.play(move)
    return moves


def fen_after(moves: list[str], fen: str | None = None) -> str:
    pos = Position.from_fen(fen) if fen else Position()
    for m in moves:
        pos.play(m)
    return pos.fen()


SECOND_FEN = "W:W21,22,K30:B1,2,K9"
GAME1 = a_game(Position(), 12, 3)
GAME2 = a_game(Position.from_fen(SECOND_FEN), 4, 1)
COLLECTION = write_pdn(
    [
        game_from_position(
            Position(),
            GAME1,
            "1/2-1/2",
            {"Event": "Club night", "Black": "Ann", "White": "Bob", "Annotator": "Cy"},
        ),
        game_from_position(
            Position.from_fen(SECOND_FEN), GAME2, "*", {"Event": "Problem", "Black": "Dee"}
        ),
    ]
)


class Page:
    """What the tests do on the play page and read back from it."""

    def __init__(self, browser, server) -> None:
        from selenium.webdriver.common.by import By

        self.d, self.server, self.by = browser, server, By
        self.wait = Wait(browser, server)

    def find(self, css: str):
        return self.d.find_element(self.by.CSS_SELECTOR, css)

    def texts(self, css: str) -> list[str]:
        """The texts of the elements ``css`` selects, read at once (the list redraws often)."""
        script = "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent)"
        return self.d.execute_script(script, css)

    def click(self, css: str, index: int = 0) -> None:
        """A click on the ``index``-th element ``css`` selects, found again if it was redrawn."""
        from selenium.common.exceptions import StaleElementReferenceException

        for _ in range(10):
            try:
                self.all(css)[index].click()
                return
            except StaleElementReferenceException:
                continue
        pytest.fail(f"{css}[{index}] kept being redrawn")

    def all(self, css: str):
        return self.d.find_elements(self.by.CSS_SELECTOR, css)

    def text(self, element_id: str) -> str:
        return self.d.find_element(self.by.ID, element_id).text

    def use_network_engine(self) -> None:
        """Analysis by the network (the second engine) instead of the alpha-beta."""
        from selenium.webdriver.support.ui import Select

        Select(self.find("#engine")).select_by_value("network")
        self.d.execute_script("document.activeElement.blur()")  # arrow keys are the board's

    def open(self, fresh: bool = True) -> None:
        """The page; ``fresh``: as on a first visit (the game it keeps across reloads cleared)."""
        if fresh:
            self.d.get(self.server.url + "/favicon.ico")  # the same origin, without the page
            self.d.execute_script("localStorage.clear()")
        self.d.get(self.server.url + "/")
        self.wait.until(lambda d: "to move" in self.text("status"), "the page's first position")

    def fen(self) -> str:
        return self.find("#fen-current").get_attribute("value")

    def wait_fen(self, fen: str, what: str) -> None:
        self.wait.until(lambda d: self.fen() == fen, f"{what}: FEN {fen}")

    def pieces(self) -> dict[str, set[int]]:
        script = (
            "return [...document.querySelectorAll(arguments[0])].map(e => Number(e.dataset.square))"
        )
        return {c: set(self.d.execute_script(script, f"#board circle.piece-{c}")) for c in "bw"}

    def key(self, key: str) -> None:
        from selenium.webdriver.common.action_chains import ActionChains

        ActionChains(self.d).send_keys(key).perform()

    def colour(self, value: str) -> None:
        from selenium.webdriver.support.ui import Select

        Select(self.find("#colour")).select_by_value(value)

    def open_file(self, path: Path) -> None:
        field = self.find("#pdn-file")
        self.d.execute_script("arguments[0].hidden = false", field)  # a button opens it for users
        field.send_keys(str(path))
        self.d.execute_script("arguments[0].hidden = true", field)
        self.wait.until(lambda d: path.name in self.text("file-info"), f"{path.name} opened")

    def moves(self) -> list[str]:
        return [t.rstrip("?!") for t in self.texts("#movelist > span.mv")]

    def current(self) -> str:
        found = self.texts("#movelist span.current")
        return found[0].rstrip("?!") if found else ""

    def play(self, move: str) -> None:
        """A move entered by clicking its piece and each landing square."""
        squares = [int(s) for s in move.replace("x", "-").split("-")]
        self.find(f'#board circle[data-square="{squares[0]}"]').click()
        for s in squares[1:]:
            self.find(f'#board rect[data-square="{s}"]').click()


@pytest.fixture
def collection(tmp_path) -> Path:
    path = tmp_path / "club.pdn"
    path.write_text(COLLECTION)
    return path


def test_step_through_a_game_by_moves_keys_and_graph(browser, server, collection, tmp_path):
    page = Page(browser, server)
    page.open()
    page.use_network_engine()  # this test reads the network's view (visits, W/D/L)
    page.open_file(collection)
    # A file opens on the analysis board at the start of its first game, its tags shown.
    assert "2 games" in page.text("file-info")
    assert page.find("#colour").get_attribute("value") == "both"
    options = [o.text for o in page.all("#game-picker option")]
    assert options[0].startswith("1. Ann – Bob 1/2-1/2, Club night") and len(options) == 2
    tags = page.text("tags")
    assert "Event Club night" in tags and "Annotator Cy" in tags
    assert page.moves() == GAME1
    page.wait_fen(Position().fen(), "the start")

    for _ in range(3):
        page.key("\ue014")  # arrow right
    page.wait_fen(fen_after(GAME1[:3]), "three moves on")
    assert page.current() == GAME1[2]
    page.key("\ue012")  # arrow left
    page.wait_fen(fen_after(GAME1[:2]), "one move back")
    page.key("\ue010")  # End
    page.wait_fen(fen_after(GAME1), "the end")
    page.key("\ue011")  # Home
    page.wait_fen(Position().fen(), "the start again")
    page.click("#movelist > span.mv", 4)
    page.wait_fen(fen_after(GAME1[:5]), "the fifth move clicked")
    assert page.current() == GAME1[4]

    # The whole game analysed: progress, then done; every position a point of the graph.
    page.find("#analyse-game").click()
    page.wait.until(lambda d: "done" in page.text("game-analysis"), "whole-game analysis")
    assert page.text("game-analysis").startswith(f"done: {len(GAME1) + 1} positions at 16 visits")
    points = page.all("#graph circle[data-ply]")
    assert sorted(int(c.get_attribute("data-ply")) for c in points) == list(range(len(GAME1) + 1))
    page.click('#graph circle[data-ply="8"]')
    page.wait_fen(fen_after(GAME1[:8]), "the graph's 8th point clicked")
    assert page.current() == GAME1[7]
    out = Path(os.environ.get("PLAY_SCREENSHOTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(out / "analysis-board.png"))

    # The second game of the file, from its own set-up position.
    from selenium.webdriver.support.ui import Select

    Select(page.find("#game-picker")).select_by_index(1)
    page.wait_fen(SECOND_FEN, "the second game's start")
    assert "Event Problem" in page.text("tags") and page.moves() == GAME2
    assert page.pieces() == {"b": {1, 2, 9}, "w": {21, 22, 30}}


def test_a_move_mid_game_starts_a_variation_and_keeps_the_game(browser, server, collection):
    page = Page(browser, server)
    page.open()
    page.open_file(collection)
    page.click("#movelist > span.mv", 1)
    page.wait_fen(fen_after(GAME1[:2]), "after two moves")
    pos = Position.from_fen(fen_after(GAME1[:2]))
    other = next(str(m) for m in pos.legal_moves() if str(m) != GAME1[2] and not m.is_capture)
    page.play(other)
    page.wait_fen(fen_after([*GAME1[:2], other]), "the variation's first move")
    assert page.moves() == GAME1  # the main line is all there
    variation = [t.rstrip("?!") for t in page.texts("#movelist em.variation span.mv")]
    assert variation == [other]
    assert page.current() == other and "(variation)" in page.text("status")

    page.find("#main-line").click()  # back to where the variation left the main line
    page.wait_fen(fen_after(GAME1[:2]), "back on the main line")
    page.key("\ue014")
    page.wait_fen(fen_after(GAME1[:3]), "the main line's next move")
    page.click("#movelist em.variation span.mv")
    page.wait_fen(fen_after([*GAME1[:2], other]), "the variation again")
    page.find("#delete-var").click()
    page.wait_fen(fen_after(GAME1[:2]), "the variation deleted")
    assert not page.all("#movelist em.variation") and page.moves() == GAME1


def test_fen_shown_editable_and_a_position_set_up_by_clicking(browser, server):
    page = Page(browser, server)
    page.open()
    page.colour("both")
    before = page.pieces()
    field = page.find("#fen-current")
    assert page.fen() == Position().fen()
    field.clear()
    field.send_keys("B:W99:B1\n")
    page.wait.until(lambda d: "bad FEN" in page.text("fen-error"), "the bad FEN's error")
    assert "99" in page.text("fen-error") and page.pieces() == before  # the board untouched

    field.clear()
    field.send_keys(SECOND_FEN + "\n")
    page.wait.until(lambda d: page.pieces() == {"b": {1, 2, 9}, "w": {21, 22, 30}}, "the FEN set")
    assert page.text("fen-error") == "" and "White to move (you)" in page.text("status")
    assert len(page.all("#board text.crown")) == 2  # the kings on 9 and 30

    page.find("#setup").click()
    page.find("#setup-clear").click()
    assert page.pieces() == {"b": set(), "w": set()}
    square = lambda s: page.all(f'#board [data-square="{s}"]')[-1]  # noqa: E731  # piece or square
    square(10).click()  # black man
    for _ in range(2):
        square(5).click()  # black king
    for _ in range(3):
        square(20).click()  # white man
    from selenium.webdriver.support.ui import Select

    Select(page.find("#setup-turn")).select_by_value("W")
    assert page.fen() == "W:W20:BK5,10"
    square(32).click()  # a black man on White's back rank: refused, the set-up stays open
    page.find("#setup-done").click()
    page.wait.until(lambda d: "not a legal set-up" in page.text("fen-error"), "the bad set-up")
    assert page.find("#setup-panel").is_displayed()
    for _ in range(4):
        square(32).click()  # back to empty
    page.find("#setup-done").click()
    page.wait.until(lambda d: not page.find("#setup-panel").is_displayed(), "the set-up done")
    page.wait_fen("W:W20:BK5,10", "the set-up position")
    assert page.pieces() == {"b": {5, 10}, "w": {20}} and "White to move" in page.text("status")
    legal = {c.get_attribute("data-square") for c in page.all("#board circle.movable")}
    assert legal == {"20"}


def test_deepening_analysis_until_stopped_and_stale_panels_cleared(browser, server, collection):
    page = Page(browser, server)
    page.open()
    page.use_network_engine()  # this test reads the network's view (visits, W/D/L)
    page.open_file(collection)
    page.wait.until(lambda d: "(16 visits)" in page.text("wdl-text"), "the start's analysis")
    assert len(page.all("#top tbody tr")) == len(Position().legal_moves())

    def shown_visits() -> int:
        found = re.search(r"\((\d+) visits\)", page.text("wdl-text"))
        return int(found.group(1)) if found else 0

    page.find("#deepen").click()
    assert page.text("deepen") == "Stop"
    page.wait.until(lambda d: shown_visits() >= 64, "a deeper search")
    page.find("#deepen").click()
    assert page.text("deepen") == "Deepen" and page.text("deepen-status") == "stopped"

    page.find("#deepen").click()  # again: a change of position stops it
    page.wait.until(lambda d: "deepening" in page.text("deepen-status"), "deepening again")
    page.find("#analyse-on").click()  # analysis off: what is shown is only the old position's
    page.key("\ue014")
    page.wait_fen(fen_after(GAME1[:1]), "one move on")
    assert page.text("deepen") == "Deepen"
    assert page.text("deepen-status") == "stopped: the position changed"
    assert page.all("#top tbody tr") == [] and page.text("wdl-text") == ""
    assert page.text("pv") == ""
    page.key("\ue012")  # the start again: its own analysis is kept and shown
    page.wait_fen(Position().fen(), "back at the start")
    assert "Black to move: win" in page.text("wdl-text") and page.all("#top tbody tr")


def test_alpha_beta_deepening_runs_on_the_server_one_ply_at_a_time(browser, server):
    page = Page(browser, server)
    page.open()  # the alpha-beta is the default engine

    def depth() -> int:
        found = re.search(r"deepening: depth (\d+)", page.text("deepen-status"))
        return int(found.group(1)) if found else 0

    page.find("#deepen").click()
    assert page.text("deepen") == "Stop"
    page.wait.until(lambda d: depth() >= 8, "the server's search, iteration after iteration")
    page.find("#deepen").click()
    assert page.text("deepen") == "Deepen" and page.text("deepen-status") == "stopped"
    # the deepest lines found stay shown, with their depth
    shown = re.search(r"depth (\d+)", page.text("wdl-text"))
    assert page.all("#lines tbody tr") and shown and int(shown.group(1)) >= 8


def test_the_board_turns_for_the_user_and_shows_square_numbers(browser, server):
    page = Page(browser, server)
    page.open()

    def top(square: int) -> float:
        return page.find(f'#board rect[data-square="{square}"]').rect["y"]

    assert top(1) > top(32)  # playing Black (the default): Black's side at the bottom
    page.colour("W")
    page.wait.until(lambda d: top(1) < top(32), "White's side at the bottom")
    page.find("#flip").click()
    assert top(1) > top(32)
    numbers = sorted(int(t) for t in page.texts("#board text.num"))  # on by default
    assert numbers == list(range(1, 33))
    page.find("#numbers").click()
    assert page.all("#board text.num") == []


def test_a_multi_game_file_saved_as_strict_pdn(browser, server, collection, downloads):
    page = Page(browser, server)
    page.open()
    page.open_file(collection)
    page.key("\ue010")  # End, then a last move added to the main line
    page.wait_fen(fen_after(GAME1), "the end of the first game")
    extra = str(Position.from_fen(fen_after(GAME1)).legal_moves()[0])
    page.play(extra)
    page.wait_fen(fen_after([*GAME1, extra]), "a move added")
    page.click("#movelist > span.mv", 1)
    page.wait_fen(fen_after(GAME1[:2]), "the second move clicked")
    pos = Position.from_fen(fen_after(GAME1[:2]))
    other = next(str(m) for m in pos.legal_moves() if str(m) != GAME1[2])
    page.play(other)  # a variation: not saved
    page.wait_fen(fen_after([*GAME1[:2], other]), "a variation")
    for old in downloads.glob("*"):
        old.unlink()
    page.find("#save").click()
    saved = downloads / "club.pdn"
    page.wait.until(lambda d: saved.exists() and saved.read_text().count("[Event") == 2, "save")
    assert "saved 2 games as club.pdn" in page.text("file-info")
    games = read_pdn(saved.read_text())
    assert [g.moves for g in games] == [[*GAME1, extra], GAME2]
    assert games[0].tags["Annotator"] == "Cy" and games[0].tags["Black"] == "Ann"
    assert games[1].tags["FEN"] == SECOND_FEN and games[1].tags["Event"] == "Problem"
    assert saved.read_text() == write_pdn(games)  # as the project writes PDN


def test_the_page_fits_a_phone(browser, server, tmp_path):
    page = Page(browser, server)
    size = browser.get_window_size()
    browser.set_window_size(390, 844)
    try:
        page.open()
        width = browser.execute_script("return document.documentElement.clientWidth")
        height = browser.execute_script("return window.innerHeight")
        scroll = browser.execute_script("return document.documentElement.scrollWidth")
        assert scroll <= width, f"the page is {scroll} px wide in a {width} px window"
        box = page.find("#board").rect
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
        assert box["y"] >= 0 and box["y"] + box["height"] <= height
        assert box["width"] >= 300  # as wide as the screen allows, not shrunk to nothing
        wide = browser.execute_script(
            "return [...document.querySelectorAll('#view-play *')]"
            ".filter(e => e.getBoundingClientRect().right > arguments[0] + 1)"
            ".map(e => e.id || e.tagName)",
            width,
        )
        assert wide == []
        out = Path(os.environ.get("PLAY_SCREENSHOTS", tmp_path))
        out.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(out / "phone.png"))
        page.find("#tab-train").click()  # the training view fits too
        page.wait.until(lambda d: page.text("run-title"), "a run shown")
        scroll = browser.execute_script("return document.documentElement.scrollWidth")
        assert scroll <= width, f"the training view is {scroll} px wide in a {width} px window"
        assert browser.save_screenshot(str(out / "phone-training.png"))
    finally:
        browser.set_window_size(size["width"], size["height"])


def test_a_move_written_with_the_wrong_separator_is_read_and_reported(browser, server, tmp_path):
    # 10x14 is a step written as a capture, as some published collections write it.
    path = tmp_path / "classic.pdn"
    path.write_text('[Event "Classic"]\n1. 9-13 22-17 2. 13x22 26x17 3. 11-15 23-19 4. 10x14 *\n')
    page = Page(browser, server)
    page.open()
    page.open_file(path)
    info = page.text("file-info")
    assert info.startswith("classic.pdn: 1 game, 1 move written with the wrong separator")
    assert page.moves()[-1] == "10-14"
    assert "move 4: '10x14' read as 10-14" in page.find("#file-info").get_attribute("title")
