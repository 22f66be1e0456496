// The page: a game against any player, the network's analysis, and the training view.
"use strict";

const $ = id => document.getElementById(id);
const state = {
  config: null,
  startFen: null,      // null: the initial position
  moves: [],           // every move played from the start
  position: null,      // the server's description of the current position
  colour: "B",
  opponent: "",
  scores: [],          // Black's expected score per ply (index = number of moves played)
  thinking: false,
  openings: [],
  tags: {},
  result: null,
  game: 0,             // bumped by every new game, so a late answer for an old one is dropped
};

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const r = await fetch(path, opts);
  const kind = r.headers.get("Content-Type") || "";
  const data = kind.includes("json") ? await r.json() : await r.text();
  if (!r.ok) {
    const detail = data && data.detail ? data.detail : data;
    throw new Error(typeof detail === "string" ? detail : JSON.stringify(detail));
  }
  return data;
}

const board = new Board($("board"), { interactive: true, onMove: move => userMove(move) });

// --- the game -------------------------------------------------------------------------------
function query(moves) {
  return { fen: state.startFen, moves: moves === undefined ? state.moves : moves };
}

function userToMove() {
  if (!state.position || state.position.result) return false;
  if (state.colour === "both") return true;
  return state.position.turn === state.colour;
}

async function show(position, lastSquares) {
  state.position = position;
  board.enabled = userToMove() && !state.thinking;
  board.set(position, lastSquares);
  renderStatus();
  renderMoves();
  await updatePdn();
}

function renderStatus() {
  const p = state.position, s = $("status");
  s.classList.toggle("over", !!p.result);
  if (p.result) {
    const who = { "1-0": "Black wins", "0-1": "White wins", "1/2-1/2": "Draw" }[p.result];
    s.textContent = `${who} (${p.result}): ${p.end_reason}`;
    return;
  }
  const side = p.turn === "B" ? "Black" : "White";
  let text = `${side} to move`;
  if (state.thinking) text += ": the opponent is thinking…";
  else if (userToMove()) text += " (you)";
  if (p.must_capture) text += ". A capture is compulsory";
  const quiet = Math.floor(p.no_progress / 2);
  if (quiet >= 10) text += `. ${quiet} of 40 moves each without capture or man move`;
  s.textContent = text + ".";
}

function renderMoves() {
  const list = $("movelist");
  list.textContent = "";
  const whiteFirst = (state.startFen || "B").toUpperCase().startsWith("W");
  state.moves.forEach((m, i) => {
    const ply = i + (whiteFirst ? 1 : 0);
    if (ply % 2 === 0 || i === 0) {
      const n = document.createElement("b");
      n.textContent = `${Math.floor(ply / 2) + 1}.${ply % 2 ? ".." : ""}`;
      list.appendChild(n);
    }
    const span = document.createElement("span");
    span.textContent = m + (mark(i + 1) || "");
    span.className = markClass(i + 1);
    list.appendChild(span);
  });
}

function drop(plyAfter) {  // the mover's loss of expected score with the move that led to plyAfter
  const before = state.scores[plyAfter - 1], after = state.scores[plyAfter];
  if (before === undefined || after === undefined) return null;
  const blackMoved = turnAt(plyAfter - 1) === "B";
  return blackMoved ? before - after : after - before;
}

function turnAt(ply) {
  const whiteFirst = (state.startFen || "B").toUpperCase().startsWith("W");
  return (ply + (whiteFirst ? 1 : 0)) % 2 === 0 ? "B" : "W";
}

function markClass(plyAfter) {
  const d = drop(plyAfter), t = state.config.analysis;
  if (d === null) return "";
  if (d >= t.blunder) return "mk blunder";
  if (d >= t.mistake) return "mk mistake";
  if (d >= t.inaccuracy) return "mk inacc";
  return "";
}

function mark(plyAfter) {
  return { "mk blunder": "??", "mk mistake": "?", "mk inacc": "?!" }[markClass(plyAfter)] || "";
}

