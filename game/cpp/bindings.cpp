// The only file that knows about Python. Everything else in game/cpp is plain C++.
// Calls are batched where Python would otherwise loop: perft and divide run entirely in C++,
// the encoder takes N positions at once, and the search (mcts) gathers and expands leaves for
// many games per call.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/optional.h>

#include <string>

#include "alphabeta.h"
#include "egdb.h"
#include "game.h"
#include "mcts.h"

namespace nb = nanobind;
using namespace nb::literals;
using cz::Bitboard;
using cz::Board;
using cz::Color;
using cz::Game;
using cz::Move;

namespace {

std::string move_text(const Move& m) {
  std::string s = std::to_string(m.from + 1);
  if (!m.is_capture()) return s + "-" + std::to_string(m.to + 1);
  for (int i = 0; i < m.jumps; ++i) s += "x" + std::to_string(m.path[i] + 1);
  return s;
}

std::vector<int> move_squares(const Move& m) {  // 1-based: origin, then every landing square
  std::vector<int> sq{m.from + 1};
  if (!m.is_capture()) {
    sq.push_back(m.to + 1);
  } else {
    for (int i = 0; i < m.jumps; ++i) sq.push_back(m.path[i] + 1);
  }
  return sq;
}

std::vector<int> squares_of(Bitboard b) {
  std::vector<int> out;
  while (b) out.push_back(cz::pop_lsb(b) + 1);
  return out;
}

Board make_board(uint32_t black, uint32_t white, uint32_t kings, bool white_to_move) {
  Board b;
  b.pieces[0] = black;
  b.pieces[1] = white;
  b.kings = kings;
  b.side = white_to_move ? Color::White : Color::Black;
  return b;
}

nb::list moves_list(const Game& g) {
  cz::MoveList moves;
  g.legal_moves(moves);
  nb::list out;
  for (const Move& m : moves) out.append(nb::cast(m));
  return out;
}

using PackedArray = nb::ndarray<const uint32_t, nb::ndim<3>, nb::c_contig, nb::device::cpu>;

// Board side -> playable squares, or ValueError (before any size-dependent arithmetic).
size_t squares_of_size(int size) {
  if (size != 6 && size != 8)
    throw nb::value_error(("board size must be 6 or 8, got " + std::to_string(size)).c_str());
  return size_t(size) * size_t(size) / 2;
}

std::string shape_text(const PackedArray& a) {
  return "(" + std::to_string(a.shape(0)) + ", " + std::to_string(a.shape(1)) + ", " +
         std::to_string(a.shape(2)) + ")";
}

void check_legal(const Game& g, const Move& m, const char* what) {
  if (g.mid_jump()) throw nb::value_error((std::string(what) + " in the middle of a multi-jump").c_str());
  if (!g.is_legal_move(m))
    throw nb::value_error((std::string(what) + ": " + move_text(m) + " is not a legal move here").c_str());
}

}  // namespace

void bind_egdb(nb::module_& m);  // at the end of this file

