// PDN files: open one (one game or many, with a game picker; bad games listed, the rest read),
// show a game's tags, and save the games with their comments, marks and variations as strict
// PDN written by the server (/api/pdn/save).
"use strict";

const files = {
  name: null,     // the open file's name (null: a game started here)
  games: [],      // its games as parsed: { fen, moves, tags, result }, each with its tree once shown
};
const SET_UP_TAGS = ["FEN", "SetUp", "Result"];  // written by the server from the game itself

async function openPdnText(text, name, { at = "start" } = {}) {
  const answer = await api("/api/pdn/read", { pdn: text });
  const games = answer.games, bad = answer.errors;
  if (!games.length) {
    throw new Error(bad.length ? `no game could be read: ${bad[0].message}` : "no game in the PDN");
  }
  files.name = name;
  files.games = games;
  const picker = $("game-picker");
  picker.textContent = "";
  games.forEach((g, i) => picker.add(new Option(gameLabel(g, i), i)));
  picker.hidden = games.length < 2;
  await openGame(games[0], { at });
  const warnings = games.flatMap(g => g.warnings || []);  // what the reader tolerated
  const cut = warnings.filter(w => w.includes("the variation is not kept")).length;
  const separators = warnings.length - cut;  // moves read despite a wrong separator
  const info = $("file-info");
  info.textContent = `${name}: ${games.length} game${games.length === 1 ? "" : "s"}` +
    (answer.capped ? ` (the server reads the first ${state.config.limits.max_pdn_games})` : "") +
    (separators ? `, ${separators} move${separators === 1 ? "" : "s"} ` +
      "written with the wrong separator read as the one legal move they name" : "") +
    (cut ? `, ${cut} side line${cut === 1 ? "" : "s"} cut at an illegal move` : "") +
    (bad.length ? `, ${bad.length} bad game${bad.length === 1 ? "" : "s"} not read (listed below)` : "");
  info.title = warnings.join("\n");
  showBadGames(bad);
}

function showBadGames(bad) {  // each game of the file that could not be read, by number and names
  const box = $("file-errors");
  box.textContent = "";
  box.hidden = !bad.length;
  for (const e of bad) {
    const where = `game ${e.number}: ${e.names}${e.move ? `, ${e.move}` : ""}`;
    const li = html("li", where);
    li.title = e.message;
    box.appendChild(li);
  }
}

function gameLabel(g, i) {
  const t = g.tags;
  const who = `${t.Black || "?"} – ${t.White || "?"}`;
  const where = [t.Event, t.Date].filter(x => x && x !== "?").join(", ");
  return `${i + 1}. ${who} ${g.result}${where ? `, ${where}` : ""} (${g.moves.length} plies)`;
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
  showBadGames([]);
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

function resultOf(entry) {  // a game ended here (resigned, drawn, on time), else the board's
  if (entry.over) return entry.over.result;
  const end = entry.tree ? entry.tree.mainLine().at(-1) : null;
  if (end && end.position && end.position.result) return end.position.result;
  return entry.result || "*";
}

function lineOf(entry) {  // the game's tree as a PDN line (comments, marks, variations)
  if (entry.tree) return entry.tree.lineJSON(entry.tree.root.children[0]);
  if (entry.line && entry.line.length) return entry.line;
  return (entry.moves || []).map(move => ({ move }));
}

function pdnBody(entry) {
  const fen = entry.tree ? entry.tree.fen : entry.fen;
  return { fen: fen || null, line: lineOf(entry), result: resultOf(entry), tags: tagsOf(entry),
           comment: entry.comment || "" };
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
function treeChanged() {  // the game changed: the PDN text and the saved state follow, shortly
  clearTimeout(pdnTimer);
  pdnTimer = setTimeout(updatePdn, 150);
  saveState();
}

async function updatePdn() {
  const entry = state.entry;
  try {
    const text = await api("/api/pdn/save", { games: [pdnBody(entry)] });
    if (entry === state.entry) $("pdn-out").value = text;
  } catch (e) { $("pdn-out").value = `(${e.message})`; }
}

async function save() {
  // Every game of the open file (or the game shown), with its comments, marks and variations,
  // written by the server: strict PDN.
  const entries = files.name ? files.games : [state.entry];
  const info = $("file-info");
  try {
    const text = await api("/api/pdn/save", { games: entries.map(pdnBody) });
    const a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([text], { type: "application/x-pdn" }));
    a.download = files.name && files.name.endsWith(".pdn") ? files.name : "checkerzero.pdn";
    a.click();
    info.textContent = `saved ${entries.length} game${entries.length === 1 ? "" : "s"} as ${a.download}`;
  } catch (e) { info.textContent = `save: ${e.message}`; }
}