async function updatePdn() {
  const result = state.position && state.position.result ? state.position.result : "*";
  const black = state.colour === "B" ? "you" : state.colour === "W" ? state.opponent : "";
  const white = state.colour === "W" ? "you" : state.colour === "B" ? state.opponent : "";
  const tags = { Event: "checkerzero play", Black: black || state.opponent,
                 White: white || state.opponent, ...state.tags };
  try {
    $("pdn-out").value = await api("/api/pdn/write", { ...query(), result, tags });
  } catch (e) { $("pdn-out").value = `(${e.message})`; }
}

async function userMove(move) {
  if (!userToMove()) return;
  try {
    const position = await api("/api/position", query([...state.moves, move]));
    const played = state.position.legal.find(m => m.move === move);
    state.moves.push(move);
    await show(position, played ? played.squares : null);
    analyseNow();
    opponentTurn();
  } catch (e) { $("status").textContent = e.message; }
}

async function opponentTurn() {
  if (!state.position || state.position.result || userToMove() || state.thinking) return;
  state.thinking = true;
  board.enabled = false;
  renderStatus();
  const ply = state.moves.length, game = state.game;
  try {
    const answer = await api("/api/move", { ...query(), player: state.opponent });
    if (state.moves.length !== ply || state.game !== game) return;  // the game changed meanwhile
    if (answer.score !== undefined && answer.score !== null) {
      state.scores[ply] = answer.turn === "B" ? answer.score : 1 - answer.score;
    }
    const played = state.position.legal.find(m => m.move === answer.move);
    state.moves.push(answer.move);
    state.thinking = false;
    await show(answer.position, played ? played.squares : null);
    analyseNow();
    if (state.colour === "none") setTimeout(opponentTurn, 300);
  } catch (e) {
    state.thinking = false;
    $("status").textContent = `opponent: ${e.message}`;
  } finally {
    state.thinking = false;
    if (state.position) board.enabled = userToMove();
    board.draw();
  }
}

async function newGame() {
  $("newgame-error").textContent = "";
  state.colour = $("colour").value;
  state.opponent = $("opponent").value.trim() || state.config.default_player;
  state.tags = {};
  let fen = null, moves = [];
  try {
    const start = $("start").value;
    if (start === "ballot") {
      const o = state.openings[Number($("ballot").value)];
      moves = [...o.moves];
      state.tags.Opening = o.name;
    } else if (start === "fen") {
      fen = $("fen").value.trim() || null;
    } else if (start === "pdn") {
      const games = await api("/api/pdn/parse", { pdn: $("pdn-in").value });
      if (!games.length) throw new Error("no game in the PDN");
      fen = games[0].fen; moves = games[0].moves;
    }
    const position = await api("/api/position", { fen, moves });
    state.startFen = fen; state.moves = moves; state.scores = []; state.game += 1;
    state.thinking = false;
    await show(position, null);
    analyseNow();
    opponentTurn();
  } catch (e) { $("newgame-error").textContent = e.message; }
}

async function undo() {
  if (!state.moves.length || state.thinking) return;
  const moves = [...state.moves];
  moves.pop();
  // Back to the user's turn: take the opponent's reply back too.
  if (state.colour === "B" || state.colour === "W") {
    while (moves.length && turnAt(moves.length) !== state.colour) moves.pop();
  }
  const position = await api("/api/position", query(moves));
  state.moves = moves;
  state.scores.length = moves.length + 1;
  await show(position, null);
  analyseNow();
}

// --- analysis -------------------------------------------------------------------------------
function analysisNetwork(sims) {
  const source = state.config.default_player.split(":")[0];
  return `${source}:sims=${sims}`;
}

let analysisSerial = 0;
async function analyseNow() {
  if (!$("analyse-on").checked || !state.position || state.position.result) {
    renderGraph();
    return;
  }
  const serial = ++analysisSerial;
  const ply = state.moves.length;
  const sims = Math.max(1, Number($("analysis-sims").value) || state.config.default_simulations);
  try {
    const answer = await api("/api/analyse", { network: analysisNetwork(sims),
                                               positions: [{ id: ply, ...query() }] });
    if (serial !== analysisSerial) return;
    const r = answer.results[0];
    state.scores[ply] = r.turn === "B" ? r.score : 1 - r.score;
    renderAnalysis(r);
    renderGraph();
    renderMoves();
  } catch (e) { $("wdl-text").textContent = `analysis: ${e.message}`; }
}

