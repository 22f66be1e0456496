"""Screenshots of the play page for the docs: play, analysis and the training view.

    python scripts/play_screenshots.py --runs runs --out docs/play

Starts ``python -m play`` on a free port over ``--runs``, drives Debian's headless Chromium
(chromium + chromium-driver) through a short game against the shipped network, analyses the
whole game, shows it on a phone-sized window, opens the training view, and writes play.png,
analysis.png, phone.png and training.png (training.png only when ``--runs`` holds a run).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from PIL import Image
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[1]
PLAY_SHOT_TURN = 3  # play.png shows the board after the user's 4th move and the reply


def main() -> None:
    # Over 80 lines: the browser's steps in order, one screenshot after another, no logic.
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", default="runs", help="the runs folder to show")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "play")
    parser.add_argument("--sims", type=int, default=200, help="the opponent's simulations")
    parser.add_argument("--turns", type=int, default=10, help="moves the user plays")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "play", "--port", str(port), "--runs", args.runs]
    cmd += ["--player", f"long-320min.safetensors:sims={args.sims}", "--log-level", "warning"]
    server = subprocess.Popen(cmd, cwd=REPO)
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1100,900",
        "--hide-scrollbars",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(
        options=options,
        service=webdriver.ChromeService(executable_path=shutil.which("chromedriver")),
    )
    wait = WebDriverWait(driver, 300)
    status = lambda: driver.find_element(By.ID, "status").text  # noqa: E731
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/api/status", timeout=5).read()
                break
            except OSError:
                time.sleep(0.2)
        driver.get(url + "/")
        wait.until(lambda d: "(you)" in status())
        driver.find_element(By.ID, "numbers").click()
        for turn in range(args.turns):
            # The user plays by clicking: a movable piece, then landing squares until the move
            # is complete (the piece chosen in turn, so the game is not the network's best).
            count = len(driver.find_elements(By.CSS_SELECTOR, "#movelist span"))
            pieces = driver.find_elements(By.CSS_SELECTOR, "#board circle.movable")
            if not pieces:
                break
            pieces[turn % len(pieces)].click()
            while True:
                targets = driver.find_elements(By.CSS_SELECTOR, "#board rect.sq-target")
                if not targets:
                    break
                targets[0].click()
            wait.until(
                lambda d, c=count: (
                    len(d.find_elements(By.CSS_SELECTOR, "#movelist span")) >= c + 2
                    or "wins" in status()
                )
            )
            wait.until(lambda d: "(you)" in status() or "wins" in status() or "Draw" in status())
            if turn == PLAY_SHOT_TURN:
                wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#top tbody tr")) > 0)
                time.sleep(1)
                driver.save_screenshot(str(args.out / "play.png"))
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#top tbody tr")) > 0)
        driver.find_element(By.ID, "hint").click()
        wait.until(lambda d: "Hint" in status())
        driver.find_element(By.ID, "analyse-game").click()
        wait.until(lambda d: "done" in d.find_element(By.ID, "game-analysis").text)
        wait.until(lambda d: "visits)" in d.find_element(By.ID, "wdl-text").text)
        size = driver.get_window_size()
        driver.set_window_size(size["width"], size["height"] + 250)  # the graph in the picture
        time.sleep(2)
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(str(args.out / "analysis.png"))
        driver.set_window_size(390, 844)  # a phone
        time.sleep(1)
        driver.save_screenshot(str(args.out / "phone.png"))
        driver.set_window_size(size["width"], size["height"])
        runs = json.loads(urllib.request.urlopen(url + "/api/runs", timeout=30).read())
        written = ["play.png", "analysis.png", "phone.png"]
        if runs:
            training(driver, wait, args.out)
            written.append("training.png")
        else:
            print(f"no run in {args.runs}: training.png left as it is")
        for name in written:  # 64 colours keep each picture small for the repo
            png = args.out / name
            Image.open(png).convert("RGB").quantize(colors=64).save(png, optimize=True)
        print(f"wrote {', '.join(written)} to {args.out}")
    finally:
        driver.quit()
        server.terminate()
        server.wait(timeout=30)


def training(driver, wait, out: Path) -> None:
    """The training view of the newest run, a few moves into its newest game."""
    driver.find_element(By.ID, "tab-train").click()
    wait.until(lambda d: not d.find_element(By.ID, "run-detail").get_attribute("hidden"))
    time.sleep(2)
    for _ in range(12):
        driver.find_element(By.ID, "v-next").click()
    time.sleep(2)
    driver.save_screenshot(str(out / "training.png"))


if __name__ == "__main__":
    main()
