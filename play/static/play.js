// The game on the board: moves and variations, stepping through them, the opponent's replies,
// the FEN of the position shown, and setting up a position by clicking squares.
"use strict";

const state = {
  config: null,
  openings: [],
  entry: null,         // the game shown: { fen, moves, tags, result, tree } (tree once opened)
  tree: new GameTree(null),
  node: null,          // the position shown (a node of the tree)
  colour: "B",         // the side the user plays: B, W, none (watch) or both (analysis board)
  opponent: "",
  thinking: false,
  game: 0,             // bumped by every game opened: a late answer for an old one is dropped
  nav: 0,              // bumped by every step: a late position for an old step is dropped
  target: null,        // the node a step is on its way to (null once shown)
  setup: null,         // set-up mode: { turn, pieces } (pieces: square -> b, B, w or W)
};

const board = new Board($("board"), {
  interactive: true, onMove: move => userMove(move), onEdit: square => editSquare(square) });

function userToMove() {
  const p = state.node && state.node.position;
  if (!p || p.result || state.setup || gameOver()) return false;
  if (state.colour === "both") return true;
  return p.turn === state.colour;
}

async function describeNode(n, tree) {
  if (!n.position) {
    n.position = await api("/api/position", { fen: tree.fen, moves: tree.moves(n) });
  }
  return n.position;
}

// --- stepping -------------------------------------------------------------------------------
async function goTo(n) {
  if (!n) return;
  const serial = ++state.nav, game = state.game, tree = state.tree;
  state.target = n;  // where the steps asked for so far lead, while its position loads
  let position;
  try {
    position = await describeNode(n, tree);
    if (n.parent && !n.squares) {  // a move read from PDN: its squares, for the highlight
      const before = await describeNode(n.parent, tree);
      const m = before.legal.find(x => x.move === n.move);
      n.squares = m ? m.squares : null;
    }
  } catch (e) {
    if (serial === state.nav) state.target = null;
    $("status").textContent = e.message;
    return;
  }
  if (serial !== state.nav || game !== state.game) return;
  state.target = null;
  const changed = state.node !== n;
  state.node = n;
  board.enabled = userToMove() && !state.thinking;
  board.set(position, n.squares);
  renderStatus();
  renderMoves();
  renderFen();
  renderNotes();
  saveState();
  if (changed) positionChanged();  // analysis.js: stale panels cleared, the new one analysed
  else renderGraph();
}

function step(where) {
  if (state.setup || !state.node) return;
  const n = state.target || state.node;  // a key pressed again before the board caught up
  const target = {
    first: state.tree.root,
    prev: n.parent,
    next: n.children[0],
    last: state.tree.line(n).at(-1),
  }[where];
  if (target) goTo(target);
}

function renderStatus() {
  const s = $("status");
  if (state.setup) {
    s.classList.remove("over");
    s.textContent = "Setting up a position: click squares, then Done.";
    return;
  }
  const p = state.node.position;
  const over = gameOver();
  s.classList.toggle("over", !!p.result || !!over);
  const where = state.tree.isMain(state.node) ? "" : " (variation)";
  if (over && !p.result) {
    s.textContent = `${over.text} (${over.result})${where}`;
    return;
  }
  if (p.result) {
    const who = { "1-0": "Black wins", "0-1": "White wins", "1/2-1/2": "Draw" }[p.result];
    s.textContent = `${who} (${p.result}): ${p.end_reason}${where}`;
    return;
  }
  const side = p.turn === "B" ? "Black" : "White";
  let text = `${side} to move`;
  if (state.thinking) text += `: ${opponentName(state.opponent)} is thinking…`;
  else if (userToMove()) text += " (you)";
  if (p.must_capture) text += ". A capture is compulsory";
  const quiet = Math.floor(p.no_progress / 2);
  if (quiet >= 10) text += `. ${quiet} of 40 moves each without capture or man move`;
  s.textContent = text + where + ".";
}

function renderFen() {
  $("fen-error").textContent = "";
  if (document.activeElement !== $("fen-current")) $("fen-current").value = state.node.position.fen;
}

