// Python bindings of the rules: moves, games (with perft), and the network input encoding.
#include <algorithm>
#include <string>

#include "bind_common.h"
#include "game.h"

namespace nb = nanobind;
using namespace nb::literals;
using cz::Bitboard;
using cz::Board;
using cz::Color;
using cz::Game;
using cz::Move;
using cz::bind::make_board;
using cz::bind::move_text;

namespace {

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

void cz::bind::bind_game(nb::module_& m) {
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
             int no_progress, int ply, int jumping) {
            try {
              return Game::from_board(size, make_board(black, white, kings, white_to_move), max_plies,
                                      no_progress, ply, jumping - 1);
            } catch (const std::invalid_argument& e) {
              throw nb::value_error(e.what());
            }
          },
          "size"_a, "black"_a, "white"_a, "kings"_a, "white_to_move"_a, "max_plies"_a = 0,
          "no_progress"_a = 0, "ply"_a = 0, "jumping"_a = 0,
          "A game from bitboards (bit s-1 for square s). ValueError unless it is a position: pieces on\n"
          "the board, one piece per square, kings on occupied squares, no man on its crowning row, at\n"
          "most 12 pieces a side (6 on 6x6), no_progress in [0, 80] and ply in [0, 65535]. jumping: the\n"
          "1-based square of a piece of the side to move in the middle of a multi-jump, which must be\n"
          "able to jump on (0: none; as the `jumping` property reads).")
      .def_static(
          "from_packed",
          [](int size, const std::vector<uint32_t>& words, int max_plies, int ply) {
            if (words.size() != size_t(cz::kPackedWords)) {
              const std::string why = "a packed state is " + std::to_string(cz::kPackedWords) +
                                      " words, got " + std::to_string(words.size());
              throw nb::value_error(why.c_str());
            }
            try {
              return Game::from_packed(size, words.data(), max_plies, ply);
            } catch (const std::invalid_argument& e) {
              throw nb::value_error(e.what());
            }
          },
          "size"_a, "words"_a, "max_plies"_a = 0, "ply"_a = 0,
          "The game at one packed state (black, white, kings, meta: a row of pack_history() or of a\n"
          "record's positions), mid-jump included. ValueError as from_bitboards, or when the meta word\n"
          "marks no position (bit 16 clear) or has unknown bits set.")
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
}
