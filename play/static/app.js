// The page's start: configuration, the controls wired to play.js, files.js, clock.js, notes.js,
// persist.js, analysis.js and train.js, and the keyboard (arrows, Home and End step through the
// game). A link that names a game opens it; else the game of the last visit comes back.
"use strict";

async function hint() {
  if (!userToMove()) return;
  const n = state.node;
  try {
    const answer = await api("/api/move", { fen: state.tree.fen, moves: state.tree.moves(n),
                                            player: state.config.analysis.hint_player });
    if (n !== state.node) return;
    const m = n.position.legal.find(x => x.move === answer.move);
    board.hint = m ? m.squares : null;
    board.draw();
    $("status").textContent = `Hint: ${answer.move}`;
  } catch (e) { $("status").textContent = `hint: ${e.message}`; }
}

function showView(view) {
  for (const b of document.querySelectorAll(".tab[data-view]")) b.classList.toggle("active", b.dataset.view === view);
  $("view-play").hidden = view !== "play";
  $("view-train").hidden = view !== "train";
  if (view === "train") loadRuns().catch(e => { $("runs-note").textContent = e.message; });
}

function onKey(e) {
  const t = e.target, tag = (t.tagName || "").toLowerCase();
  const typing = tag === "textarea" || tag === "select" || t.isContentEditable ||
    (tag === "input" && !["checkbox", "radio", "button", "file"].includes(t.type));
  if (typing || e.altKey || e.ctrlKey || e.metaKey) return;  // the keys are the field's
  const keys = { ArrowLeft: "prev", ArrowRight: "next", Home: "first", End: "last" };
  if (!keys[e.key]) return;
  if (!$("view-play").hidden) {
    e.preventDefault();
    step(keys[e.key]);
  } else if (!$("view-train").hidden) {
    e.preventDefault();
    stepTo({ prev: watch.index - 1, next: watch.index + 1, first: 0, last: Infinity }[keys[e.key]]);
  }
}

function wire() {
  const on = (id, event, fn) => $(id).addEventListener(event, fn);
  on("start", "change", () => {
    const v = $("start").value;
    $("ballot").hidden = v !== "ballot";
    $("fen").hidden = v !== "fen";
    $("pdn-in").hidden = v !== "pdn";
  });
  on("newgame", "click", newGame);
  on("colour", "change", () => {  // takes effect at once: play on from the position shown
    $("colour").blur();  // the arrow keys step through the game again, not through this list
    setColour($("colour").value);
    state.opponent = $("opponent").value.trim() || state.config.default_opponent;
    opponentTurn();
  });
  on("opponent", "change", saveState);
  on("engine", "change", engineChanged);
  on("share", "click", shareLink);
  wireGameControls();
  wireNotes();
  on("undo", "click", undo);
  on("flip", "click", () => { board.flipped = !board.flipped; board.draw(); });
  on("numbers", "change", () => {
    board.numbers = viewer.numbers = $("numbers").checked; board.draw(); viewer.draw();
    saveState();
  });
  on("hint", "click", hint);
  for (const [id, where] of [["nav-first", "first"], ["nav-prev", "prev"], ["nav-next", "next"],
                             ["nav-last", "last"]]) on(id, "click", () => step(where));
  on("movelist", "click", e => {
    const n = e.target.dataset && e.target.dataset.node ? state.tree.byId.get(Number(e.target.dataset.node)) : null;
    if (n && !state.setup) goTo(n);
  });
  on("main-line", "click", backToMainLine);
  on("promote", "click", promoteVariation);
  on("delete-var", "click", deleteVariation);
  on("fen-set", "click", setFen);
  on("fen-current", "keydown", e => { if (e.key === "Enter") setFen(); });
  on("setup", "click", startSetup);
  on("setup-turn", "change", () => { state.setup.turn = $("setup-turn").value; drawSetup(); });
  on("setup-clear", "click", () => setupPieces("empty"));
  on("setup-initial", "click", () => setupPieces("initial"));
  on("setup-done", "click", setupDone);
  on("setup-cancel", "click", cancelSetup);
  on("open", "click", () => $("pdn-file").click());
  on("pdn-file", "change", () => {
    const file = $("pdn-file").files[0];
    if (file) openFile(file);
    $("pdn-file").value = "";  // the same file can be opened again
  });
  on("game-picker", "change", () => {
    $("game-picker").blur();
    pickGame(Number($("game-picker").value));
  });
  on("save", "click", save);
  on("copy", "click", async () => {
    const text = $("pdn-out").value;
    try { await navigator.clipboard.writeText(text); } catch (e) {
      $("pdn-out").select(); document.execCommand("copy");
    }
  });
  on("analyse-on", "change", analyseNow);
  on("deepen", "click", deepen);
  on("analyse-game", "click", analyseGame);
  on("graph", "click", graphClick);
  for (const b of document.querySelectorAll(".tab[data-view]")) {
    b.addEventListener("click", () => showView(b.dataset.view));
  }
  on("game-file", "change", () => loadGameFile($("game-file").value));
  on("game-index", "change", () => viewGame(Number($("game-index").value)));
  on("v-first", "click", () => stepTo(0));
  on("v-prev", "click", () => stepTo(watch.index - 1));
  on("v-next", "click", () => stepTo(watch.index + 1));
  on("v-last", "click", () => stepTo(Infinity));
  on("live", "click", () => { if (!watch.live) live(); });
  on("play-run", "click", playRunNetwork);
  document.addEventListener("keydown", onKey);
}

async function init() {
  state.config = await api("/api/config");
  state.opponents = await api("/api/opponents");
  fillOpponents();
  $("opponent").value = state.opponents.default || state.config.default_opponent;
  $("analysis-sims").value = state.config.default_simulations;
  // The server's default engine (analysis.engine); a server without one analyses by network.
  $("engine").value = state.config.analysis.engine || "network";
  board.numbers = viewer.numbers = $("numbers").checked;
  state.openings = await api("/api/openings");
  state.openings.forEach((o, i) => $("ballot").add(new Option(`${o.name}: ${o.moves.join(" ")}`, i)));
  $("ballot").selectedIndex = Math.floor(Math.random() * state.openings.length);
  wire();
  if (location.hash === "#train") showView("train");
  const opened = await openLink() || await restoreState();
  if (!opened) await newGame();
  else clockReset();  // a game put back: its clocks are not (they start again with a new game)
  $("sims-label").hidden = engine() !== "network";
  renderOpponent();
  window.addEventListener("hashchange", () => { openLink(); });
}

init().catch(e => { $("status").textContent = `could not start: ${e.message}`; });