// --- the move list: the main line with variations in brackets --------------------------------
function renderMoves() {
  const list = $("movelist");
  list.textContent = "";
  const tree = state.tree;
  let current = null;
  const appendLine = (into, first) => {
    let numbered = true;  // a line, and the move after a variation, start with their number
    for (let n = first; n; n = n.children[0]) {
      const ply = n.ply - 1 + (tree.whiteFirst ? 1 : 0);  // plies before the move, Black first
      if (n.before) {
        into.appendChild(html("span", n.before, "comment"));
        into.appendChild(document.createTextNode(" "));
        numbered = true;
      }
      if (ply % 2 === 0 || numbered) {
        into.appendChild(html("b", `${Math.floor(ply / 2) + 1}.${ply % 2 ? ".." : ""}`));
      }
      const span = html("span", n.move + (n.mark || mark(n)), `mv ${markClass(n)}`);
      span.dataset.node = n.id;
      span.dataset.ply = n.ply;
      if (n === state.node) { span.classList.add("current"); current = span; }
      into.appendChild(span);
      into.appendChild(document.createTextNode(" "));  // lines break between moves only
      numbered = false;
      if (n.nags.length) {
        into.appendChild(html("span", n.nags.map(x => `$${x}`).join(" "), "nag"));
        into.appendChild(document.createTextNode(" "));
      }
      if (n.comment) {
        into.appendChild(html("span", n.comment, "comment"));
        into.appendChild(document.createTextNode(" "));
        numbered = true;
      }
      const siblings = n.parent.children;
      if (siblings[0] === n && siblings.length > 1) {
        for (const v of siblings.slice(1)) {
          const box = html("em", null, "variation");
          box.appendChild(document.createTextNode("( "));
          appendLine(box, v);
          box.appendChild(document.createTextNode(") "));
          into.appendChild(box);
        }
        numbered = true;
      }
    }
  };
  if (tree.root.children[0]) appendLine(list, tree.root.children[0]);
  else list.appendChild(html("i", "no moves yet", "small"));
  if (current) {  // keep the current move in view inside the list (not the page)
    const top = current.offsetTop;
    if (top < list.scrollTop || top > list.scrollTop + list.clientHeight - 20) {
      list.scrollTop = top - list.clientHeight / 2;
    }
  }
  const inVariation = !tree.isMain(state.node);
  $("main-line").disabled = !inVariation;
  $("promote").disabled = !inVariation;
  $("delete-var").disabled = !inVariation;
}

function drop(n) {  // the mover's loss of expected score with the move that led to n
  if (!n.parent || n.score === undefined || n.parent.score === undefined) return null;
  const blackMoved = state.tree.turnAt(n.ply - 1) === "B";
  return blackMoved ? n.parent.score - n.score : n.score - n.parent.score;
}

function markClass(n) {
  const d = drop(n), t = state.config.analysis;
  if (d === null) return "";
  if (d >= t.blunder) return "mk blunder";
  if (d >= t.mistake) return "mk mistake";
  if (d >= t.inaccuracy) return "mk inacc";
  return "";
}

function mark(n) {
  return { "mk blunder": "??", "mk mistake": "?", "mk inacc": "?!" }[markClass(n)] || "";
}

function backToMainLine() {
  let n = state.node;
  while (!state.tree.isMain(n)) n = n.parent;
  goTo(n);
}

function promoteVariation() {
  state.tree.promote(state.node);
  treeChanged();
  renderMoves();
  renderStatus();
  renderGraph();
}

function deleteVariation() {
  const start = state.tree.variationStart(state.node);
  if (!start) return;
  const parent = state.tree.remove(start);
  treeChanged();
  goTo(parent);
}

// --- moves: the user's, the opponent's, take-backs -------------------------------------------
async function userMove(move) {
  if (!userToMove()) return;
  const from = state.node;
  const played = from.position.legal.find(m => m.move === move);
  const child = state.tree.add(from, move, played ? played.squares : null);
  clockMoved(from.position.turn);
  treeChanged();
  await goTo(child);
  opponentTurn();
}

async function opponentTurn() {
  const at = state.node;
  if (!at || !at.position || at.position.result || state.setup || state.thinking) return;
  if (gameOver()) return;
  if (state.colour === "both" || at.position.turn === state.colour) return;
  state.thinking = true;
  board.enabled = false;
  renderStatus();
  const game = state.game, tree = state.tree;
  try {
    const answer = await api("/api/move", { fen: tree.fen, moves: tree.moves(at),
                                            player: state.opponent });
    if (game !== state.game || gameOver()) return;  // another game, or this one ended meanwhile
    if (answer.score !== undefined && answer.score !== null && at.score === undefined) {
      at.score = answer.turn === "B" ? answer.score : 1 - answer.score;
    }
    const played = at.position.legal.find(m => m.move === answer.move);
    const child = tree.add(at, answer.move, played ? played.squares : null);
    child.position = answer.position;
    child.reply = { player: answer.player, score: answer.score, turn: answer.turn,
                    minimax: answer.minimax || null };
    clockMoved(at.position.turn);
    treeChanged();
    state.thinking = false;
    if (state.node === at) {  // the user stayed: show the reply (else it waits in the list)
      await goTo(child);
      if (state.colour === "none") setTimeout(opponentTurn, 300);
    } else renderMoves();
  } catch (e) {
    if (game === state.game) $("status").textContent = `opponent: ${e.message}`;
  } finally {
    if (game === state.game) {
      state.thinking = false;
      board.enabled = userToMove();
      board.draw();
    }
  }
}

async function undo() {
  const n = state.node;
  if (state.thinking || state.setup || !n || !n.parent) return;
  let target = n.parent;
  if (state.colour === "B" || state.colour === "W") {  // back to the user's turn
    while (target.parent && state.tree.turnAt(target.ply) !== state.colour) target = target.parent;
  }
  if (!n.children.length) {  // the end of a line: the moves taken back are removed
    for (let x = n; x !== target && !x.children.length;) {
      const parent = x.parent;
      state.tree.remove(x);
      x = parent;
    }
    treeChanged();
  }
  await goTo(target);
}

