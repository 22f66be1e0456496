// Analysis of the position shown (once, or deepening until stopped) and of a whole game, by
// one of two engines: "ab", the alpha-beta with the learned evaluation (the best moves with
// scores, depths and lines; exact results in the endgame database), or "network", the MCTS
// network's view (W/D/L, visits). Also the graph of Black's expected score along the line.
"use strict";

const analysis = { serial: 0, deepening: false, deepSerial: 0, deepId: null, gameSerial: 0 };

function visits() {
  return Math.max(1, Number($("analysis-sims").value) || state.config.default_simulations);
}

function analysisNetwork(sims) {
  const source = state.config.default_player.split(":")[0];
  return `${source}:sims=${sims}`;
}

function engine() { return $("engine").value; }

function engineOf(r) { return r.lines ? "ab" : "network"; }  // today's answers: the network's

function effort(r) { return r.lines ? r.depth || 0 : r.visits || 0; }

function store(n, r) {  // an answer kept on its node: the score for the graph, the deepest lines
  if (r.score !== null && r.score !== undefined) n.score = r.turn === "B" ? r.score : 1 - r.score;
  else if (r.result) n.score = { "1-0": 1, "0-1": 0, "1/2-1/2": 0.5 }[r.result];
  if (r.score === null || r.score === undefined) return;
  n.analyses = n.analyses || {};
  const kind = engineOf(r), old = n.analyses[kind];
  if (!old || effort(r) >= effort(old)) n.analyses[kind] = r;
  n.analysis = n.analyses[engine()] || n.analyses[kind];
}

async function analyseNodes(tree, nodes, budget) {
  // budget: visits for the network; milliseconds a position for the alpha-beta (null: the
  // server's default)
  const positions = nodes.map(n => ({ id: n.id, fen: tree.fen, moves: tree.moves(n) }));
  const body = engine() === "ab"
    ? { engine: "ab", positions, ...(budget ? { ms: budget } : {}) }
    : { engine: "network", network: analysisNetwork(budget || visits()), positions };
  const answer = await api("/api/analyse", body);
  for (const r of answer.results) {
    const n = tree.byId.get(r.id);
    if (n) store(n, r);
  }
  return answer.results;
}

function shownAnalysis(n) {  // the analysis of the engine chosen, if it has one for n
  return n.analyses ? n.analyses[engine()] || null : null;
}

function engineChanged() {
  $("sims-label").hidden = engine() !== "network";
  stopDeepening("");
  const n = state.node;
  if (!n) return;
  n.analysis = shownAnalysis(n);
  if (n.analysis) renderAnalysis(n.analysis);
  else clearAnalysis("");
  saveState();
  analyseNow();
}

function positionChanged() {  // the board shows another position: nothing of the old one stays
  if (analysis.deepening) stopDeepening("stopped: the position changed");
  else $("deepen-status").textContent = "";
  const n = state.node;
  n.analysis = shownAnalysis(n);
  if (n.analysis) renderAnalysis(n.analysis);
  else clearAnalysis(n.position.result ? "the game is over" : "");
  renderGraph();
  analyseNow();
}

async function analyseNow() {
  const n = state.node, tree = state.tree;
  if (!$("analyse-on").checked || !n || !n.position || n.position.result || state.setup) return;
  const had = shownAnalysis(n);
  if (analysis.deepening || (had && (engine() === "ab" || had.visits >= visits()))) return;
  const serial = ++analysis.serial;
  if (!had) $("wdl-text").textContent = "analysing…";
  try {
    const [r] = await analyseNodes(tree, [n], engine() === "ab" ? null : visits());
    if (serial !== analysis.serial || n !== state.node) return;
    renderAnalysis(n.analysis || r);
    renderGraph();
    renderMoves();
  } catch (e) {
    if (n === state.node) $("wdl-text").textContent = `analysis: ${e.message}`;
  }
}

function clearAnalysis(text) {
  for (const bar of $("wdl").children) bar.style.width = "0";
  $("wdl-text").textContent = text || "";
  $("top").tBodies[0].textContent = "";
  $("lines").tBodies[0].textContent = "";
  $("database").textContent = "";
  $("pv").textContent = "";
}

function men(cp) {  // a score in centi-men as a person reads it: +0.35 (a third of a man up)
  return `${cp > 0 ? "+" : ""}${(cp / 100).toFixed(2)}`;
}