function renderAnalysis(r) {
  const [w, d, l] = r.wdl || [0, 1, 0];
  const bar = $("wdl").children;
  bar[0].style.width = `${w * 100}%`; bar[1].style.width = `${d * 100}%`; bar[2].style.width = `${l * 100}%`;
  const side = r.turn === "B" ? "Black" : "White";
  $("wdl-text").textContent =
    `${side} to move: win ${(w * 100).toFixed(1)}%, draw ${(d * 100).toFixed(1)}%, ` +
    `loss ${(l * 100).toFixed(1)}% (${r.visits} visits)`;
  const body = $("top").tBodies[0];
  body.textContent = "";
  r.top.forEach((m, i) => {
    const tr = body.insertRow();
    if (i === 0) tr.className = "best";
    tr.insertCell().textContent = m.move;
    tr.insertCell().textContent = `${(m.prior * 100).toFixed(1)}%`;
    tr.insertCell().textContent = m.visits;
    tr.insertCell().textContent = m.q === null ? "–" : m.q.toFixed(2);
  });
  $("pv").textContent = r.pv.join(" ");
}

function renderGraph() {
  const svg = $("graph");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = 400, H = 120, n = Math.max(state.moves.length, 10);
  const x = i => 4 + (i / n) * (W - 8), y = v => H - 4 - v * (H - 8);
  el("rect", { x: 0, y: 0, width: W, height: H, fill: "#fafafa", stroke: "#ccc" }, svg);
  el("line", { x1: 0, x2: W, y1: y(0.5), y2: y(0.5), stroke: "#bbb", "stroke-dasharray": "4 3" }, svg);
  const pts = [];
  state.scores.forEach((v, i) => { if (v !== undefined && v !== null) pts.push([i, v]); });
  if (pts.length > 1) {
    el("polyline", { points: pts.map(([i, v]) => `${x(i)},${y(v)}`).join(" "), fill: "none",
                     stroke: "#333", "stroke-width": 1.5 }, svg);
  }
  for (const [i, v] of pts) {
    const cls = i > 0 ? markClass(i) : "";
    const colour = { "mk blunder": "#c00", "mk mistake": "#e60", "mk inacc": "#c90" }[cls];
    el("circle", { cx: x(i), cy: y(v), r: colour ? 4.5 : 2, fill: colour || "#333",
                   "data-ply": i, class: cls ? "graph-mark" : "" }, svg);
  }
}

async function analyseGame() {
  const n = state.moves.length;
  const positions = [];
  for (let i = 0; i <= n; i++) positions.push({ id: i, ...query(state.moves.slice(0, i)) });
  const sims = Math.max(1, Number($("analysis-sims").value) || state.config.default_simulations);
  const limit = state.config.limits.max_batch_positions;
  $("wdl-text").textContent = `analysing ${positions.length} positions…`;
  try {
    for (let k = 0; k < positions.length; k += limit) {
      const answer = await api("/api/analyse", { network: analysisNetwork(sims),
                                                 positions: positions.slice(k, k + limit) });
      for (const r of answer.results) {
        if (r.score !== null) state.scores[r.id] = r.turn === "B" ? r.score : 1 - r.score;
        else if (r.result) state.scores[r.id] = { "1-0": 1, "0-1": 0, "1/2-1/2": 0.5 }[r.result];
      }
    }
    renderGraph();
    renderMoves();
    analyseNow();
  } catch (e) { $("wdl-text").textContent = `analysis: ${e.message}`; }
}

async function hint() {
  if (!userToMove()) return;
  const sims = Math.max(1, Number($("analysis-sims").value) || state.config.default_simulations);
  try {
    const answer = await api("/api/move", { ...query(), player: analysisNetwork(sims) });
    const m = state.position.legal.find(x => x.move === answer.move);
    board.hint = m ? m.squares : null;
    board.draw();
    $("status").textContent = `Hint: ${answer.move}`;
  } catch (e) { $("status").textContent = `hint: ${e.message}`; }
}