function setColour(colour) {
  state.colour = colour;
  $("colour").value = colour;
  saveState();
  board.flipped = colour === "B";  // the user's side at the bottom; else the printed diagram
  if (!state.node) return;
  board.enabled = userToMove() && !state.thinking;
  board.draw();
  renderStatus();
}

// --- opening a game ---------------------------------------------------------------------------
async function openGame(entry, { at = "end" } = {}) {
  // entry: { fen, moves, tags, result }; its tree is made the first time and kept, so a game of
  // a file picked again comes back with its variations and analysis.
  let tree = entry.tree;
  if (!tree) {
    const root = await api("/api/position", { fen: entry.fen || null, moves: [] });  // bad FEN
    tree = new GameTree(entry.fen || null);
    tree.root.position = root;
    const last = entry.line && entry.line.length ? tree.addJSONLine(tree.root, entry.line)
      : tree.addLine(entry.moves || []);
    if (last !== tree.root) {  // every move is checked
      last.position = await api("/api/position", { fen: tree.fen, moves: tree.moves(last) });
    }
    entry.tree = tree;
  }
  state.game += 1;
  state.entry = entry;
  state.tree = tree;
  state.thinking = false;
  state.node = null;
  state.target = null;
  if (state.setup) endSetup();
  const target = Array.isArray(at) ? tree.at(at) : at === "start" ? tree.root
    : tree.mainLine().at(-1);
  await goTo(target);
  renderTags();
  treeChanged();
  gameAnalysisReset();
  opponentTurn();
}

async function newGame() {
  $("newgame-error").textContent = "";
  setColour($("colour").value);
  state.opponent = $("opponent").value.trim() || state.config.default_opponent;
  clockReset();
  try {
    const start = $("start").value;
    if (start === "pdn") {
      await openPdnText($("pdn-in").value, "pasted.pdn", { at: "end" });
      return;
    }
    const entry = { fen: null, moves: [], tags: null, result: "*", extra: {} };
    if (start === "ballot") {
      const o = state.openings[Number($("ballot").value)];
      entry.moves = [...o.moves];
      entry.extra.Opening = o.name;
    } else if (start === "fen") {
      entry.fen = $("fen").value.trim() || null;
    }
    closeFile();
    await openGame(entry);
    if (playingComputer()) clockStart(state.node.position.turn);
  } catch (e) { $("newgame-error").textContent = e.message; }
}

async function setFen() {
  const fen = $("fen-current").value.trim();
  $("fen-error").textContent = "";
  if (!fen) { $("fen-error").textContent = "bad FEN: empty (e.g. B:W21,22,K30:B1,2,K9)"; return; }
  try {
    await api("/api/position", { fen, moves: [] });
  } catch (e) {
    $("fen-error").textContent = `bad FEN: ${e.message}`;
    return;
  }
  closeFile();
  await openGame({ fen, moves: [], tags: null, result: "*", extra: {} });
}

// --- setting up a position --------------------------------------------------------------------
const CYCLE = [undefined, "b", "B", "w", "W"];  // empty, black man, black king, white man, white king

function startSetup() {
  if (state.setup || !state.node) return;
  stopDeepening("");
  const p = state.node.position;
  state.setup = { turn: p.turn, pieces: piecesOf(p) };
  $("setup-turn").value = p.turn;
  $("setup-panel").hidden = false;
  board.editing = true;
  drawSetup();
}

function editSquare(square) {
  const pieces = state.setup.pieces;
  const next = CYCLE[(CYCLE.indexOf(pieces[square]) + 1) % CYCLE.length];
  if (next) pieces[square] = next;
  else delete pieces[square];
  drawSetup();
}

function drawSetup() {
  const { turn, pieces } = state.setup;
  board.set(boardOf(turn, pieces), null);
  $("fen-current").value = fenOf(turn, pieces);
  $("fen-error").textContent = "";
  renderStatus();
}

function setupPieces(which) {
  const pieces = {};
  if (which === "initial") {
    for (let s = 1; s <= 12; s++) pieces[s] = "b";
    for (let s = 21; s <= 32; s++) pieces[s] = "w";
  }
  state.setup.pieces = pieces;
  drawSetup();
}

async function setupDone() {
  const fen = fenOf(state.setup.turn, state.setup.pieces);
  try {
    await api("/api/position", { fen, moves: [] });
  } catch (e) {
    $("fen-error").textContent = `not a legal set-up: ${e.message}`;
    return;
  }
  endSetup();
  closeFile();
  await openGame({ fen, moves: [], tags: null, result: "*", extra: {} });
}

function endSetup() {
  state.setup = null;
  board.editing = false;
  $("setup-panel").hidden = true;
}

function cancelSetup() {
  endSetup();
  goTo(state.node);
}
