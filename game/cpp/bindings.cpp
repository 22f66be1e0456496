// The Python module. Only bindings.cpp and the bind_*.cpp files it calls know about Python;
// everything else in game/cpp is plain C++.
// Calls are batched where Python would otherwise loop: perft and divide run entirely in C++,
// the encoder takes N positions at once, and the search (mcts) gathers and expands leaves for
// many games per call.
//
// This file holds only the module definition; each unit's bindings are in its own file
// (bind_game.cpp, bind_alphabeta.cpp, bind_mcts.cpp, bind_egdb.cpp, bind_convnet.cpp; shared helpers in bind_common.h).
#include "bind_common.h"

NB_MODULE(_core, m) {
  m.doc() = "checkerzero's compiled core: rules, perft, encoding and search";
  cz::bind::bind_game(m);
  cz::bind::bind_alphabeta(m);
  cz::bind::bind_mcts(m);
  cz::bind::bind_egdb(m);
  cz::bind::bind_convnet(m);
}