// --- training view --------------------------------------------------------------------------
const viewer = new Board($("viewer"));
const watch = { run: null, games: [], game: null, positions: [], index: 0, live: false, liveToken: 0 };

async function loadRuns() {
  const runs = await api("/api/runs");
  const body = $("runs").tBodies[0];
  body.textContent = "";
  $("runs-note").textContent = runs.length ? "" : "No runs in the runs folder yet.";
  const fmt = (v, d = 0) => v === undefined || v === null ? "–" : Number(v).toFixed(d);
  for (const r of runs) {
    const tr = body.insertRow();
    tr.insertCell().textContent = r.name;
    const st = tr.insertCell(); st.textContent = r.status; st.className = `status-${r.status}`;
    tr.insertCell().textContent = r.step;
    tr.insertCell().textContent = fmt(r.weights_version);
    tr.insertCell().textContent = fmt(r.games);
    tr.insertCell().textContent = fmt(r.positions_per_s);
    tr.insertCell().textContent = fmt(r.elo);
    tr.addEventListener("click", () => openRun(r.name));
  }
  if (runs.length && !watch.run) openRun(runs[0].name);
}

async function openRun(name) {
  const run = await api(`/api/runs/${encodeURIComponent(name)}`);
  watch.run = run;
  $("run-detail").hidden = false;
  $("run-title").textContent = `${run.name} (${run.status})`;
  drawElo(run.elo);
  const body = $("ratings").tBodies[0];
  body.textContent = "";
  for (const p of run.ratings) {
    const tr = body.insertRow();
    tr.insertCell().textContent = p.player;
    tr.insertCell().textContent = p.elo.toFixed(0);
    tr.insertCell().textContent = `${p.lower.toFixed(0)} – ${p.upper.toFixed(0)}`;
    tr.insertCell().textContent = p.games;
  }
  const sel = $("game-file");
  sel.textContent = "";
  for (const g of run.games) sel.add(new Option(g.file, g.file));
  watch.live = false;  // a live view of the run shown before stops
  if (run.games.length) await loadGameFile(run.games[0].file);
}

function drawElo(points) {
  const svg = $("elo");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = 480, H = 240, pad = 40;
  el("rect", { x: 0, y: 0, width: W, height: H, fill: "#fff", stroke: "#ccc" }, svg);
  if (!points.length) {
    const t = el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", fill: "#777" }, svg);
    t.textContent = "no rated candidates yet";
    return;
  }
  const low = p => p.lower ?? p.elo, high = p => p.upper ?? p.elo;
  const xs = points.map(p => p.version);
  const lo = Math.min(...points.map(low)), hi = Math.max(...points.map(high));
  const x0 = Math.min(...xs), x1 = Math.max(...xs);
  const x = v => pad + (x1 === x0 ? 0.5 : (v - x0) / (x1 - x0)) * (W - 2 * pad);
  const y = v => H - pad + (hi === lo ? -0.5 : -(v - lo) / (hi - lo)) * (H - 2 * pad);
  const band = points.map(p => `${x(p.version)},${y(high(p))}`)
    .concat([...points].reverse().map(p => `${x(p.version)},${y(low(p))}`));
  el("polygon", { points: band.join(" "), fill: "#cde", stroke: "none" }, svg);
  el("polyline", { points: points.map(p => `${x(p.version)},${y(p.elo)}`).join(" "), fill: "none",
                   stroke: "#247", "stroke-width": 2 }, svg);
  for (const p of points) {
    el("line", { x1: x(p.version), x2: x(p.version), y1: y(low(p)), y2: y(high(p)), stroke: "#247" }, svg);
    const c = el("circle", { cx: x(p.version), cy: y(p.elo), r: 3.5, fill: "#247" }, svg);
    const tip = el("title", {}, c);
    tip.textContent = `v${p.version}${p.step === null ? "" : ` (step ${p.step})`}: ` +
      `${p.elo.toFixed(0)} [${low(p).toFixed(0)}, ${high(p).toFixed(0)}]`;
  }
  for (const v of [hi, lo]) {
    const t = el("text", { x: 4, y: y(v) + 4, "font-size": 11, fill: "#555" }, svg);
    t.textContent = v.toFixed(0);
  }
  for (const [v, anchor] of [[x0, "start"], [x1, "end"]]) {
    const t = el("text", { x: x(v), y: H - 8, "font-size": 11, fill: "#555", "text-anchor": anchor }, svg);
    t.textContent = `weights v${v}`;
  }
}

