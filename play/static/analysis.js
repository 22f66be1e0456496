// The network's analysis: of the position shown (once, or deepening until stopped), of a whole
// game, and the graph of Black's expected score along the line shown.
"use strict";

const analysis = { serial: 0, deepening: false, deepSerial: 0, gameSerial: 0 };

function visits() {
  return Math.max(1, Number($("analysis-sims").value) || state.config.default_simulations);
}

function analysisNetwork(sims) {
  const source = state.config.default_player.split(":")[0];
  return `${source}:sims=${sims}`;
}

function store(n, r) {  // an answer kept on its node: the score for the graph, the deepest lines
  if (r.score !== null) n.score = r.turn === "B" ? r.score : 1 - r.score;
  else if (r.result) n.score = { "1-0": 1, "0-1": 0, "1/2-1/2": 0.5 }[r.result];
  if (r.score !== null && (!n.analysis || r.visits >= n.analysis.visits)) n.analysis = r;
}

async function analyseNodes(tree, nodes, sims) {
  const answer = await api("/api/analyse", {
    network: analysisNetwork(sims),
    positions: nodes.map(n => ({ id: n.id, fen: tree.fen, moves: tree.moves(n) })) });
  for (const r of answer.results) {
    const n = tree.byId.get(r.id);
    if (n) store(n, r);
  }
  return answer.results;
}

function positionChanged() {  // the board shows another position: nothing of the old one stays
  if (analysis.deepening) stopDeepening("stopped: the position changed");
  else $("deepen-status").textContent = "";
  const n = state.node;
  if (n.analysis) renderAnalysis(n.analysis);
  else clearAnalysis(n.position.result ? "the game is over" : "");
  renderGraph();
  analyseNow();
}

async function analyseNow() {
  const n = state.node, tree = state.tree;
  if (!$("analyse-on").checked || !n || !n.position || n.position.result || state.setup) return;
  if (analysis.deepening || (n.analysis && n.analysis.visits >= visits())) return;
  const serial = ++analysis.serial;
  if (!n.analysis) $("wdl-text").textContent = "analysing…";
  try {
    const [r] = await analyseNodes(tree, [n], visits());
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
  $("pv").textContent = "";
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

// --- deepening: the same position searched again with twice the visits, until stopped --------
async function deepen() {
  if (analysis.deepening) { stopDeepening("stopped"); return; }
  const n = state.node, tree = state.tree;
  if (!n || !n.position || n.position.result || state.setup) return;
  analysis.deepening = true;
  const token = ++analysis.deepSerial;
  analysis.serial++;  // a single analysis under way is superseded
  $("deepen").textContent = "Stop";
  const max = state.config.limits.max_simulations;
  let sims = Math.min(max, n.analysis ? Math.max(visits(), 2 * n.analysis.visits) : visits());
  for (;;) {
    $("deepen-status").textContent = `deepening: searching ${sims} visits…`;
    let r;
    try {
      [r] = await analyseNodes(tree, [n], sims);
    } catch (e) {
      if (token === analysis.deepSerial) stopDeepening(`stopped: ${e.message}`);
      return;
    }
    if (n === state.node) { renderAnalysis(n.analysis || r); renderGraph(); renderMoves(); }
    if (token !== analysis.deepSerial) return;  // stopped, or the position changed
    if (sims >= max) { stopDeepening(`stopped at the limit of ${max} visits`); return; }
    sims = Math.min(max, sims * 2);
  }
}

function stopDeepening(why) {
  const was = analysis.deepening;
  analysis.deepening = false;
  analysis.deepSerial++;
  $("deepen").textContent = "Deepen";
  if (was || why) $("deepen-status").textContent = why;
}

// --- the whole game ------------------------------------------------------------------------
async function analyseGame() {
  const tree = state.tree, game = state.game, serial = ++analysis.gameSerial;
  const line = tree.line(state.node);
  const sims = visits();
  const chunk = Math.min(state.config.limits.max_batch_positions, 16);  // progress as it goes
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
    status.textContent = `done: ${line.length} positions at ${sims} visits; ` +
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

// --- the graph -------------------------------------------------------------------------------
const GRAPH = { W: 400, H: 120, line: [] };

function renderGraph() {
  const svg = $("graph");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  if (!state.node) return;
  const { W, H } = GRAPH;
  const line = state.tree.line(state.node);
  GRAPH.line = line;
  const n = Math.max(line.length - 1, 10);
  const x = i => 4 + (i / n) * (W - 8), y = v => H - 4 - v * (H - 8);
  el("rect", { x: 0, y: 0, width: W, height: H, fill: "#fafafa", stroke: "#ccc" }, svg);
  el("line", { x1: 0, x2: W, y1: y(0.5), y2: y(0.5), stroke: "#bbb", "stroke-dasharray": "4 3" }, svg);
  const at = state.node.ply;
  el("line", { x1: x(at), x2: x(at), y1: 0, y2: H, stroke: "#2a7de1", "stroke-width": 1.5,
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
    el("circle", { cx: x(i), cy: y(v), r: colour ? 4.5 : 2.5, fill: colour || "#333",
                   "data-ply": i, class: cls ? "graph-mark" : "graph-point" }, svg);
  }
}

function graphClick(evt) {  // the ply nearest the click along the line shown
  const svg = $("graph");
  const pt = svg.createSVGPoint();
  pt.x = evt.clientX; pt.y = evt.clientY;
  const p = pt.matrixTransform(svg.getScreenCTM().inverse());
  const line = GRAPH.line;
  const n = Math.max(line.length - 1, 10);
  const ply = Math.round(((p.x - 4) / (GRAPH.W - 8)) * n);
  const target = line[Math.max(0, Math.min(line.length - 1, ply))];
  if (target && !state.setup) goTo(target);
}
