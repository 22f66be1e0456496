// A game as a tree of moves: the main line is every node's first child, and any other child
// starts a variation. Pure data, no drawing: the page keeps one tree per game.
"use strict";

let nodeSerial = 0;

class MoveNode {
  constructor(parent, move, squares) {
    this.id = ++nodeSerial;
    this.parent = parent;
    this.move = move;          // null at the root
    this.squares = squares;    // the squares the move passes, for highlighting
    this.children = [];
    this.position = null;      // the server's description, once fetched
    this.score = undefined;    // Black's expected score (win + draw/2), once analysed
    this.analysis = null;      // the newest analysis shown for this position
    this.mark = "";            // the annotator's mark after the move: ! ? !! ?? !? ?!
    this.nags = [];            // PDN's numeric annotations ($1 ...), as numbers
    this.comment = "";         // the comment after the move
    this.before = "";          // a comment before the move (the first move of a line)
    this.reply = null;         // the opponent's answer that played this move (its evaluation)
  }

  get ply() { return this.parent ? this.parent.ply + 1 : 0; }
}

class GameTree {
  constructor(fen) {
    this.fen = fen || null;  // the start FEN; null: the initial position
    this.root = new MoveNode(null, null, null);
    this.byId = new Map([[this.root.id, this.root]]);
  }

  get whiteFirst() { return (this.fen || "B").trim().toUpperCase().startsWith("W"); }

  turnAt(ply) { return (ply + (this.whiteFirst ? 1 : 0)) % 2 === 0 ? "B" : "W"; }

  add(parent, move, squares) {  // the child for move (an existing one is reused)
    const old = parent.children.find(c => c.move === move);
    if (old) return old;
    const child = new MoveNode(parent, move, squares);
    parent.children.push(child);
    this.byId.set(child.id, child);
    return child;
  }

  addLine(moves) {  // moves as the main line from the root; returns the last node
    let n = this.root;
    for (const m of moves) n = this.add(n, m, null);
    return n;
  }

  addJSONLine(parent, items) {  // a PDN line as the server sends it, from parent; its last node
    let n = parent;
    for (const item of items || []) {
      const child = this.add(n, item.move, null);
      child.mark = item.mark || "";
      child.nags = [...(item.nags || [])];
      child.comment = item.comment || "";
      child.before = item.before || "";
      for (const v of item.variations || []) this.addJSONLine(n, v);  // alternatives to child
      n = child;
    }
    return n;
  }

  lineJSON(first) {  // the line from first along first children, variations inside, for PDN
    const out = [];
    for (let n = first; n; n = n.children[0]) {
      const item = { move: n.move };
      if (n.mark) item.mark = n.mark;
      if (n.nags.length) item.nags = [...n.nags];
      if (n.comment) item.comment = n.comment;
      if (n.before && !out.length) item.before = n.before;
      const siblings = n.parent.children;
      if (siblings[0] === n && siblings.length > 1) {
        item.variations = siblings.slice(1).map(v => this.lineJSON(v));
      }
      out.push(item);
    }
    return out;
  }

  indices(n) {  // the child index of every step from the root to n (how a reload finds n)
    return this.path(n).slice(1).map(x => x.parent.children.indexOf(x));
  }

  at(indices) {  // the node indices lead to, as far as they go
    let n = this.root;
    for (const i of indices || []) {
      if (!n.children[i]) break;
      n = n.children[i];
    }
    return n;
  }

  path(n) {  // the nodes from the root to n, the root included
    const out = [];
    for (let x = n; x; x = x.parent) out.push(x);
    return out.reverse();
  }

  moves(n) { return this.path(n).slice(1).map(x => x.move); }

  line(n) {  // the root to n, then n's main continuation: what the graph and End follow
    const out = this.path(n);
    for (let x = n.children[0]; x; x = x.children[0]) out.push(x);
    return out;
  }

  mainLine() { return this.line(this.root); }

  isMain(n) {
    for (let x = n; x.parent; x = x.parent) if (x.parent.children[0] !== x) return false;
    return true;
  }

  variationStart(n) {  // the first node of the innermost variation n is in; null on the main line
    for (let x = n; x.parent; x = x.parent) if (x.parent.children[0] !== x) return x;
    return null;
  }

  remove(n) {  // n and everything after it; returns its parent
    const p = n.parent;
    p.children = p.children.filter(c => c !== n);
    const drop = [n];
    while (drop.length) {
      const x = drop.pop();
      this.byId.delete(x.id);
      drop.push(...x.children);
    }
    return p;
  }

  promote(n) {  // n's variation becomes the line its parent continues with
    const start = this.variationStart(n);
    if (!start) return;
    const p = start.parent;
    p.children = [start, ...p.children.filter(c => c !== start)];
  }
}

// A FEN from a set-up: pieces maps square -> "b" | "B" | "w" | "W" (capitals are kings).
function fenOf(turn, pieces) {
  const side = colour => Object.keys(pieces).map(Number).sort((a, b) => a - b)
    .filter(s => pieces[s].toLowerCase() === colour)
    .map(s => (pieces[s] === colour.toUpperCase() ? "K" : "") + s).join(",");
  return `${turn}:W${side("w")}:B${side("b")}`;
}

function piecesOf(position) {  // the inverse, from the server's description of a position
  const out = {};
  for (const s of position.black) out[s] = "b";
  for (const s of position.black_kings) out[s] = "B";
  for (const s of position.white) out[s] = "w";
  for (const s of position.white_kings) out[s] = "W";
  return out;
}

function boardOf(turn, pieces) {  // what Board.set draws for a set-up (no legal moves)
  const of = p => Object.keys(pieces).map(Number).filter(s => pieces[s] === p);
  return { turn, black: of("b"), black_kings: of("B"), white: of("w"), white_kings: of("W"),
           legal: [], must_capture: false };
}