async function loadGameFile(file) {
  watch.live = false;
  const url = `/api/runs/${encodeURIComponent(watch.run.name)}/games/${file}?format=json`;
  watch.games = await api(url);
  const sel = $("game-index");
  sel.textContent = "";
  watch.games.forEach((g, i) => sel.add(new Option(
    `game ${g.number} (${g.moves.length} moves, ${g.result})`, i)));
  if (watch.games.length) await viewGame(0);
}

async function viewGame(i) {
  const g = watch.games[i];
  watch.game = g;
  watch.positions = [];
  // One request per position would be slow for long games: ask for them in order, lazily.
  watch.index = 0;
  await stepTo(0);
}

async function stepTo(index) {
  const g = watch.game;
  if (!g) return;
  index = Math.max(0, Math.min(g.moves.length, index));
  const position = await api("/api/position", { fen: g.fen, moves: g.moves.slice(0, index) });
  watch.index = index;
  viewer.set(position);
  $("v-info").textContent = `move ${index} of ${g.moves.length}` +
    (index ? `: ${g.moves[index - 1]}` : "") + (position.result ? ` (${position.result})` : "");
}

async function live() {
  // A game the run's self-play actors are playing right now, read-only: the server reads the
  // copy the learner keeps in the run folder (games/live.json), polled every runs.live_poll_s.
  if (!watch.run) return;
  const token = ++watch.liveToken;
  watch.live = true;
  const info = $("live-info");
  let shown = null, seen = false;
  while (watch.live && watch.liveToken === token) {
    let g = null;
    try {
      g = await api(`/api/runs/${encodeURIComponent(watch.run.name)}/live`);
    } catch (e) {
      if (!seen && watch.run.network) {  // no game in progress: the old view, said as such
        info.textContent = "no self-play game in progress – the newest network playing itself:";
        return newestPlaysItself(token);
      }
      info.textContent = `live: no self-play game in progress (${e.message})`;
    }
    if (g && watch.live && watch.liveToken === token) {
      seen = true;
      const key = `${g.actor}/${g.fen}/${g.moves.join(" ")}`;
      if (key !== shown) {
        try {
          const position = await api("/api/position", { fen: g.fen, moves: g.moves });
          let squares = null;
          if (g.moves.length) {
            const before = await api("/api/position", { fen: g.fen, moves: g.moves.slice(0, -1) });
            const m = before.legal.find(x => x.move === g.moves[g.moves.length - 1]);
            squares = m ? m.squares : null;
          }
          viewer.set(position, squares);
          shown = key;
        } catch (e) { info.textContent = `live: ${e.message}`; }
      }
      const own = g.moves.length - g.opening_plies;
      info.textContent = `live self-play (read-only): actor ${g.actor}, weights v${g.version}, ` +
        `${g.opening}, ${own} moves played` +
        (g.moves.length ? `, last ${g.moves[g.moves.length - 1]}` : "") +
        `, ${g.age_s.toFixed(0)} s ago`;
    }
    await new Promise(r => setTimeout(r, 1000 * state.config.live_poll_s));
  }
}