function renderLines(r) {  // the alpha-beta's best moves, best first, with their lines
  $("lines").hidden = false;
  $("top").hidden = true;
  const side = r.turn === "B" ? "Black" : "White";
  const s = r.score === null || r.score === undefined ? 0.5 : r.score;
  const bar = $("wdl").children;
  bar[0].style.width = `${s * 100}%`; bar[1].style.width = "0"; bar[2].style.width = `${(1 - s) * 100}%`;
  $("wdl-text").textContent = `${side} to move: ${r.score_cp === null ? "–" : men(r.score_cp)} ` +
    `(expects ${(s * 100).toFixed(0)}%), depth ${r.depth}, ${r.nodes} nodes in ${Math.round(r.ms)} ms`;
  const db = r.database;
  $("database").textContent = db ? `${db.result} in the endgame database` +
    (db.distance !== null && db.distance !== undefined ? ` (in ${db.distance} plies)` : "") : "";
  const body = $("lines").tBodies[0];
  body.textContent = "";
  r.lines.forEach((l, i) => {
    const tr = body.insertRow();
    if (i === 0) tr.className = "best";
    tr.insertCell().textContent = l.move;
    tr.insertCell().textContent = men(l.score_cp);
    tr.insertCell().textContent = l.depth;
    const line = tr.insertCell();
    line.textContent = (l.line || []).join(" ");
    line.className = "line";
  });
  $("pv").textContent = (r.pv || []).join(" ");
}