NB_MODULE(_core, m) {
  m.doc() = "checkerzero's compiled core: rules, perft, encoding and search";
  m.attr("NUM_PLANES") = cz::kNumPlanes;
  m.attr("HISTORY") = cz::kHistory;
  m.attr("PACKED_WORDS") = cz::kPackedWords;
  m.attr("MAX_PLIES_WITHOUT_PROGRESS") = cz::kMaxPliesWithoutProgress;

  nb::class_<Move>(m, "Move", "A whole move: a step or a complete capture sequence.")
      .def_prop_ro("origin", [](const Move& mv) { return mv.from + 1; }, "1-based origin square")
      .def_prop_ro("destination", [](const Move& mv) { return mv.to + 1; }, "1-based final square")
      .def_prop_ro("squares", &move_squares, "1-based origin then every landing square")
      .def_prop_ro("captures", [](const Move& mv) { return squares_of(mv.captured); },
                   "1-based squares of the captured pieces, ascending")
      .def_prop_ro("is_capture", &Move::is_capture)
      .def("__str__", &move_text)
      .def("__repr__", [](const Move& mv) { return "Move('" + move_text(mv) + "')"; })
      .def("__eq__", [](const Move& a, const Move& b) { return a == b; })
      .def("__hash__", [](const Move& mv) { return std::hash<std::string>{}(move_text(mv)); });

  nb::class_<Game>(m, "Game", "Rules state with history; see game.Position for the friendly API.")
      .def(nb::init<int, int>(), "size"_a = 8, "max_plies"_a = 0)
      .def_static(
          "from_bitboards",
          [](int size, uint32_t black, uint32_t white, uint32_t kings, bool white_to_move, int max_plies,
             int no_progress, int ply) {
            try {
              return Game::from_board(size, make_board(black, white, kings, white_to_move), max_plies,
                                      no_progress, ply);
            } catch (const std::invalid_argument& e) {
              throw nb::value_error(e.what());
            }
          },
          "size"_a, "black"_a, "white"_a, "kings"_a, "white_to_move"_a, "max_plies"_a = 0,
          "no_progress"_a = 0, "ply"_a = 0,
          "A game from bitboards (bit s-1 for square s). ValueError unless it is a position: pieces on\n"
          "the board, one piece per square, kings on occupied squares, no man on its crowning row, at\n"
          "most 12 pieces a side (6 on 6x6), no_progress in [0, 80] and ply in [0, 65535].")
      .def("copy", [](const Game& g) { return Game(g); })
      .def_prop_ro("size", &Game::size)
      .def_prop_ro("num_squares", &Game::num_squares)
      .def_prop_ro("num_actions", &Game::num_actions)
      .def_prop_ro("max_plies", &Game::max_plies)
      .def_prop_ro("black", [](const Game& g) { return g.board().pieces[0]; })
      .def_prop_ro("white", [](const Game& g) { return g.board().pieces[1]; })
      .def_prop_ro("kings", [](const Game& g) { return g.board().kings; })
      .def_prop_ro("white_to_move", [](const Game& g) { return g.board().side == Color::White; })
      .def_prop_ro("hash", [](const Game& g) { return g.state().hash; })
      .def_prop_ro("ply", [](const Game& g) { return g.state().ply; })
      .def_prop_ro("no_progress", [](const Game& g) { return g.state().no_progress; })
      .def_prop_ro("jumping", [](const Game& g) { return int(g.state().jumping) + 1; },
                   "1-based square of the piece mid-way through a multi-jump, 0 if none")
      .def_prop_ro("mid_jump", &Game::mid_jump)
      .def_prop_ro("depth", [](const Game& g) { return g.history().size(); },
                   "number of make()/step() calls that undo() can take back")
      .def("legal_moves",
           [](const Game& g) {
             if (g.mid_jump()) throw nb::value_error("legal_moves() in the middle of a multi-jump");
             return moves_list(g);
           })
      .def("make",
           [](Game& g, const Move& m) {
             check_legal(g, m, "make()");
             g.make(m);
           },
           "move"_a, "Plays one of legal_moves() (ValueError for any other move).")
      .def("undo",
           [](Game& g) {
             if (g.history().empty()) throw nb::value_error("nothing to undo");
             g.undo();
           })
      .def("result", [](const Game& g) { return int(g.result()); },
           "0 ongoing, 1 Black won, 2 White won, 3 draw")
      .def("end_reason", [](const Game& g) { return int(g.end_reason()); },
           "0 none, 1 no legal move, 2 repetition, 3 forty-move rule, 4 ply cap")
      .def("repetitions", &Game::repetitions)
      .def("legal_actions",
           [](const Game& g) {
             std::vector<int> a(g.num_actions());
             a.resize(g.legal_actions(a.data()));
             return a;
           })
      .def("legal_action_mask",
           [](const Game& g) {
             auto* mask = new uint8_t[g.num_actions()];
             g.legal_action_mask(mask);
             nb::capsule owner(mask, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
             return nb::ndarray<nb::numpy, bool, nb::ndim<1>>(mask, {size_t(g.num_actions())}, owner);
           })
      .def("is_legal_action", &Game::is_legal_action)
      .def("step",
           [](Game& g, int action) {
             if (!g.is_legal_action(action))
               throw nb::value_error(("illegal action " + std::to_string(action)).c_str());
             g.step(action);
           })
      .def("actions_of",
           [](const Game& g, const Move& m) {
             check_legal(g, m, "actions_of()");
             return g.actions_of(m);
           },
           "move"_a, "The actions (one per step or single jump) that make up a legal move.")
      .def("move_of",
           [](const Game& g, const std::vector<int>& actions) {
             try {
               return g.move_of(actions);
             } catch (const std::invalid_argument& e) {
               throw nb::value_error(e.what());
             }
           })
      .def("pack_history",
           [](const Game& g) {
             auto* buf = new uint32_t[cz::kHistory * cz::kPackedWords];
             g.pack_history(buf);
             nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<uint32_t*>(p); });
             return nb::ndarray<nb::numpy, uint32_t, nb::ndim<2>>(
                 buf, {size_t(cz::kHistory), size_t(cz::kPackedWords)}, owner);
           })
      .def(
          "perft",
          [](const Game& g, int depth) {
            if (g.mid_jump()) throw nb::value_error("perft() in the middle of a multi-jump");
            nb::gil_scoped_release release;
            return cz::perft(g.size(), g.board(), depth);
          },
          "depth"_a)
      .def(
          "divide",
          [](const Game& g, int depth) {
            if (g.mid_jump()) throw nb::value_error("divide() in the middle of a multi-jump");
            if (depth < 1 || depth > cz::kMaxPerftDepth)
              throw nb::value_error(("divide depth must be in [1, " + std::to_string(cz::kMaxPerftDepth) +
                                     "], got " + std::to_string(depth))
                                        .c_str());
            cz::MoveList moves;
            g.legal_moves(moves);
            std::vector<std::tuple<Move, uint64_t>> out;
            for (const Move& mv : moves) {
              Board child = g.board();
              if (g.size() == 8)
                cz::apply_move<8>(child, mv);
              else
                cz::apply_move<6>(child, mv);
              out.emplace_back(mv, cz::perft(g.size(), child, depth - 1));
            }
            return out;
          },
          "depth"_a);

  m.def(
      "encode_packed",
      [](int size, PackedArray packed) {
        squares_of_size(size);
        if (packed.shape(1) != size_t(cz::kHistory) || packed.shape(2) != size_t(cz::kPackedWords))
          throw nb::value_error(("packed states must have shape (n, HISTORY=" + std::to_string(cz::kHistory) +
                                 ", PACKED_WORDS=" + std::to_string(cz::kPackedWords) + "), got " +
                                 shape_text(packed))
                                    .c_str());
        const size_t n = packed.shape(0), area = size_t(size) * size_t(size);
        cz::check_packed(size, packed.data(), n, cz::kHistory, cz::kHistory, true);
        auto* out = new float[std::max<size_t>(1, n * cz::kNumPlanes * area)];
        nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<float*>(p); });
        {
          nb::gil_scoped_release release;
          cz::encode_packed(size, packed.data(), int(n), out);
        }
        return nb::ndarray<nb::numpy, float, nb::ndim<4>>(
            out, {n, size_t(cz::kNumPlanes), size_t(size), size_t(size)}, owner);
      },
      "size"_a, "packed"_a, "Network input planes for n packed histories, shape (n, NUM_PLANES, S, S).");

  m.def(
      "legal_mask_packed",
      [](int size, PackedArray packed) {
        const size_t actions = squares_of_size(size) * cz::kDirections;
        if (packed.shape(1) < 1 || packed.shape(2) != size_t(cz::kPackedWords))
          throw nb::value_error(("packed states must have shape (n, k >= 1, PACKED_WORDS=" +
                                 std::to_string(cz::kPackedWords) + "), got " + shape_text(packed))
                                    .c_str());
        const size_t n = packed.shape(0);
        cz::check_packed(size, packed.data(), n, int(packed.shape(1)), 1, true);
        auto* out = new bool[std::max<size_t>(1, n * actions)];
        nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<bool*>(p); });
        {
          nb::gil_scoped_release release;
          cz::legal_mask_packed(size, packed.data(), int(n), int(packed.shape(1) * packed.shape(2)),
                                reinterpret_cast<uint8_t*>(out));
        }
        return nb::ndarray<nb::numpy, bool, nb::ndim<2>>(out, {n, actions}, owner);
      },
      "size"_a, "packed"_a,
      "Legal-action masks of the newest state (slot 0) of each packed history, shape (n, A).");

  // ---- alpha-beta baseline (game/cpp/alphabeta.h) ----
  {
    using cz::EvalWeights;
    m.attr("MATE_SCORE") = cz::kMateScore;
    m.attr("MATE_THRESHOLD") = cz::kMateThreshold;
    m.attr("DATABASE_WIN") = cz::kDatabaseWin;
    const EvalWeights defaults;
    nb::class_<EvalWeights>(m, "EvalWeights",
                            "Alpha-beta evaluation weights in centi-men per unit of each feature.")
        .def(
            "__init__",
            [](EvalWeights* w, int man, int king, int advancement, int back_rank, int centre, int mobility,
               int runaway, int king_centre) {
              new (w) EvalWeights{man, king, advancement, back_rank, centre, mobility, runaway, king_centre};
            },
            "man"_a = defaults.man, "king"_a = defaults.king, "advancement"_a = defaults.advancement,
            "back_rank"_a = defaults.back_rank, "centre"_a = defaults.centre,
            "mobility"_a = defaults.mobility,
            "runaway"_a = defaults.runaway, "king_centre"_a = defaults.king_centre)
        .def_rw("man", &EvalWeights::man)
        .def_rw("king", &EvalWeights::king)
        .def_rw("advancement", &EvalWeights::advancement)
        .def_rw("back_rank", &EvalWeights::back_rank)
        .def_rw("centre", &EvalWeights::centre)
        .def_rw("mobility", &EvalWeights::mobility)
        .def_rw("runaway", &EvalWeights::runaway)
        .def_rw("king_centre", &EvalWeights::king_centre)
        .def("__repr__", [](const EvalWeights& w) {
          return "EvalWeights(man=" + std::to_string(w.man) + ", king=" + std::to_string(w.king) +
                 ", advancement=" + std::to_string(w.advancement) +
                 ", back_rank=" + std::to_string(w.back_rank) +
                 ", centre=" + std::to_string(w.centre) + ", mobility=" + std::to_string(w.mobility) +
                 ", runaway=" + std::to_string(w.runaway) + ", king_centre=" + std::to_string(w.king_centre) +
                 ")";
        });

    nb::class_<cz::SearchResult>(m, "SearchResult", "Outcome of alphabeta_search().")
        .def_prop_ro("move",
                     [](const cz::SearchResult& r) -> std::optional<Move> {
                       if (!r.has_move) return std::nullopt;
                       return r.best;
                     },
                     "best move, None when the game is already over")
        .def_ro("score", &cz::SearchResult::score,
                "centi-men from the mover's view; +-(MATE_SCORE - plies) for a forced result")
        .def_ro("depth", &cz::SearchResult::depth, "deepest completed iteration")
        .def_ro("nodes", &cz::SearchResult::nodes)
        .def_ro("pv", &cz::SearchResult::pv, "principal variation, best move first")
        .def_ro("seconds", &cz::SearchResult::seconds)
        .def("__repr__", [](const cz::SearchResult& r) {
          std::string pv;
          for (const Move& mv : r.pv) pv += (pv.empty() ? "" : " ") + move_text(mv);
          return "SearchResult(move=" + (r.has_move ? "'" + move_text(r.best) + "'" : std::string("None")) +
                 ", score=" + std::to_string(r.score) + ", depth=" + std::to_string(r.depth) +
                 ", nodes=" + std::to_string(r.nodes) + ", pv='" + pv + "')";
        });

    m.def(
        "alphabeta_search",
        [](const Game& g, int depth, int time_ms, std::optional<EvalWeights> weights, int tt_mb,
           const cz::egdb::Database* egdb) {
          if (tt_mb < 1) throw nb::value_error(("tt_mb must be >= 1, got " + std::to_string(tt_mb)).c_str());
          const EvalWeights w = weights.value_or(EvalWeights{});
          cz::SearchLimits limits;
          limits.depth = depth;
          limits.time_ms = time_ms;
          // One searcher per thread, kept between calls so that a player does not allocate its
          // transposition table on every move; each search still starts from an empty table.
          thread_local std::unique_ptr<cz::AlphaBeta> searcher;
          thread_local int searcher_mb = 0;
          try {
            nb::gil_scoped_release release;
            if (!searcher || searcher_mb != tt_mb) {
              searcher.reset();
              searcher = std::make_unique<cz::AlphaBeta>(size_t(tt_mb));
              searcher_mb = tt_mb;
            }
            return searcher->search(g, limits, w, egdb);
          } catch (const std::invalid_argument& e) {
            throw nb::value_error(e.what());
          }
        },
        "game"_a, "depth"_a = 0, "time_ms"_a = 0, "weights"_a = nb::none(), "tt_mb"_a = 16,
        "egdb"_a = nb::none(),
        "Iterative-deepening alpha-beta from the game's position, limited by depth and/or time (ms).");

    m.def(
        "evaluate",
        [](const Game& g, std::optional<EvalWeights> weights) {
          return cz::evaluate(g.size(), g.board(), weights.value_or(EvalWeights{}));
        },
        "game"_a, "weights"_a = nb::none(), "Static evaluation (centi-men, mover's view), no search.");
  }
  // ---- end alpha-beta baseline ----
  // ---- mcts (batched search) ----
  nb::class_<cz::MctsConfig>(m, "MctsConfig", "Search parameters; see conf/mcts/default.yaml.")
      .def(nb::init<>())
      .def_rw("simulations", &cz::MctsConfig::simulations)
      .def_rw("leaves_per_game", &cz::MctsConfig::leaves_per_game)
      .def_rw("c_puct", &cz::MctsConfig::c_puct)
      .def_rw("c_puct_base", &cz::MctsConfig::c_puct_base)
      .def_rw("fpu_reduction", &cz::MctsConfig::fpu_reduction)
      .def_rw("fpu_reduction_root", &cz::MctsConfig::fpu_reduction_root)
      .def_rw("dirichlet_alpha", &cz::MctsConfig::dirichlet_alpha)
      .def_rw("dirichlet_epsilon", &cz::MctsConfig::dirichlet_epsilon)
      .def_rw("virtual_loss", &cz::MctsConfig::virtual_loss)
      .def_rw("collapse_forced", &cz::MctsConfig::collapse_forced)
      .def_rw("skip_forced_root", &cz::MctsConfig::skip_forced_root)
      .def_rw("forced_playouts_k", &cz::MctsConfig::forced_playouts_k)
      .def_rw("policy_temperature", &cz::MctsConfig::policy_temperature)
      .def_rw("seed", &cz::MctsConfig::seed);

  using cz::BatchedMcts;
  using F32Rows = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
  auto i32_out = [](size_t n) {
    auto* buf = new int32_t[n];
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<int32_t*>(p); });
    return std::make_pair(buf, owner);
  };
  auto f32_out = [](size_t n) {
    auto* buf = new float[n];
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<float*>(p); });
    return std::make_pair(buf, owner);
  };
  nb::class_<BatchedMcts>(
      m, "BatchedMCTS",
      "PUCT search over many games at once. Loop: gather() -> one forward pass -> expand().")
      .def(nb::init<int, int, const cz::MctsConfig&>(), "num_games"_a, "size"_a, "config"_a)
      .def_prop_ro("num_games", &BatchedMcts::num_games)
      .def_prop_ro("size", &BatchedMcts::size)
      .def_prop_ro("num_actions", &BatchedMcts::num_actions)
      .def_prop_ro("capacity", &BatchedMcts::capacity, "most leaves one gather() returns")
      .def_prop_rw("simulations", [](const BatchedMcts& s) { return s.config().simulations; },
                   &BatchedMcts::set_simulations)
      .def("set_search", &BatchedMcts::set_search, "game_index"_a, "simulations"_a, "full"_a,
           "Game game_index's search from now on: `simulations` visits below its root and a full\n"
           "search (root noise, forced playouts, as configured) or a fast one (neither).")
      .def("search_budget", &BatchedMcts::search_budget, "game_index"_a,
           "Simulations per decision of this game (the config's until set_search()).")
      .def("full_search", &BatchedMcts::full_search, "game_index"_a,
           "This game's search is a full one (true until set_search()).")
      .def("forcing", nb::overload_cast<int>(&BatchedMcts::forcing, nb::const_), "game_index"_a,
           "This game's root gets forced playouts (forced_playouts_k > 0, noise on, full search).")
      .def_prop_ro("collisions", &BatchedMcts::collisions)
      .def_prop_ro("terminal_hits", &BatchedMcts::terminal_hits)
      .def("reset", &BatchedMcts::reset, "game_index"_a, "game"_a,
           "Start game_index from a copy of `game` (its history included) with an empty tree.")
      .def("game", [](const BatchedMcts& s, int i) { return Game(s.game(i)); }, "game_index"_a,
           "A copy of the game at the root.")
      .def(
          "gather",
          [](BatchedMcts& s, int max_per_game, int total_cap) {
            int n;
            {
              nb::gil_scoped_release release;
              n = s.gather(max_per_game, total_cap);
            }
            // Views of the object's own buffers (no copy): valid until the next gather().
            // Writable, so torch.from_numpy takes them without a warning; writing only changes
            // this batch's input (the search keeps its own copy of the legal actions).
            nb::object owner = nb::find(&s);
            const size_t S = size_t(s.size()), L = size_t(n);
            auto planes = nb::ndarray<nb::numpy, float, nb::ndim<4>>(
                const_cast<float*>(s.planes()), {L, size_t(cz::kNumPlanes), S, S}, owner);
            auto masks = nb::ndarray<nb::numpy, bool, nb::ndim<2>>(
                reinterpret_cast<bool*>(const_cast<uint8_t*>(s.masks())), {L, size_t(s.num_actions())},
                owner);
            return nb::make_tuple(planes, masks);
          },
          "max_per_game"_a = 0, "total_cap"_a = 0,
          "Leaves of every tree that needs them: (planes float32 (L,15,S,S), masks bool (L,A)),\n"
          "views of internal buffers that the next gather() overwrites (copy to keep them).")
      .def(
          "gathered_packed",
          [](BatchedMcts& s) {
            nb::object owner = nb::find(&s);
            return nb::ndarray<nb::numpy, const uint32_t, nb::ndim<3>>(
                s.packed(), {size_t(s.pending_leaves()), size_t(cz::kHistory), size_t(cz::kPackedWords)},
                owner);
          },
          "Packed histories (L, HISTORY, PACKED_WORDS) of the leaves of the last gather().")
      .def(
          "expand",
          [](BatchedMcts& s, F32Rows priors, F32Rows wdl) {
            const size_t L = size_t(s.pending_leaves());
            if (priors.shape(0) != L || priors.shape(1) != size_t(s.num_actions()))
              throw nb::value_error(("priors must have shape (" + std::to_string(L) + ", " +
                                     std::to_string(s.num_actions()) + ")")
                                        .c_str());
            if (wdl.shape(0) != L || wdl.shape(1) != 3)
              throw nb::value_error(("wdl must have shape (" + std::to_string(L) + ", 3)").c_str());
            nb::gil_scoped_release release;
            s.expand(priors.data(), wdl.data(), int(L));
          },
          "priors"_a.noconvert(), "wdl"_a.noconvert(),
          "One evaluation per gathered leaf: priors float32 (L,A), wdl float32 (L,3) (mover's view).")
      .def("stop", &BatchedMcts::stop, "game_index"_a,
           "Stop searching this game (resigned, or no next game for the slot) until reset().")
      .def("done", &BatchedMcts::done, "game_index"_a, "The game is over (or stopped).")
      .def("search_done", &BatchedMcts::search_done, "game_index"_a)
      .def(
          "ready",
          [](const BatchedMcts& s) {
            std::vector<int> out;
            for (int i = 0; i < s.num_games(); ++i)
              if (s.search_done(i)) out.push_back(i);
            return out;
          },
          "Indices of the games whose search for the current decision is complete.")
      .def("result", [](const BatchedMcts& s, int i) { return int(s.game(i).result()); }, "game_index"_a)
      .def("end_reason", [](const BatchedMcts& s, int i) { return int(s.game(i).end_reason()); },
           "game_index"_a)
      .def("ply", [](const BatchedMcts& s, int i) { return int(s.game(i).state().ply); }, "game_index"_a)
      .def(
          "white_to_move",
          [](const BatchedMcts& s, int i) { return s.game(i).board().side == Color::White; },
          "game_index"_a)
      .def(
          "root_packed",
          [](const BatchedMcts& s, int i) {
            auto* buf = new uint32_t[cz::kPackedWords];
            cz::pack_state(s.game(i).state(), buf);
            nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<uint32_t*>(p); });
            return nb::ndarray<nb::numpy, uint32_t, nb::ndim<1>>(buf, {size_t(cz::kPackedWords)}, owner);
          },
          "game_index"_a, "The root state packed as (black, white, kings, meta).")
      .def("root_child_visits", &BatchedMcts::root_child_visits, "game_index"_a)
      .def(
          "root_visits",
          [i32_out](const BatchedMcts& s, int i) {
            auto [buf, owner] = i32_out(s.num_actions());
            s.root_visits(i, buf);
            return nb::ndarray<nb::numpy, int32_t, nb::ndim<1>>(buf, {size_t(s.num_actions())}, owner);
          },
          "game_index"_a, "Visit count of each action at the root, int32 (A,).")
      .def(
          "root_target",
          [i32_out](const BatchedMcts& s, int i) {
            auto [buf, owner] = i32_out(s.num_actions());
            s.root_target(i, buf);
            return nb::ndarray<nb::numpy, int32_t, nb::ndim<1>>(buf, {size_t(s.num_actions())}, owner);
          },
          "game_index"_a,
          "The policy target, int32 (A,): root_visits() less the forced visits that policy target\n"
          "pruning takes out when this root had forced playouts, else root_visits() itself.")
      .def(
          "root_priors",
          [f32_out](const BatchedMcts& s, int i) {
            auto [buf, owner] = f32_out(s.num_actions());
            s.root_priors(i, buf);
            return nb::ndarray<nb::numpy, float, nb::ndim<1>>(buf, {size_t(s.num_actions())}, owner);
          },
          "game_index"_a, "Priors at the root (with noise when it is on), float32 (A,).")
      .def(
          "root_q",
          [f32_out](const BatchedMcts& s, int i) {
            auto [buf, owner] = f32_out(s.num_actions());
            s.root_q(i, buf);
            return nb::ndarray<nb::numpy, float, nb::ndim<1>>(buf, {size_t(s.num_actions())}, owner);
          },
          "game_index"_a, "Mean value (win - loss) of each root action, root mover's view; NaN if unvisited.")
      .def(
          "root_wdl",
          [f32_out](const BatchedMcts& s, int i) {
            auto [buf, owner] = f32_out(3);
            s.root_wdl(i, buf);
            return nb::ndarray<nb::numpy, float, nb::ndim<1>>(buf, {size_t(3)}, owner);
          },
          "game_index"_a, "Root value (win, draw, loss) from the root mover's view; NaN before any visit.")
      .def(
          "node_stats",
          [f32_out, i32_out](const BatchedMcts& s, int i, const std::vector<int>& path) {
            auto [pri, po] = f32_out(s.num_actions());
            auto [vis, vo] = i32_out(s.num_actions());
            s.node_stats(i, path, pri, vis);
            const size_t A = size_t(s.num_actions());
            return nb::make_tuple(nb::ndarray<nb::numpy, float, nb::ndim<1>>(pri, {A}, po),
                                  nb::ndarray<nb::numpy, int32_t, nb::ndim<1>>(vis, {A}, vo));
          },
          "game_index"_a, "path"_a,
          "(priors, visits) of the children of the node reached from the root by `path` (actions).")
      .def("tree_size", &BatchedMcts::tree_size, "game_index"_a)
      .def("choose", &BatchedMcts::choose, "game_index"_a, "temperature"_a,
           "An action sampled from visit counts ^ (1/temperature); temperature <= 0: the most visited.")
      .def("set_egdb", &BatchedMcts::set_egdb, "db"_a.none(), nb::keep_alive<1, 2>(),
           "Leaves in this EndgameDatabase take its exact value (None: off); the root is always searched.")
      .def_prop_ro("egdb_hits", &BatchedMcts::egdb_hits, "leaves scored by the endgame database")
      .def("advance", &BatchedMcts::advance, "game_index"_a, "action"_a,
           "Play `action` in the game and keep its subtree as the new root.");

  using F32Vec = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
  using I32Vec = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
  m.def(
      "prune_forced_visits",
      [i32_out](F32Vec prior, F32Vec q, I32Vec visits, int best, float k, float c_puct, float c_puct_base,
                float parent_visits) {
        const size_t n = visits.shape(0);
        if (prior.shape(0) != n || q.shape(0) != n)
          throw nb::value_error("prior, q and visits must have the same length");
        auto [buf, owner] = i32_out(n);
        std::copy(visits.data(), visits.data() + n, buf);
        cz::prune_forced_visits(int(n), prior.data(), q.data(), buf, best, k,
                                cz::explore_scale(c_puct, c_puct_base, parent_visits));
        return nb::ndarray<nb::numpy, int32_t, nb::ndim<1>>(buf, {n}, owner);
      },
      "prior"_a.noconvert(), "q"_a.noconvert(), "visits"_a.noconvert(), "best"_a, "k"_a, "c_puct"_a,
      "c_puct_base"_a, "parent_visits"_a,
      "Policy target pruning of one root's children (float32 priors, float32 Q from the root mover's\n"
      "view, int32 visits), as BatchedMCTS.root_target() does it: a copy of `visits` in which every\n"
      "child but `best` gave up its forced visits PUCT would not have spent.");

  bind_egdb(m);
}

