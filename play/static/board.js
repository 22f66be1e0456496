// An SVG checkers board: draws a position, and (when interactive) turns clicks and drags into
// legal moves. The server is the rules authority: a position comes with its legal moves, each
// with every landing square, so a multi-jump is entered one landing square at a time. In edit
// mode (set-up) a click on a dark square is handed to onEdit instead.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const CELL = 60;

function squareRC(square) {  // as game.notation.square_rc: row 0 is Black's back rank
  const index = square - 1;
  const row = Math.floor(index / 4);
  const col = 2 * (index % 4) + (row % 2 === 0 ? 1 : 0);
  return [row, col];
}

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

class Board {
  constructor(svg, { interactive = false, onMove = null, onEdit = null } = {}) {
    this.svg = svg;
    this.interactive = interactive;
    this.onMove = onMove;
    this.onEdit = onEdit;
    this.editing = false;  // set-up mode: clicks go to onEdit(square)
    this.flipped = false;
    this.numbers = false;
    this.position = null;
    this.entered = [];  // squares clicked so far: origin, then landing squares
    this.lastMove = null;
    this.hint = null;
    this.enabled = true;  // false while the opponent thinks
    this.dragFrom = null;
  }

  xy(square) {
    let [row, col] = squareRC(square);
    if (this.flipped) { row = 7 - row; col = 7 - col; }
    return [col * CELL, row * CELL];
  }

  squareAt(evt) {
    const pt = this.svg.createSVGPoint();
    pt.x = evt.clientX; pt.y = evt.clientY;
    const p = pt.matrixTransform(this.svg.getScreenCTM().inverse());
    let col = Math.floor(p.x / CELL), row = Math.floor(p.y / CELL);
    if (this.flipped) { row = 7 - row; col = 7 - col; }
    if (row < 0 || row > 7 || col < 0 || col > 7 || (row + col) % 2 === 0) return null;
    return row * 4 + Math.floor(col / 2) + 1;
  }

  set(position, lastMove) {
    this.position = position;
    this.entered = [];
    this.hint = null;
    if (lastMove !== undefined) this.lastMove = lastMove;
    this.draw();
  }

  candidates() {  // legal moves that start with the squares entered so far
    if (!this.position) return [];
    const e = this.entered;
    return this.position.legal.filter(m => e.every((s, i) => m.squares[i] === s));
  }

  click(square) {
    if (this.editing) {
      if (square !== null && this.onEdit) this.onEdit(square);
      return;
    }
    if (!this.interactive || !this.enabled || !this.position || square === null) return;
    const legal = this.position.legal;
    if (this.entered.length === 0 || legal.some(m => m.squares[0] === square) &&
        !this.candidates().some(m => m.squares[this.entered.length] === square)) {
      // (Re)select a piece that can move.
      this.entered = legal.some(m => m.squares[0] === square) ? [square] : [];
      this.draw();
      return;
    }
    const next = this.candidates().filter(m => m.squares[this.entered.length] === square);
    // A click on the final square of exactly one capture enters it whole (a drag does too).
    const direct = this.candidates().filter(m => m.squares[m.squares.length - 1] === square);
    if (next.length === 0 && direct.length === 1) return this.finish(direct[0]);
    if (next.length === 0) { this.entered = []; this.draw(); return; }
    this.entered.push(square);
    const done = next.filter(m => m.squares.length === this.entered.length);
    if (done.length >= 1 && next.length === 1) return this.finish(done[0]);
    if (done.length >= 1 && next.every(m => m.squares.length === this.entered.length))
      return this.finish(done[0]);
    this.draw();
  }

  finish(move) {
    this.entered = [];
    this.draw();
    if (this.onMove) this.onMove(move.move);
  }

  draw() {
    const svg = this.svg;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const defs = el("defs", {}, svg);
    const marker = el("marker", { id: "arrowhead", markerWidth: 4, markerHeight: 4, refX: 2,
                                  refY: 2, orient: "auto" }, defs);
    el("path", { d: "M0,0 L4,2 L0,4 z", fill: "#2a7de1" }, marker);
    const pos = this.position;
    const cands = this.candidates();
    const from = this.entered.length ? this.entered[0] : null;
    const targets = new Set(this.entered.length
      ? cands.map(m => m.squares[this.entered.length]).filter(s => s !== undefined) : []);
    const last = new Set(this.lastMove || []);
    for (let row = 0; row < 8; row++) {
      for (let col = 0; col < 8; col++) {
        el("rect", { x: col * CELL, y: row * CELL, width: CELL, height: CELL,
                     class: (row + col) % 2 ? "sq-dark" : "sq-light" }, svg);
      }
    }
    for (let s = 1; s <= 32; s++) {
      const [x, y] = this.xy(s);
      let cls = "sq-dark";
      if (this.entered.includes(s)) cls = "sq-from";
      else if (targets.has(s)) cls = "sq-target";
      else if (last.has(s)) cls = "sq-last";
      const r = el("rect", { x, y, width: CELL, height: CELL, class: cls, "data-square": s }, svg);
      r.addEventListener("click", () => this.click(s));
      if (this.numbers) {
        const t = el("text", { x: x + 3, y: y + 12, class: "num" }, svg);
        t.textContent = s;
      }
    }
    if (!pos) return;
    const movable = new Set(this.interactive && this.enabled && !this.editing
      ? pos.legal.map(m => m.squares[0]) : []);
    const pieces = [["b", pos.black, false], ["w", pos.white, false],
                    ["b", pos.black_kings, true], ["w", pos.white_kings, true]];
    for (const [colour, squares, king] of pieces) {
      for (const s of squares) {
        const [x, y] = this.xy(s);
        let cls = `piece piece-${colour}`;
        if (movable.has(s)) cls += " movable";
        if (movable.has(s) && pos.must_capture) cls += " must";
        if (s === from) cls += " selected";
        const c = el("circle", { cx: x + CELL / 2, cy: y + CELL / 2, r: CELL * 0.38, class: cls,
                                 "data-square": s, "stroke-width": 2 }, svg);
        c.addEventListener("click", () => this.click(s));
        c.addEventListener("pointerdown", evt => { this.dragFrom = s; evt.preventDefault(); });
        if (king) {
          const t = el("text", { x: x + CELL / 2, y: y + CELL / 2 + 7, "text-anchor": "middle",
                                 class: `crown crown-${colour}` }, svg);
          t.textContent = "K";
        }
      }
    }
    if (this.hint) {
      const squares = this.hint;
      for (let i = 0; i + 1 < squares.length; i++) {
        const [x1, y1] = this.xy(squares[i]), [x2, y2] = this.xy(squares[i + 1]);
        el("line", { x1: x1 + CELL / 2, y1: y1 + CELL / 2, x2: x2 + CELL / 2, y2: y2 + CELL / 2,
                     class: "hint-arrow" }, svg);
      }
    }
    if (this.interactive && !this._dragBound) {
      this._dragBound = true;
      svg.addEventListener("pointerup", evt => {
        const start = this.dragFrom;
        this.dragFrom = null;
        const end = this.squareAt(evt);
        if (this.editing || start === null || end === null || end === start) return;
        // A drag: the piece, then the square it was dropped on.
        this.entered = [];
        this.click(start);
        this.click(end);
      });
    }
  }
}

window.Board = Board;