function renderAnalysis(r) {
  if (r.lines) return renderLines(r);
  $("lines").hidden = true;
  $("top").hidden = false;
  $("database").textContent = "";
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

// --- deepening: the server searches the position on until stopped (POST /api/deepen: the
// alpha-beta one ply deeper each iteration, the network twice the time each round); the page
// polls what it has found and stops it with DELETE --------------------------------------------
const DEEPEN_POLL_MS = 400;
const STOPPED_WHY = { time: "stopped at the server's time limit", idle: "stopped",
  replaced: "stopped: another deepening of this page took over", done: "finished" };

async function deepen() {
  if (analysis.deepening) { stopDeepening("stopped"); return; }
  const n = state.node, tree = state.tree;
  if (!n || !n.position || n.position.result || state.setup) return;
  analysis.deepening = true;
  const token = ++analysis.deepSerial;
  analysis.serial++;  // a single analysis under way is superseded
  $("deepen").textContent = "Stop";
  const ab = engine() === "ab";
  $("deepen-status").textContent = "deepening: starting…";
  const body = { fen: tree.fen, moves: tree.moves(n), engine: ab ? "ab" : "network",
    ...(ab ? {} : { network: analysisNetwork(visits()) }) };
  let view;
  try {
    view = await api("/api/deepen", body);
  } catch (e) {
    if (token === analysis.deepSerial) stopDeepening(`stopped: ${e.message}`);
    return;
  }
  if (token !== analysis.deepSerial) { endDeepening(view.id); return; }  // stopped meanwhile
  analysis.deepId = view.id;
  let shown = null;
  for (;;) {
    const r = view.analysis;
    if (r && JSON.stringify(r) !== shown) {
      shown = JSON.stringify(r);
      store(n, r);
      if (n === state.node) { renderAnalysis(n.analysis || r); renderGraph(); renderMoves(); }
      $("deepen-status").textContent = ab ? `deepening: depth ${r.depth}…`
        : `deepening: ${r.visits} visits…`;
    }
    if (!view.running) {
      stopDeepening(STOPPED_WHY[view.stopped] || `stopped: ${view.stopped}`);
      return;
    }
    await new Promise(done => setTimeout(done, DEEPEN_POLL_MS));
    if (token !== analysis.deepSerial) return;  // stopped, or the position changed
    try {
      view = await api(`/api/deepen/${view.id}`);
    } catch (e) {
      if (token === analysis.deepSerial) stopDeepening(`stopped: ${e.message}`);
      return;
    }
    if (token !== analysis.deepSerial) return;
  }
}

function endDeepening(id) {  // the server's search stopped too (its answer is not needed)
  if (id) fetch(`/api/deepen/${id}`, { method: "DELETE" }).catch(() => {});
}

function stopDeepening(why) {
  const was = analysis.deepening;
  analysis.deepening = false;
  analysis.deepSerial++;
  endDeepening(analysis.deepId);
  analysis.deepId = null;
  $("deepen").textContent = "Deepen";
  if (was || why) $("deepen-status").textContent = why;
}

// --- the whole game ------------------------------------------------------------------------
async function analyseGame() {
  const tree = state.tree, game = state.game, serial = ++analysis.gameSerial;
  const line = tree.line(state.node);
  const sims = engine() === "ab" ? null : visits();
  const chunk = Math.min(state.config.limits.max_batch_positions, engine() === "ab" ? 4 : 16);
  const status = $("game-analysis");
  const button = $("analyse-game");
  button.disabled = true;
  status.textContent = `analysing: 0 of ${line.length} positions…`;
  try {
    for (let k = 0; k < line.length; k += chunk) {
      await analyseNodes(tree, line.slice(k, k + chunk), sims);
      if (game !== state.game || serial !== analysis.gameSerial) return;
      status.textContent = `analysing: ${Math.min(k + chunk, line.length)} of ${line.length} positions…`;
      renderGraph();
      renderMoves();
    }
    const marks = line.slice(1).map(markClass);
    const count = (cls, one, many) => {
      const k = marks.filter(m => m === cls).length;
      return `${k} ${k === 1 ? one : many}`;
    };
    const how = sims ? `at ${sims} visits` : "by the alpha-beta";
    status.textContent = `done: ${line.length} positions ${how}; ` +
      `${count("mk blunder", "blunder", "blunders")}, ${count("mk mistake", "mistake", "mistakes")}, ` +
      `${count("mk inacc", "inaccuracy", "inaccuracies")}.`;
    if (state.node.analysis) renderAnalysis(state.node.analysis);
  } catch (e) {
    if (game === state.game) status.textContent = `analysis stopped: ${e.message}`;
  } finally {
    if (serial === analysis.gameSerial) button.disabled = false;
  }
}

function gameAnalysisReset() {  // another game: its analysis (if any) is its own
  analysis.gameSerial++;
  $("analyse-game").disabled = false;
  $("game-analysis").textContent = "";
}

// --- the graph: Black's expected score by ply, with axes, hover values and a cursor -------------
const GRAPH = { W: 400, H: 140, L: 34, R: 6, T: 6, B: 20, line: [] };

function graphX(i, n) { return GRAPH.L + (i / n) * (GRAPH.W - GRAPH.L - GRAPH.R); }
function graphY(v) { return GRAPH.T + (1 - v) * (GRAPH.H - GRAPH.T - GRAPH.B); }

function renderGraph() {
  const svg = $("graph");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  if (!state.node) return;
  const { W, H, L, R, B } = GRAPH;
  const line = state.tree.line(state.node);
  GRAPH.line = line;
  const n = Math.max(line.length - 1, 10);
  const x = i => graphX(i, n), y = graphY;
  el("rect", { x: 0, y: 0, width: W, height: H, fill: "#fafafa", stroke: "#ccc" }, svg);
  for (const [v, label] of [[1, "100%"], [0.75, "75%"], [0.5, "50%"], [0.25, "25%"], [0, "0%"]]) {
    el("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: v === 0.5 ? "#999" : "#e4e4e4",
                 "stroke-dasharray": v === 0.5 ? "4 3" : "" }, svg);
    const t = el("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end", class: "axis" }, svg);
    t.textContent = label;
  }
  const step = n <= 20 ? 5 : n <= 60 ? 10 : n <= 150 ? 20 : 50;
  for (let ply = 0; ply <= n; ply += step) {
    el("line", { x1: x(ply), x2: x(ply), y1: H - B, y2: H - B + 3, stroke: "#999" }, svg);
    const t = el("text", { x: x(ply), y: H - B + 14, "text-anchor": "middle", class: "axis" }, svg);
    t.textContent = ply;
  }
  const unit = el("text", { x: W - R, y: H - B + 14, "text-anchor": "end", class: "axis" }, svg);
  unit.textContent = "ply";
  const at = state.node.ply;
  el("line", { x1: x(at), x2: x(at), y1: 0, y2: H - B, stroke: "#2a7de1", "stroke-width": 1.5,
               class: "graph-cursor", "data-ply": at }, svg);
  const pts = [];
  line.forEach((node, i) => { if (node.score !== undefined) pts.push([i, node.score, node]); });
  if (pts.length > 1) {
    el("polyline", { points: pts.map(([i, v]) => `${x(i)},${y(v)}`).join(" "), fill: "none",
                     stroke: "#333", "stroke-width": 1.5 }, svg);
  }
  for (const [i, v, node] of pts) {
    const cls = markClass(node);
    const colour = { "mk blunder": "#c00", "mk mistake": "#e60", "mk inacc": "#c90" }[cls];
    const c = el("circle", { cx: x(i), cy: y(v), r: colour ? 4.5 : 2.5, fill: colour || "#333",
                             "data-ply": i, "data-value": v.toFixed(3),
                             class: cls ? "graph-mark" : "graph-point" }, svg);
    const tip = el("title", {}, c);
    tip.textContent = `ply ${i}${node.move ? ` (${node.move}${mark(node)})` : " (start)"}: ` +
      `Black expects ${(v * 100).toFixed(1)}%`;
  }
}

function graphClick(evt) {  // the ply nearest the click along the line shown
  const svg = $("graph");
  const pt = svg.createSVGPoint();
  pt.x = evt.clientX; pt.y = evt.clientY;
  const p = pt.matrixTransform(svg.getScreenCTM().inverse());
  const line = GRAPH.line;
  const n = Math.max(line.length - 1, 10);
  const ply = Math.round(((p.x - GRAPH.L) / (GRAPH.W - GRAPH.L - GRAPH.R)) * n);
  const target = line[Math.max(0, Math.min(line.length - 1, ply))];
  if (target && !state.setup) goTo(target);
}
