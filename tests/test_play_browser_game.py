"""The page's game features in a real headless Chromium: the state kept across a reload and
shared as a link, an annotated PDN file round trip through the page, the clocks, resigning and
offering a draw, the opponent by name and strength, choosing the analysis engine, and the
Training view's Elo chart drawing the run's eval/curve.csv.

Drives Debian's ``chromium`` through ``chromium-driver`` as tests/test_play_browser.py does
(its browser and page helpers are shared); skipped, with the reason, where they are missing.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import test_play_browser as shared
from play_helpers import Server, make_folders
from test_play_browser import CHROMIUM, DRIVER, Page

from game.pdn import read_pdn
from game.pdn_lines import line_to_json

browser = shared.browser  # the browser fixtures of the page's other tests
downloads = shared.downloads
DATA = Path(__file__).resolve().parent / "data"
ANNOTATED = DATA / "annotated_checkerboard.pdn"
RUN = "2026-01-01_00-00-00"  # the stopped run of play_helpers.make_folders
CURVE = """version,step,wall_s,positions,elo,lower,upper,games
2,50,30.5,1200,412.3,301.0,520.8,8
5,800,301.0,30000,688.9,601.2,776.4,32
9,1550,640.2,61000,905.0,822.5,990.1,32
"""

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="chromium and chromium-driver are not installed (bash scripts/setup.sh installs them)",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("play-game")
    runs, models, _ = make_folders(root)
    (runs / RUN / "eval" / "curve.csv").write_text(CURVE)
    srv = Server(
        runs,
        models,
        root / "server.log",
        "default_simulations=16",
        "limits.queue_wait_s=110",
    )
    yield srv
    srv.stop()


def select(page: Page, css: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(page.find(css)).select_by_value(value)


def set_value(page: Page, css: str, value: str) -> None:
    field = page.find(css)
    field.clear()
    field.send_keys(value)


def test_the_game_its_variations_and_settings_survive_a_reload(browser, server):
    page = Page(browser, server)
    page.open()
    page.open_file(ANNOTATED)
    set_value(page, "#opponent", "minimax:4")
    select(page, "#engine", "network")
    page.click("#movelist > span.mv", 7)  # 24-20 $1
    page.wait.until(lambda d: page.current() == "24-20", "the eighth move shown")
    moves, variations = page.moves(), page.texts("#movelist .variation")
    comments = page.texts("#movelist .comment")
    assert "The Old Fourteenth proper." in comments and len(variations) == 3
    time.sleep(0.5)  # the page saves its state a moment after each change

    page.open(fresh=False)  # a reload
    page.wait.until(lambda d: page.current() == "24-20", "the same move shown after the reload")
    assert page.moves() == moves
    assert page.texts("#movelist .variation") == variations
    assert page.texts("#movelist .comment") == comments
    assert page.find("#colour").get_attribute("value") == "both"
    assert page.find("#opponent").get_attribute("value") == "minimax:4"
    assert page.find("#engine").get_attribute("value") == "network"


def test_a_position_shared_as_a_link_opens_on_another_visit(browser, server):
    page = Page(browser, server)
    page.open()
    page.colour("both")
    for move in ("11-15", "23-19", "8-11"):
        page.play(move)
        page.wait.until(lambda d, m=move: page.current() == m, f"{move} played")
    page.find("#share").click()
    url = page.find("#share-url").get_attribute("value")
    assert url.endswith("/#moves=11-15,23-19,8-11")
    page.d.get(server.url + "/favicon.ico")
    page.d.execute_script("localStorage.clear()")
    page.d.get(url)
    page.wait.until(lambda d: page.moves() == ["11-15", "23-19", "8-11"], "the linked game")
    fen_link = server.url + "/#fen=W:W21,22,K30:B1,2,K9&moves=30-26"
    page.d.get(server.url + "/")
    page.d.get(fen_link)
    page.wait.until(lambda d: page.moves() == ["30-26"], "the linked position's game")
    assert page.fen() == "B:W21,22,K26:B1,2,K9"


def test_an_annotated_file_saved_from_the_page_keeps_its_notes(browser, server, downloads):
    page = Page(browser, server)
    page.open()
    page.open_file(ANNOTATED)
    assert page.texts("#file-errors li") == []
    texts = " ".join(page.texts("#movelist > *"))
    assert "15-18!" in texts and "$1" in texts and "loses time" in texts
    # A note of the page's own: a comment and a mark on 22-17 (the fourth move).
    page.click("#movelist > span.mv", 3)
    page.wait.until(lambda d: page.current().startswith("22-17"), "22-17 shown")
    page.find("#note-comment").send_keys("a new note")
    select(page, "#note-mark", "!?")
    page.wait.until(lambda d: "a new note" in page.texts("#movelist .comment"), "the note shown")
    for old in downloads.glob("*.pdn"):
        old.unlink()
    page.find("#save").click()
    page.wait.until(lambda d: any(downloads.glob("annotated_checkerboard.pdn")), "the download")
    saved = read_pdn((downloads / "annotated_checkerboard.pdn").read_text())
    original = read_pdn(ANNOTATED.read_text())
    assert saved[1] == original[1]  # the game not touched: as it was, notes and all
    assert saved[0].moves == original[0].moves
    original[0].line[3].comment = "a new note"
    original[0].line[3].mark = "!?"
    assert line_to_json(saved[0].line) == line_to_json(original[0].line)


def test_a_file_with_bad_games_lists_them_and_reads_the_rest(browser, server, tmp_path):
    path = tmp_path / "mixed.pdn"
    path.write_text(
        '[Event "good"][Black "A"][White "B"]\n1. 11-15 23-19 *\n\n'
        '[Event "bad"][Black "C"][White "D"]\n1. 11-15 22-18 2. 15-19 *\n\n'
        '[Event "good too"][Black "E"][White "F"]\n1. 9-13 22-18 *\n'
    )
    page = Page(browser, server)
    page.open()
    page.open_file(path)
    assert "2 games" in page.text("file-info") and "1 bad game not read" in page.text("file-info")
    assert page.texts("#file-errors li") == ["game 2: game 'bad' (C - D), move 2 ('15-19')"]
    assert len(page.all("#game-picker option")) == 2


def test_clocks_flag_resign_and_draw(browser, server):
    page = Page(browser, server)
    page.open()
    set_value(page, "#opponent", "random")
    page.wait.until(lambda d: "random moves" in page.text("opponent-info"), "the opponent's name")
    select(page, "#clock-mode", "move")
    set_value(page, "#clock-base", "1")
    page.find("#newgame").click()
    # A second a move, and Black (the user) does not move: Black loses on time.
    page.wait.until(lambda d: "Black lost on time" in page.text("status"), "the flag")
    assert "(0-1)" in page.text("status")
    page.wait.until(lambda d: "0-1" in page.find("#pdn-out").get_attribute("value"), "result")
    assert not page.all("#board circle.movable")

    select(page, "#clock-mode", "game")
    set_value(page, "#clock-base", "1")  # a minute each, 3 s a move
    page.find("#newgame").click()
    page.wait.until(lambda d: "Black to move (you)" in page.text("status"), "the new game")
    shown = page.text("clock-B")  # read once: it ticks
    assert shown.startswith("Black 0:5") or shown == "Black 1:00", shown
    page.play("11-15")
    page.wait.until(lambda d: len(page.moves()) == 2, "the reply")
    seconds = page.text("clock-B").split()[1]
    assert seconds.startswith("1:0"), seconds  # the 3 s increment: over a minute again
    page.find("#offer-draw").click()
    assert "declines the draw (it does not evaluate positions)" in page.text("draw-info")
    page.find("#resign").click()
    page.wait.until(lambda d: "Black resigned (0-1)" in page.text("status"), "the resignation")


def test_the_opponent_is_shown_by_name_with_the_ladder_rating(browser, server):
    page = Page(browser, server)
    page.open()
    set_value(page, "#opponent", "minimax:4")
    page.wait.until(lambda d: "depth 4" in page.text("opponent-info"), "minimax:4 named")
    info = page.text("opponent-info")
    assert info.startswith("alpha-beta, hand-written evaluation, depth 4: about +1754 on the")


def test_choosing_the_analysis_engine(browser, server):
    page = Page(browser, server)
    page.open()
    page.colour("both")
    select(page, "#engine", "network")
    page.wait.until(lambda d: "visits)" in page.text("wdl-text"), "the network's analysis")
    assert page.find("#sims-label").is_displayed() and not page.find("#lines").is_displayed()
    select(page, "#engine", "ab")
    assert not page.find("#sims-label").is_displayed()
    # Without the alpha-beta analysis on the server, the page still analyses (the answer it
    # gets is the network's, shown as such); the server's own default engine is checked in
    # the analysis routes' tests.
    page.wait.until(lambda d: "to move" in page.text("wdl-text"), "the analysis after the switch")
    # The alpha-beta's answer (best moves with scores, depths and lines, the database's
    # verdict) as the analysis route gives it, shown by the page's own code:
    answer = {
        "turn": "B",
        "score": 0.62,
        "score_cp": 35,
        "depth": 14,
        "nodes": 123456,
        "ms": 301.2,
        "pv": ["11-15", "23-19"],
        "database": {"result": "win", "distance": 17},
        "lines": [
            {"move": "11-15", "score_cp": 35, "line": ["11-15", "23-19", "8-11"], "depth": 14},
            {"move": "9-13", "score_cp": -12, "line": ["9-13", "22-18"], "depth": 14},
        ],
    }
    page.d.execute_script("renderAnalysis(arguments[0])", answer)
    script = (
        "return [...document.querySelectorAll('#lines tbody tr')]"
        ".map(r => [...r.cells].map(c => c.textContent).join(' '))"
    )
    rows = page.d.execute_script(script)
    assert page.find("#lines").is_displayed() and not page.find("#top").is_displayed()
    assert rows == ["11-15 +0.35 14 11-15 23-19 8-11", "9-13 -0.12 14 9-13 22-18"]
    assert page.text("database") == "win in the endgame database (in 17 plies)"
    assert page.text("wdl-text").startswith("Black to move: +0.35 (expects 62%), depth 14")


def test_the_elo_chart_draws_the_runs_curve_csv(browser, server):
    page = Page(browser, server)
    page.d.get(server.url + "/?view=train#train")
    page.wait.until(lambda d: RUN in page.texts("#runs td"), "the run in the list")
    next(c for c in page.all("#runs td") if c.text == RUN).click()
    page.wait.until(lambda d: page.text("run-title").startswith(RUN), "the run opened")
    page.wait.until(lambda d: page.all("#elo circle.elo-point"), "the Elo chart")
    script = (
        "return [...document.querySelectorAll('#elo circle.elo-point')]"
        ".map(c => [c.dataset.version, c.dataset.step, c.dataset.elo, c.dataset.lower,"
        " c.dataset.upper])"
    )
    drawn = [[float(v) for v in row] for row in page.d.execute_script(script)]
    rows = [[float(v) for v in line.split(",")] for line in CURVE.splitlines()[1:]]
    assert drawn == [[r[0], r[1], r[4], r[5], r[6]] for r in rows]  # the CSV's own figures
    tips = page.texts("#elo circle.elo-point title")
    assert tips[1] == "v5, step 800: Elo 689 [601, 776], 32 games"
    rungs = page.texts("#elo text.elo-rung-label")
    assert rungs == ["minimax:2 610"]  # the run's rungs near its candidates (not random at 0)
    assert page.texts("#elo text.elo-y") and page.texts("#elo text.elo-x")


def test_the_runs_table_fits_a_phone_without_scrolling(browser, server):
    page = Page(browser, server)
    size = browser.get_window_size()
    browser.set_window_size(390, 844)
    try:
        page.d.get(server.url + "/?view=train#train")
        page.wait.until(lambda d: page.text("run-title"), "a run shown")
        table = page.find("#runs")
        inner = browser.execute_script("return arguments[0].scrollWidth", table)
        shown = browser.execute_script("return arguments[0].clientWidth", table)
        assert inner <= shown, f"the runs table is {inner} px wide in {shown} px"
        heads = [h.text for h in page.all("#runs th") if h.is_displayed()]
        assert heads == ["run", "status", "step", "Elo"]
    finally:
        browser.set_window_size(size["width"], size["height"])
