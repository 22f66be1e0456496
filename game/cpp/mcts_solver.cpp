// MCTS-solver: proofs carried up the tree, and which root moves may be played (mcts.h).
#include <array>
#include <cstdint>

#include "mcts.h"
#include "mcts_internal.h"

namespace cz {

using namespace mcts_internal;

uint8_t BatchedMcts::proof_of(const Tree& t, const Node& n) const {
  if (!(n.flags & kExpanded)) return kUnproven;
  bool all = true, draw = false;
  for (uint32_t k = 0; k < n.num_children; ++k) {
    const uint8_t v = parent_view(t.nodes[n.first_child + k]);
    if (v == kProvenWin) return kProvenWin;  // one winning move decides the node
    if (v == kUnproven) all = false;
    draw |= v == kProvenDraw;
  }
  return all ? (draw ? kProvenDraw : kProvenLoss) : kUnproven;
}

void BatchedMcts::prove_path(Tree& t) {
  // path_ ends at a node just proven (or revisited); each ancestor is decided from its children
  // until one stays open. Only nodes on this path can have changed.
  for (int i = int(path_.size()) - 2; i >= 0; --i) {
    Node& n = t.nodes[path_[i]];
    if (n.proof) break;
    const uint8_t p = proof_of(t, n);
    if (p == kUnproven) break;
    n.proof = p;
    refresh(n);
  }
}

int BatchedMcts::playable(const Tree& t, bool* ok) const {
  if (!config_.solver) return 0;
  const Node& root = t.nodes[0];
  const Node* child = t.nodes.data() + root.first_child;
  const int n = root.num_children;
  bool win = false;
  int lost = 0;
  for (int k = 0; k < n; ++k) {
    const uint8_t v = parent_view(child[k]);
    win |= v == kProvenWin;
    lost += v == kProvenLoss;
  }
  if (!win && (lost == 0 || lost == n)) return 0;
  for (int k = 0; k < n; ++k) {
    const uint8_t v = parent_view(child[k]);
    ok[k] = win ? v == kProvenWin : v != kProvenLoss;
  }
  return win ? 2 : 1;
}

void BatchedMcts::root_child_proofs(int i, uint8_t* out) const {
  const Tree& t = tree(i);
  std::fill(out, out + num_actions_, uint8_t(kUnproven));
  const Node& root = t.nodes[0];
  for (uint32_t k = 0; k < root.num_children; ++k) {
    const Node& c = t.nodes[root.first_child + k];
    out[c.action] = parent_view(c);
  }
}

}  // namespace cz
