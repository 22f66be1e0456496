// What survives a reload, and links that share a position or a game.
//
// The page keeps its state in localStorage: the game shown with its variations, comments and
// marks, the move shown, the colour, the opponent, the analysis engine and the clock settings.
// A link names a game by its start FEN and moves in the URL fragment
// (`#fen=B:W21,22:B1,2&moves=11-15,23-19`): opening it shows that game on the analysis board.
"use strict";

const STORE_KEY = "checkerzero.page.v1";  // a new layout gets a new key: an old one is ignored
let storeTimer = null;
let restoring = false;  // no saving while the saved state is being put back

function saveState() {
  if (restoring) return;
  clearTimeout(storeTimer);
  storeTimer = setTimeout(saveNow, 200);
}

function saveNow() {
  const e = state.entry, tree = state.tree;
  if (!e || !tree || !state.node || state.setup) return;
  const data = {
    colour: state.colour,
    opponent: $("opponent").value.trim(),
    engine: $("engine").value,
    numbers: board.numbers,
    clock: clockSettings(),
    game: { fen: tree.fen, tags: e.tags || null, extra: e.extra || {}, result: e.result || "*",
            comment: e.comment || "", over: e.over || null,
            line: tree.lineJSON(tree.root.children[0]), at: tree.indices(state.node) },
  };
  try { localStorage.setItem(STORE_KEY, JSON.stringify(data)); } catch (err) { /* full */ }
}

function savedState() {
  try { return JSON.parse(localStorage.getItem(STORE_KEY) || "null"); } catch (err) { return null; }
}

async function restoreState() {  // true when a saved game was put back
  const data = savedState();
  if (!data || !data.game) return false;
  restoring = true;
  try {
    if (data.opponent) $("opponent").value = data.opponent;
    if (data.engine && [...$("engine").options].some(o => o.value === data.engine)) {
      $("engine").value = data.engine;
    }
    if (typeof data.numbers === "boolean") {
      $("numbers").checked = data.numbers;
      board.numbers = viewer.numbers = data.numbers;
    }
    if (data.clock) {
      $("clock-mode").value = data.clock.mode || "none";
      $("clock-base").value = data.clock.base;
      $("clock-inc").value = data.clock.inc;
      $("clock-inc-row").hidden = $("clock-mode").value !== "game";
      $("clock-base-unit").textContent = $("clock-mode").value === "game" ? "min" : "s";
    }
    state.opponent = $("opponent").value.trim() || state.config.default_opponent;
    setColour(["B", "W", "none", "both"].includes(data.colour) ? data.colour : "both");
    const g = data.game;
    await openGame({ fen: g.fen, moves: [], line: g.line, tags: g.tags, extra: g.extra,
                     result: g.result, comment: g.comment, over: g.over }, { at: g.at });
    return true;
  } catch (err) {
    $("status").textContent = `the saved game could not be restored (${err.message}); a new game`;
    return false;
  } finally {
    restoring = false;
  }
}

// --- links -----------------------------------------------------------------------------------
function linkParams() {  // {fen, moves} from the URL fragment or query, or null
  for (const source of [location.hash.slice(1), location.search.slice(1)]) {
    const p = new URLSearchParams(source);
    if (p.has("fen") || p.has("moves")) {
      const moves = (p.get("moves") || "").split(/[,\s]+/).filter(Boolean);
      return { fen: (p.get("fen") || "").trim() || null, moves };
    }
  }
  return null;
}

async function openLink() {  // true when the URL named a game and it was opened
  const link = linkParams();
  if (!link) return false;
  try {
    setColour("both");
    closeFile();
    await openGame({ fen: link.fen, moves: link.moves, tags: null, result: "*", extra: {} });
    $("share-info").textContent = "opened from a link";
    return true;
  } catch (err) {
    $("status").textContent = `the link's game could not be opened: ${err.message}`;
    return false;
  }
}

function shareLink() {  // the game's start and the moves to the position shown, as a link
  const tree = state.tree, n = state.node;
  const p = new URLSearchParams();
  if (tree.fen) p.set("fen", tree.fen);
  p.set("moves", tree.moves(n).join(","));
  const url = `${location.origin}${location.pathname}#${p.toString().replace(/%2C/g, ",")
    .replace(/%3A/g, ":")}`;
  $("share-url").value = url;
  $("share-url").hidden = false;
  $("share-url").select();
  navigator.clipboard && navigator.clipboard.writeText(url).then(
    () => { $("share-info").textContent = "link copied"; },
    () => { $("share-info").textContent = "copy the link above"; });
  return url;
}
