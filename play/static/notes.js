// The annotator's notes on the move shown: its mark (! ? !! ?? !? ?!), PDN's numeric
// annotations ($1 ...) and a comment. They are kept in the game's tree and saved with it.
"use strict";

function renderNotes() {
  const n = state.node;
  const none = !n || !n.parent;  // the start has no move to annotate
  for (const id of ["note-mark", "note-nags", "note-comment"]) $(id).disabled = none;
  if (document.activeElement !== $("note-comment")) $("note-comment").value = none ? "" : n.comment;
  if (document.activeElement !== $("note-nags")) {
    $("note-nags").value = none ? "" : n.nags.map(x => `$${x}`).join(" ");
  }
  $("note-mark").value = none ? "" : n.mark;
  $("note-error").textContent = "";
}

function noteChanged() {
  const n = state.node;
  if (!n || !n.parent) return;
  n.mark = $("note-mark").value;
  n.comment = $("note-comment").value.replace(/\s+/g, " ").trim();
  const words = $("note-nags").value.split(/[\s,]+/).filter(Boolean);
  const nags = words.map(w => Number(w.replace(/^\$/, "")));
  if (nags.some(x => !Number.isInteger(x) || x < 0 || x > 255)) {
    $("note-error").textContent = "NAGs are $0 to $255, e.g. $1 $14";
  } else {
    n.nags = nags;
    $("note-error").textContent = "";
  }
  if (n.comment.includes("}")) {
    $("note-error").textContent = "a comment cannot hold } (PDN ends a comment there)";
    n.comment = n.comment.replace(/}/g, ")");
  }
  renderMoves();
  treeChanged();
}

function wireNotes() {
  $("note-mark").addEventListener("change", noteChanged);
  $("note-comment").addEventListener("input", noteChanged);
  $("note-nags").addEventListener("change", noteChanged);
}
