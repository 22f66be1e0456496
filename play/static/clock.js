// Playing the computer: its name and strength (from /api/opponents: the ladder table's
// ratings), optional clocks (a time per move, or per game with an increment), resigning and
// offering a draw. A game that ends here keeps its result in state.entry.over.
"use strict";

const clock = {
  mode: "none",      // none, move (each move within `base`) or game (`base` each, + `inc` a move)
  base: 0, inc: 0,   // milliseconds
  left: { B: 0, W: 0 },
  running: null,     // the side whose clock runs, null when stopped
  since: 0,          // performance.now() when it started
  timer: null,
};

function opponentEntry(spec) {
  return ((state.opponents && state.opponents.opponents) || []).find(o => o.spec === spec) || null;
}

function opponentName(spec) {
  const o = opponentEntry(spec);
  return o ? o.name : spec || "the opponent";
}

function renderOpponent() {  // the name and measured strength of the opponent in the box
  const spec = $("opponent").value.trim() || state.config.default_opponent;
  const o = opponentEntry(spec);
  $("opponent-info").textContent = o ? `${o.name}: ${o.strength}` : `${spec} (no measured strength)`;
}

function fillOpponents() {
  const list = $("players");
  list.textContent = "";
  for (const o of state.opponents.opponents) {
    const option = new Option(`${o.name}: ${o.strength}`, o.spec);
    list.appendChild(option);
  }
}

// --- game over: resign, draw, time ---------------------------------------------------------
function gameOver() {
  return state.entry ? state.entry.over || null : null;
}

function endGame(result, text) {
  if (!state.entry || gameOver()) return;
  state.entry.over = { result, text };
  clockStop();
  board.enabled = false;
  board.draw();
  renderStatus();
  renderClocks();
  treeChanged();  // the PDN's result follows
}

function playingComputer() {
  return (state.colour === "B" || state.colour === "W") && state.node && !state.node.position.result;
}

function resign() {
  if (!playingComputer() || gameOver()) return;
  const you = state.colour === "B" ? "Black" : "White";
  endGame(state.colour === "B" ? "0-1" : "1-0", `${you} resigned`);
}

function offerDraw() {
  if (!playingComputer() || gameOver()) return;
  const rule = state.opponents.draw_offer;
  let reply = null;
  for (let n = state.node; n && !reply; n = n.parent) reply = n.reply;
  let accepts = false, why = "it has not moved yet";
  if (reply && reply.minimax) {
    accepts = reply.minimax.score < rule.accept_below_cp;
    why = `its score ${(reply.minimax.score / 100).toFixed(2)} men`;
  } else if (reply && reply.score !== null && reply.score !== undefined) {
    accepts = reply.score < rule.accept_below_score;
    why = `it expects ${(reply.score * 100).toFixed(0)}%`;
  } else if (reply) {
    why = "it does not evaluate positions";
  }
  if (accepts) endGame("1/2-1/2", `Draw agreed (${opponentName(state.opponent)}: ${why})`);
  else $("draw-info").textContent = `${opponentName(state.opponent)} declines the draw (${why}).`;
}

// --- clocks ----------------------------------------------------------------------------------
function clockSettings() {
  return { mode: $("clock-mode").value, base: Number($("clock-base").value) || 0,
           inc: Number($("clock-inc").value) || 0 };
}

function clockReset() {  // a new game: the clocks as set, Black's running when the game starts
  clockStop();
  const c = clockSettings();
  clock.mode = c.mode;
  clock.base = (c.mode === "game" ? c.base * 60 : c.base) * 1000;  // minutes a game, s a move
  clock.inc = c.mode === "game" ? c.inc * 1000 : 0;
  clock.left = { B: clock.base, W: clock.base };
  $("clocks").hidden = c.mode === "none";
  $("draw-info").textContent = "";
  renderClocks();
}

function clockStart(side) {
  if (clock.mode === "none" || gameOver()) return;
  clock.running = side;
  clock.since = performance.now();
  clearInterval(clock.timer);
  clock.timer = setInterval(clockTick, 100);
}

function clockStop() {
  if (clock.running) clock.left[clock.running] -= performance.now() - clock.since;
  clock.running = null;
  clearInterval(clock.timer);
  clock.timer = null;
}

function clockMoved(mover) {  // `mover` has just moved: its time is charged, the other's runs
  if (clock.mode === "none" || !playingComputer() || gameOver()) return;
  if (clock.running === mover) clockStop();
  const other = mover === "B" ? "W" : "B";
  if (clock.mode === "game") clock.left[mover] += clock.inc;
  else clock.left[other] = clock.base;  // a time per move: each move gets it whole
  clockStart(other);
  renderClocks();
}

function clockTick() {
  if (!clock.running) return;
  const side = clock.running;
  const left = clock.left[side] - (performance.now() - clock.since);
  if (left <= 0) {
    clock.left[side] = 0;
    clock.running = null;
    clearInterval(clock.timer);
    const name = side === "B" ? "Black" : "White";
    endGame(side === "B" ? "0-1" : "1-0", `${name} lost on time`);
    return;
  }
  renderClocks(left);
}

function shown(ms) {  // 4:05, or 0:07.3 in the last ten seconds
  const s = Math.max(0, ms / 1000), m = Math.floor(s / 60), rest = s - 60 * m;
  if (s < 10) return `0:0${(Math.floor(rest * 10) / 10).toFixed(1)}`;
  return `${m}:${String(Math.floor(rest)).padStart(2, "0")}`;
}

function renderClocks(runningLeft) {
  for (const side of ["B", "W"]) {
    const left = side === clock.running && runningLeft !== undefined ? runningLeft : clock.left[side];
    const box = $(`clock-${side}`);
    box.textContent = `${side === "B" ? "Black" : "White"} ${shown(left)}`;
    box.classList.toggle("running", side === clock.running);
    box.classList.toggle("flagged", left <= 0 && clock.mode !== "none");
  }
}

function wireGameControls() {
  $("resign").addEventListener("click", resign);
  $("offer-draw").addEventListener("click", offerDraw);
  $("clock-mode").addEventListener("change", () => {
    const mode = $("clock-mode").value;
    $("clock-base-unit").textContent = mode === "game" ? "min" : "s";
    $("clock-base").value = mode === "game" ? 5 : 10;
    $("clock-inc-row").hidden = mode !== "game";
    saveState();
  });
  $("opponent").addEventListener("input", renderOpponent);
}
