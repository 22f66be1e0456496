// PDN files: open one (one game or many, with a game picker), show a game's tags, and save
// the games as strict PDN written by the server (/api/pdn/write).
"use strict";

const files = {
  name: null,     // the open file's name (null: a game started here)
  games: [],      // its games as parsed: { fen, moves, tags, result }, each with its tree once shown
};
const SET_UP_TAGS = ["FEN", "SetUp", "Result"];  // written by the server from the game itself

async function openPdnText(text, name, { at = "start" } = {}) {
  const games = await api("/api/pdn/parse", { pdn: text });
  if (!games.length) throw new Error("no game in the PDN");
  files.name = name;
  files.games = games;
  const picker = $("game-picker");
  picker.textContent = "";
  games.forEach((g, i) => picker.add(new Option(gameLabel(g, i), i)));
  picker.hidden = games.length < 2;
  await openGame(games[0], { at });
  const cap = state.config.limits.max_pdn_games;
  const warnings = games.flatMap(g => g.warnings || []);  // moves read despite a wrong separator
  const info = $("file-info");
  info.textContent = `${name}: ${games.length} game${games.length === 1 ? "" : "s"}` +
    (games.length >= cap ? ` (the server reads the first ${cap})` : "") +
    (warnings.length ? `, ${warnings.length} move${warnings.length === 1 ? "" : "s"} ` +
      "written with the wrong separator read as the one legal move they name" : "");
  info.title = warnings.join("\n");
}

function gameLabel(g, i) {
  const t = g.tags;
  const who = `${t.Black || "?"} – ${t.White || "?"}`;
  const where = [t.Event, t.Date].filter(x => x && x !== "?").join(", ");
  return `${i + 1}. ${who} ${g.result}${where ? `, ${where}` : ""} (${g.moves.length} moves)`;
}

async function openFile(file) {
  $("file-info").textContent = "";
  try {
    const text = await file.text();
    setColour("both");  // a game from a file opens on the analysis board
    await openPdnText(text, file.name);
  } catch (e) {
    $("file-info").textContent = "";
    $("file-info").appendChild(html("span", `${file.name}: ${e.message}`, "error"));
  }
}

async function pickGame(index) {
  await openGame(files.games[index], { at: "start" });
}

function closeFile() {
  files.name = null;
  files.games = [];
  $("game-picker").hidden = true;
  $("game-picker").textContent = "";
  $("file-info").textContent = "";
}

function tagsOf(entry) {  // the tags a game is written with
  if (entry.tags) {
    return Object.fromEntries(Object.entries(entry.tags).filter(([k]) => !SET_UP_TAGS.includes(k)));
  }
  const you = "you", other = state.opponent;
  const black = state.colour === "B" ? you : state.colour === "W" ? other : "";
  const white = state.colour === "W" ? you : state.colour === "B" ? other : "";
  return { Event: "checkerzero play", Black: black || other, White: white || other,
           ...(entry.extra || {}) };
}

function resultOf(entry) {  // the end of the main line decides; else the result the file gave
  const end = entry.tree ? entry.tree.mainLine().at(-1) : null;
  if (end && end.position && end.position.result) return end.position.result;
  return entry.result || "*";
}

function pdnBody(entry) {
  const moves = entry.tree ? entry.tree.moves(entry.tree.mainLine().at(-1)) : entry.moves;
  const fen = entry.tree ? entry.tree.fen : entry.fen;
  return { fen: fen || null, moves, result: resultOf(entry), tags: tagsOf(entry) };
}

function renderTags() {
  const body = $("tags").tBodies[0];
  body.textContent = "";
  if (!state.entry.tags) return;  // a game played here: its tags are in the PDN text
  for (const [k, v] of Object.entries(state.entry.tags)) {
    if (k === "SetUp") continue;
    const tr = body.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = v;
  }
}

let pdnTimer = null;
function treeChanged() {  // the main line may have changed: the PDN text follows, shortly
  clearTimeout(pdnTimer);
  pdnTimer = setTimeout(updatePdn, 150);
}

async function updatePdn() {
  const entry = state.entry;
  try {
    const text = await api("/api/pdn/write", pdnBody(entry));
    if (entry === state.entry) $("pdn-out").value = text;
  } catch (e) { $("pdn-out").value = `(${e.message})`; }
}

async function save() {
  // Every game of the open file (or the game shown), each written by the server: strict PDN.
  const entries = files.name ? files.games : [state.entry];
  const info = $("file-info");
  try {
    const parts = [];
    for (const entry of entries) parts.push(await api("/api/pdn/write", pdnBody(entry)));
    const a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([parts.join("\n")], { type: "application/x-pdn" }));
    a.download = files.name && files.name.endsWith(".pdn") ? files.name : "checkerzero.pdn";
    a.click();
    info.textContent = `saved ${entries.length} game${entries.length === 1 ? "" : "s"} as ${a.download}`;
  } catch (e) { info.textContent = `save: ${e.message}`; }
}
