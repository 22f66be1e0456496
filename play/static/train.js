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
    const wide = (text) => { const c = tr.insertCell(); c.textContent = text; c.className = "wide-only"; };
    wide(fmt(r.weights_version));
    wide(fmt(r.games));
    wide(fmt(r.positions_per_s));
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
  $("play-run").hidden = !run.network;
  drawElo(await api(`/api/runs/${encodeURIComponent(name)}/elo`));
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

function niceStep(span, ticks) {  // a round tick spacing: 1, 2 or 5 times a power of ten
  const raw = Math.max(span, 1e-9) / ticks, power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map(k => k * power).find(k => k >= raw);
}

function drawElo(chart) {
  // The run's rated candidates as eval/curve.csv has them (the server reads the file), with
  // their 95% intervals, by training step (by weights version where a step is unknown), and
  // the ladder's rungs near them as dashed lines. Hover a point for its values.
  const svg = $("elo");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const points = chart.points;
  const W = 480, H = 240, L = 46, R = 86, T = 10, B = 34;
  el("rect", { x: 0, y: 0, width: W, height: H, fill: "#fff", stroke: "#ccc" }, svg);
  if (!points.length) {
    const t = el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", fill: "#777" }, svg);
    t.textContent = "no rated candidates yet";
    return;
  }
  const byStep = points.every(p => p.step !== null && p.step !== undefined);
  const xOf = p => byStep ? p.step : p.version;
  const low = p => p.lower ?? p.elo, high = p => p.upper ?? p.elo;
  let lo = Math.min(...points.map(low)), hi = Math.max(...points.map(high));
  const margin = Math.max(50, (hi - lo) * 0.15);
  const rungs = chart.rungs.filter(r => r.elo >= lo - margin && r.elo <= hi + margin);
  for (const r of rungs) { lo = Math.min(lo, r.elo); hi = Math.max(hi, r.elo); }
  if (hi - lo < 50) { lo -= 25; hi += 25; }
  const xs = points.map(xOf), x0 = Math.min(...xs), x1 = Math.max(...xs);
  const x = v => L + (x1 === x0 ? 0.5 : (v - x0) / (x1 - x0)) * (W - L - R);
  const y = v => H - B - (v - lo) / (hi - lo) * (H - T - B);
  const ystep = niceStep(hi - lo, 5);
  for (let v = Math.ceil(lo / ystep) * ystep; v <= hi; v += ystep) {
    el("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eee" }, svg);
    const t = el("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end", class: "axis elo-y" }, svg);
    t.textContent = v.toFixed(0);
  }
  const xstep = x1 === x0 ? 1 : niceStep(x1 - x0, 5);
  for (let v = Math.ceil(x0 / xstep) * xstep; v <= x1; v += xstep) {
    el("line", { x1: x(v), x2: x(v), y1: H - B, y2: H - B + 4, stroke: "#999" }, svg);
    const t = el("text", { x: x(v), y: H - B + 15, "text-anchor": "middle", class: "axis elo-x" }, svg);
    t.textContent = v.toLocaleString("en");
  }
  const title = el("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", class: "axis" }, svg);
  title.textContent = `${byStep ? "training step" : "weights version"} (from ${chart.source})`;
  const ytitle = el("text", { x: 10, y: T + 8, class: "axis" }, svg);
  ytitle.textContent = "Elo";
  for (const r of rungs) {
    el("line", { x1: L, x2: W - R, y1: y(r.elo), y2: y(r.elo), class: "elo-rung" }, svg);
    const t = el("text", { x: W - R + 3, y: y(r.elo) + 3, class: "elo-rung-label" }, svg);
    t.textContent = `${r.player} ${r.elo.toFixed(0)}`;
  }
  const band = points.map(p => `${x(xOf(p))},${y(high(p))}`)
    .concat([...points].reverse().map(p => `${x(xOf(p))},${y(low(p))}`));
  el("polygon", { points: band.join(" "), fill: "#cde", stroke: "none", "fill-opacity": 0.7 }, svg);
  el("polyline", { points: points.map(p => `${x(xOf(p))},${y(p.elo)}`).join(" "), fill: "none",
                   stroke: "#247", "stroke-width": 2 }, svg);
  for (const p of points) {
    el("line", { x1: x(xOf(p)), x2: x(xOf(p)), y1: y(low(p)), y2: y(high(p)), stroke: "#247" }, svg);
    const c = el("circle", { cx: x(xOf(p)), cy: y(p.elo), r: 3.5, fill: "#247", class: "elo-point",
                             "data-version": p.version, "data-step": p.step ?? "",
                             "data-elo": p.elo, "data-lower": low(p), "data-upper": high(p) }, svg);
    const tip = el("title", {}, c);
    tip.textContent = `v${p.version}${p.step === null || p.step === undefined ? "" : `, step ${p.step}`}: ` +
      `Elo ${p.elo.toFixed(0)} [${low(p).toFixed(0)}, ${high(p).toFixed(0)}]` +
      (p.games ? `, ${p.games} games` : "");
  }
}

function playRunNetwork() {  // the run's newest network as the opponent of a new game
  if (!watch.run || !watch.run.network) return;
  $("opponent").value = `${watch.run.network}:sims=${state.config.default_simulations}`;
  showView("play");
  newGame().then(renderOpponent);
}

async function loadGameFile(file) {
  watch.live = false;
  const url = `/api/runs/${encodeURIComponent(watch.run.name)}/games/${file}?format=json`;
  watch.games = await api(url);
  const sel = $("game-index");
  sel.textContent = "";
  watch.games.forEach((g, i) => sel.add(new Option(
    `game ${g.number} (${g.moves.length} plies, ${g.result})`, i)));
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
  $("v-info").textContent = `ply ${index} of ${g.moves.length}` +
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
