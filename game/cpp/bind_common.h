// Shared by the binding files (bind_*.cpp): the nanobind includes, the helpers more than one of
// them uses, and the function each one defines. bindings.cpp's module definition calls them.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>

#include "game.h"

namespace cz::bind {

namespace nb = nanobind;

// "11-15" for a step, "22x15x6" for a capture (1-based squares).
inline std::string move_text(const Move& m) {
  std::string s = std::to_string(m.from + 1);
  if (!m.is_capture()) return s + "-" + std::to_string(m.to + 1);
  for (int i = 0; i < m.jumps; ++i) s += "x" + std::to_string(m.path[i] + 1);
  return s;
}

inline Board make_board(uint32_t black, uint32_t white, uint32_t kings, bool white_to_move) {
  Board b;
  b.pieces[0] = black;
  b.pieces[1] = white;
  b.kings = kings;
  b.side = white_to_move ? Color::White : Color::Black;
  return b;
}

// Each adds its unit's classes and functions to the module, in this order (a later unit's
// signatures name the earlier units' classes).
void bind_game(nb::module_& m);       // rules, moves, encoding, perft (bind_game.cpp)
void bind_alphabeta(nb::module_& m);  // the alpha-beta baseline (bind_alphabeta.cpp)
void bind_mcts(nb::module_& m);       // the batched PUCT search (bind_mcts.cpp)
void bind_egdb(nb::module_& m);       // the endgame database (bind_egdb.cpp)
void bind_convnet(nb::module_& m);    // the network's forward pass on a CPU (bind_convnet.cpp)

}  // namespace cz::bind
