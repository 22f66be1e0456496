// Helpers the search's files share (mcts.cpp, mcts_gumbel.cpp, mcts_root.cpp, mcts_solver.cpp);
// not part of the search's interface (mcts.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "mcts.h"

namespace cz::mcts_internal {

// Most legal actions any position can have: every square times every direction (8x8).
constexpr int kMaxLegalActions = 32 * kDirections;

// A child's Proof seen by its parent's mover: a win and a loss swap where the side changes
// (kFlip); a multi-jump continuation keeps the side, and with it the child's win or loss.
inline uint8_t parent_view(const Node& c) {
  if (!(c.flags & kFlip) || c.proof == kProvenDraw) return c.proof;
  return c.proof == kProvenWin ? kProvenLoss : c.proof == kProvenLoss ? kProvenWin : kUnproven;
}

inline float proof_value(uint8_t proof) {
  return proof == kProvenWin ? 1.0f : proof == kProvenLoss ? -1.0f : 0.0f;
}

inline std::string float_text(float x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return std::to_string(x);
}

}  // namespace cz::mcts_internal
