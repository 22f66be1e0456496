// The training view: runs, a run's Elo curve and ratings, its games to step through, and a
// game its self-play actors are playing now.
"use strict";

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
  // One label per version shown: a single rated version gets one, centred under its point.
  const labels = x1 === x0 ? [[x0, "middle"]] : [[x0, "start"], [x1, "end"]];
  for (const [v, anchor] of labels) {
    const t = el("text", { x: x(v), y: H - 8, "font-size": 11, fill: "#555", "text-anchor": anchor,
                           class: "elo-label" }, svg);
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