async function newestPlaysItself(token) {
  // The newest network of the run plays itself here, one move at a time, read-only: the run
  // is not touched, its checkpoint is read at each new game.
  const player = `${watch.run.network}:sims=${state.config.default_simulations}`;
  const label = "the newest network playing itself";
  let moves = [];
  let position = await api("/api/position", { moves });
  viewer.set(position);
  while (watch.live && watch.liveToken === token && !position.result) {
    try {
      const answer = await api("/api/move", { moves, player });
      moves = [...moves, answer.move];
      const played = position.legal.find(m => m.move === answer.move);
      position = answer.position;
      viewer.set(position, played ? played.squares : null);
      const score = answer.score === null || answer.score === undefined ? "" :
        `, ${answer.turn === "B" ? "Black" : "White"} expects ${(answer.score * 100).toFixed(0)}%`;
      $("live-info").textContent = `${label}: ${moves.length} moves, last ${answer.move}${score}`;
    } catch (e) {
      $("live-info").textContent = `${label}: ${e.message}`;
      await new Promise(r => setTimeout(r, 1000));
    }
  }
  if (position.result) $("live-info").textContent += ` – ${position.result} (${position.end_reason})`;
  if (watch.liveToken === token) watch.live = false;
}

// --- wiring ---------------------------------------------------------------------------------
function showView(view) {
  for (const b of document.querySelectorAll(".tab[data-view]")) b.classList.toggle("active", b.dataset.view === view);
  $("view-play").hidden = view !== "play";
  $("view-train").hidden = view !== "train";
  if (view === "train") loadRuns().catch(e => { $("runs-note").textContent = e.message; });
}

async function init() {
  state.config = await api("/api/config");
  const list = $("players");
  for (const net of state.config.networks) {
    list.appendChild(new Option(`${net}:sims=${state.config.default_simulations}`));
    list.appendChild(new Option(`${net}:ms=200`));
  }
  for (const p of state.config.players) list.appendChild(new Option(p));
  $("opponent").value = state.config.default_player;
  $("analysis-sims").value = state.config.default_simulations;
  state.openings = await api("/api/openings");
  state.openings.forEach((o, i) => $("ballot").add(new Option(`${o.name}: ${o.moves.join(" ")}`, i)));
  $("ballot").selectedIndex = Math.floor(Math.random() * state.openings.length);
  $("start").addEventListener("change", () => {
    const v = $("start").value;
    $("ballot").hidden = v !== "ballot";
    $("fen").hidden = v !== "fen";
    $("pdn-in").hidden = v !== "pdn";
  });
  $("newgame").addEventListener("click", newGame);
  $("undo").addEventListener("click", undo);
  $("flip").addEventListener("click", () => { board.flipped = !board.flipped; board.draw(); });
  $("numbers").addEventListener("change", () => {
    board.numbers = viewer.numbers = $("numbers").checked; board.draw(); viewer.draw(); });
  $("hint").addEventListener("click", hint);
  $("analyse-on").addEventListener("change", analyseNow);
  $("analyse-game").addEventListener("click", analyseGame);
  $("copy").addEventListener("click", async () => {
    const text = $("pdn-out").value;
    try { await navigator.clipboard.writeText(text); } catch (e) {
      $("pdn-out").select(); document.execCommand("copy");
    }
  });
  $("save").addEventListener("click", () => {
    const a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([$("pdn-out").value], { type: "application/x-pdn" }));
    a.download = "checkerzero.pdn";
    a.click();
  });
  for (const b of document.querySelectorAll(".tab[data-view]")) {
    b.addEventListener("click", () => showView(b.dataset.view));
  }
  $("game-file").addEventListener("change", () => loadGameFile($("game-file").value));
  $("game-index").addEventListener("change", () => viewGame(Number($("game-index").value)));
  $("v-first").addEventListener("click", () => stepTo(0));
  $("v-prev").addEventListener("click", () => stepTo(watch.index - 1));
  $("v-next").addEventListener("click", () => stepTo(watch.index + 1));
  $("v-last").addEventListener("click", () => stepTo(Infinity));
  $("live").addEventListener("click", () => { if (!watch.live) live(); });
  document.addEventListener("keydown", e => {
    if ($("view-train").hidden) return;
    if (e.key === "ArrowLeft") stepTo(watch.index - 1);
    if (e.key === "ArrowRight") stepTo(watch.index + 1);
  });
  if (location.hash === "#train") showView("train");
  await newGame();
}

init().catch(e => { $("status").textContent = `could not start: ${e.message}`; });