// ---- endgame database (game/cpp/egdb.h) ----
namespace {

using cz::egdb::Signature;
using SigTuple = std::tuple<int, int, int, int>;

Signature to_sig(const SigTuple& t) {
  return {std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t)};
}
SigTuple from_sig(const Signature& s) { return {s.bm, s.bk, s.wm, s.wk}; }
std::vector<SigTuple> sig_list(const std::vector<Signature>& v) {
  std::vector<SigTuple> out;
  for (const auto& s : v) out.push_back(from_sig(s));
  return out;
}
Signature checked_sig(int size, const SigTuple& t) {
  const Signature s = to_sig(t);
  if (!cz::egdb::valid_signature(size, s))
    throw nb::value_error(("not a signature of the " + std::to_string(size) + "x" + std::to_string(size) +
                           " board: " + s.name())
                              .c_str());
  return s;
}

using StatesArray = nb::ndarray<const uint32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

}  // namespace

void bind_egdb(nb::module_& m) {
  namespace eg = cz::egdb;
  m.attr("EGDB_FORMAT_VERSION") = eg::kFormatVersion;
  m.def(
      "egdb_signatures", [](int size, int max_pieces) { return sig_list(eg::signatures(size, max_pieces)); },
      "size"_a, "max_pieces"_a,
      "Material signatures (black men, black kings, white men, white kings) of 1..max_pieces pieces, "
      "each after every signature a move from it reaches.");
  m.def(
      "egdb_dependencies",
      [](int size, const SigTuple& s) { return sig_list(eg::dependencies(size, checked_sig(size, s))); },
      "size"_a, "signature"_a, "Signatures (other than its own pair) a move from the pair reaches.");
  m.def(
      "egdb_index_size",
      [](int size, const SigTuple& s) { return eg::index_size(size, checked_sig(size, s)); },
      "size"_a, "signature"_a, "Positions in the signature's index.");
  m.def(
      "egdb_file_name", [](int size, const SigTuple& s) { return eg::file_name(size, checked_sig(size, s)); },
      "size"_a, "signature"_a);
  m.def(
      "egdb_index_of",
      [](int size, uint32_t black, uint32_t white, uint32_t kings) {
        const Board b = make_board(black, white, kings, false);
        const uint32_t all = size == 8 ? 0xFFFFFFFFu : (1u << (size * size / 2)) - 1;
        const uint32_t back = (1u << (size / 2)) - 1, crown = all & ~(all >> (size / 2));
        if ((black & white) || ((black | white | kings) & ~all) || (kings & ~(black | white)) ||
            (black & ~kings & crown) || (white & ~kings & back))
          throw nb::value_error("not a legal placement of men and kings");
        return std::make_tuple(from_sig(eg::signature_of(b)), eg::index_of(size, b));
      },
      "size"_a, "black"_a, "white"_a, "kings"_a, "(signature, index) of a placement with Black to move.");
  m.def(
      "egdb_board_at",
      [](int size, const SigTuple& s, uint64_t index) {
        const Signature sig = checked_sig(size, s);
        if (index >= eg::index_size(size, sig)) throw nb::index_error("index out of range");
        const Board b = eg::board_at(size, sig, index);
        return std::make_tuple(b.pieces[0], b.pieces[1], b.kings);
      },
      "size"_a, "signature"_a, "index"_a, "(black, white, kings) bitboards at an index.");
  m.def(
      "egdb_check_file",
      [](const std::string& path, int size, const SigTuple& s) {
        auto t = eg::Table::open(path, size, checked_sig(size, s));
        return t->count();
      },
      "path"_a, "size"_a, "signature"_a,
      "Maps and checks one file (header, length, checksum); returns its position count or raises naming it.");
  m.def(
      "egdb_solve_pair",
      [](const std::string& dir, int size, const SigTuple& s) {
        const Signature sig = checked_sig(size, s);
        eg::SolveStats st;
        {
          nb::gil_scoped_release release;
          st = eg::solve_pair(dir, size, sig);
        }
        nb::dict d;
        d["positions"] = st.positions;
        d["wins"] = st.wins;
        d["losses"] = st.losses;
        d["draws"] = st.draws;
        return d;
      },
      "dir"_a, "size"_a, "signature"_a,
      "Solves a signature and its colour swap into dir (dependencies must be there); returns counts.");

  nb::class_<eg::Database>(m, "EndgameDatabase",
                           "Every signature file of up to max_pieces pieces, mapped and checked on open.")
      .def(
          "__init__",
          [](eg::Database* self, const std::string& dir, int size, int max_pieces) {
            new (self) eg::Database(dir, size, max_pieces);
          },
          "dir"_a, "size"_a, "max_pieces"_a)
      .def_prop_ro("size", &eg::Database::size)
      .def_prop_ro("max_pieces", &eg::Database::max_pieces)
      .def_prop_ro("bytes", &eg::Database::bytes, "bytes of all mapped files")
      .def(
          "probe",
          [](const eg::Database& db, uint32_t black, uint32_t white, uint32_t kings, bool white_to_move) {
            return int(db.probe(make_board(black, white, kings, white_to_move)));
          },
          "black"_a, "white"_a, "kings"_a, "white_to_move"_a,
          "1 win, 2 loss, 3 draw for the side to move; 0 when the position is not in the database.")
      .def(
          "probe_game",
          [](const eg::Database& db, const Game& g) { return g.mid_jump() ? 0 : int(db.probe(g.board())); },
          "game"_a, "probe() of a game's current position (0 in the middle of a multi-jump).")
      .def(
          "probe_states",
          [](const eg::Database& db, StatesArray states) {
            if (states.shape(1) != size_t(cz::kPackedWords))
              throw nb::value_error("states must have shape (n, PACKED_WORDS): black, white, kings, meta");
            const size_t n = states.shape(0);
            auto* out = new uint8_t[std::max<size_t>(1, n)];
            nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
            {
              nb::gil_scoped_release release;
              const uint32_t* s = states.data();
              const uint32_t all = db.size() == 8 ? 0xFFFFFFFFu : (1u << (db.size() * db.size() / 2)) - 1;
              for (size_t i = 0; i < n; ++i, s += cz::kPackedWords) {
                const bool ok = !(s[0] & s[1]) && !((s[0] | s[1]) & ~all) && !(s[2] & ~(s[0] | s[1]));
                out[i] = ok ? uint8_t(db.probe(make_board(s[0], s[1], s[2], s[3] & 1))) : 0;
              }
            }
            return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(out, {n}, owner);
          },
          "states"_a,
          "probe() of n packed states (black, white, kings, meta; meta bit 0: White to move) -> (n,) uint8.")
      .def(
          "verify",
          [](const eg::Database& db, const SigTuple& s) {
            const Signature sig = checked_sig(db.size(), s);
            nb::gil_scoped_release release;
            return eg::verify_signature(db, sig);
          },
          "signature"_a,
          "Positions of the signature whose value is not the best over its moves (0 when correct).");
}
