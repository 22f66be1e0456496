// The tree and the search loop: the config's check, PUCT selection, expansion, backup, the
// descent that gathers leaves, expand(), advance() (map of the parts: mcts.h).
#include "mcts.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "egdb.h"
#include "mcts_internal.h"

namespace cz {

using namespace mcts_internal;

namespace {

// A tree rarely goes deeper than this; the descent path vector grows past it if needed.
constexpr int kTypicalDepth = 256;
// Node::pending is 16 bits and counts the leaves of one tree in flight at once.
constexpr int kMaxLeavesPerGame = 65535;
// Most leaves one gather() may return (num_games * leaves_per_game): the batch buffers then take
// about 4 GB on 8x8, far more than one forward pass holds, and sizes stay well inside int.
constexpr int64_t kMaxCapacity = int64_t(1) << 20;

}  // namespace

void check_config(const MctsConfig& c) {
  const std::pair<const char*, float> finite[] = {
      {"c_puct", c.c_puct},
      {"c_puct_base", c.c_puct_base},
      {"fpu_reduction", c.fpu_reduction},
      {"fpu_reduction_root", c.fpu_reduction_root},
      {"dirichlet_alpha", c.dirichlet_alpha},
      {"dirichlet_epsilon", c.dirichlet_epsilon},
      {"virtual_loss", c.virtual_loss},
      {"forced_playouts_k", c.forced_playouts_k},
      {"policy_temperature", c.policy_temperature},
      {"gumbel_c_visit", c.gumbel_c_visit},
      {"gumbel_c_scale", c.gumbel_c_scale},
  };
  for (const auto& [name, value] : finite)
    if (!std::isfinite(value))
      throw std::invalid_argument(std::string(name) + " must be finite, got " + float_text(value));
  if (c.leaves_per_game <= 0 || c.leaves_per_game > kMaxLeavesPerGame)
    throw std::invalid_argument("leaves_per_game must be in [1, " + std::to_string(kMaxLeavesPerGame) + "]");
  if (c.simulations < 0) throw std::invalid_argument("simulations must be >= 0");
  if (c.c_puct < 0) throw std::invalid_argument("c_puct must be >= 0, got " + float_text(c.c_puct));
  if (c.c_puct_base < 0)
    throw std::invalid_argument("c_puct_base must be >= 0 (0: constant c_puct), got " +
                                float_text(c.c_puct_base));
  if (c.virtual_loss < 0) throw std::invalid_argument("virtual_loss must be >= 0");
  if (c.dirichlet_epsilon < 0 || c.dirichlet_epsilon > 1)
    throw std::invalid_argument("dirichlet_epsilon must be in [0, 1]");
  if (c.dirichlet_epsilon > 0 && c.dirichlet_alpha <= 0)
    throw std::invalid_argument("dirichlet_alpha must be positive when noise is on");
  if (c.forced_playouts_k < 0)
    throw std::invalid_argument("forced_playouts_k must be >= 0 (0: off), got " +
                                float_text(c.forced_playouts_k));
  if (c.policy_temperature <= 0)
    throw std::invalid_argument("policy_temperature must be > 0 (1: the priors as given), got " +
                                float_text(c.policy_temperature));
  if (c.gumbel_m < 1) throw std::invalid_argument("gumbel_m must be >= 1, got " + std::to_string(c.gumbel_m));
  if (c.gumbel_c_visit < 0)
    throw std::invalid_argument("gumbel_c_visit must be >= 0, got " + float_text(c.gumbel_c_visit));
  if (c.gumbel_c_scale < 0)
    throw std::invalid_argument("gumbel_c_scale must be >= 0, got " + float_text(c.gumbel_c_scale));
}

float explore_scale(float c_puct, float c_puct_base, float n_parent) {
  float c = c_puct;
  if (c_puct_base > 0) c += std::log((1.0f + n_parent + c_puct_base) / c_puct_base);
  return c * std::sqrt(std::max(n_parent, 1.0f));
}

BatchedMcts::BatchedMcts(int num_games, int size, const MctsConfig& config)
    : size_(size), num_actions_(size * size / 2 * kDirections), config_(config), rng_(config.seed) {
  if (num_games <= 0) throw std::invalid_argument("num_games must be positive");
  if (size != 6 && size != 8) throw std::invalid_argument("board size must be 6 or 8");
  check_config(config);
  if (int64_t(num_games) * config.leaves_per_game > kMaxCapacity)
    throw std::invalid_argument("num_games * leaves_per_game must be at most " +
                                std::to_string(kMaxCapacity) + ", got " + std::to_string(num_games) +
                                " * " + std::to_string(config.leaves_per_game));
  capacity_ = num_games * config.leaves_per_game;
  trees_.reserve(num_games);
  for (int i = 0; i < num_games; ++i) {
    trees_.push_back(Tree{Game(size), {}, {}, 0, 0, false, false, -1, true, false, {}, {}, {}, {}, 0});
    clear_tree(trees_.back());
  }
  leaves_.reserve(capacity_);
  packed_.assign(size_t(capacity_) * kHistory * kPackedWords, 0);
  planes_.assign(size_t(capacity_) * kNumPlanes * size * size, 0.0f);
  masks_.assign(size_t(capacity_) * num_actions_, 0);
  path_.reserve(kTypicalDepth);
}

void BatchedMcts::set_simulations(int n) {
  if (n < 0) throw std::invalid_argument("simulations must be >= 0");
  config_.simulations = n;
}

void BatchedMcts::set_search(int i, int simulations, bool full) {
  Tree& t = tree(i);
  if (simulations < 0)
    throw std::invalid_argument("simulations of game " + std::to_string(i) + " must be >= 0, got " +
                                std::to_string(simulations));
  if (t.inflight) throw std::logic_error("set_search() with leaves in flight: call expand() first");
  t.simulations = simulations;
  if (full == t.full) return;
  t.full = full;
  if (!(t.nodes[0].flags & kExpanded) || !t.noised) return;  // noise comes with the root's expansion
  if (full) {
    add_noise(t);
  } else {
    remove_noise(t);
  }
}

int BatchedMcts::search_budget(int i) const { return budget(tree(i)); }

bool BatchedMcts::full_search(int i) const { return tree(i).full; }

bool BatchedMcts::forcing(const Tree& t) const {
  return config_.forced_playouts_k > 0.0f && config_.dirichlet_epsilon > 0.0f && t.full && !config_.gumbel;
}

BatchedMcts::Tree& BatchedMcts::tree(int i) {
  if (i < 0 || i >= int(trees_.size()))
    throw std::out_of_range("game index " + std::to_string(i) + " out of range");
  return trees_[i];
}

const BatchedMcts::Tree& BatchedMcts::tree(int i) const {
  if (i < 0 || i >= int(trees_.size()))
    throw std::out_of_range("game index " + std::to_string(i) + " out of range");
  return trees_[i];
}

void BatchedMcts::clear_tree(Tree& t) {
  t.nodes.clear();
  t.nodes.push_back(Node{});
  t.inflight = 0;
  t.noised = false;
  t.mixed = false;
  std::array<int, kMaxLegalActions> acts;
  t.root_legal = t.game.legal_actions(acts.data());
  t.over = t.game.result() != Result::Ongoing;
}

void BatchedMcts::reset(int i, const Game& g) {
  Tree& t = tree(i);
  if (g.size() != size_) throw std::invalid_argument("game board size differs from the search's");
  if (t.inflight) throw std::logic_error("reset() with leaves in flight: call expand() first");
  t.game = g;
  clear_tree(t);
}

void BatchedMcts::stop(int i) {
  Tree& t = tree(i);
  if (t.inflight) throw std::logic_error("stop() with leaves in flight: call expand() first");
  t.over = true;
}

bool BatchedMcts::needs_search(const Tree& t) const {
  if (t.over) return false;
  if (t.root_legal == 1 && config_.skip_forced_root) return false;
  const Node& root = t.nodes[0];
  if (!(root.flags & kExpanded)) return !(root.flags & kInFlight);
  if (root.proof) return false;  // solver: the root's result is known
  const int below = int(root.visits) - ((root.flags & kEvaluated) ? 1 : 0);
  return below + t.inflight < budget(t);
}

bool BatchedMcts::done(int i) const { return tree(i).over; }

bool BatchedMcts::search_done(int i) const {
  const Tree& t = tree(i);
  if (t.over || t.inflight) return false;
  if (t.root_legal == 1 && config_.skip_forced_root) return true;
  return (t.nodes[0].flags & kExpanded) && !needs_search(t);
}

void BatchedMcts::refresh(Node& n) const {
  const float vl = config_.virtual_loss;
  const float n_eff = float(n.visits) + vl * float(n.pending);
  const float sum = (n.flags & kFlip) ? -n.q_sum : n.q_sum;  // parent mover's view
  n.q_eff = n_eff > 0.0f ? (sum - vl * float(n.pending)) / n_eff : 0.0f;
  n.u_scale = n.prior / (1.0f + n_eff);
  if (n.proof) n.q_eff = proof_value(parent_view(n));  // solver: the exact value, for selection
}

uint32_t BatchedMcts::select_child(const Tree& t, uint32_t node) const {
  // PUCT: Q + c * P * sqrt(N_parent) / (1 + N_child), with virtual visits counted as losses and
  // unvisited children at the parent's Q minus the FPU reduction.
  if (config_.gumbel) return node == 0 ? gumbel_select_root(t) : gumbel_select_inner(t, node);
  const Node& p = t.nodes[node];
  const Node* child = t.nodes.data() + p.first_child;
  if (node == 0 && forcing(t)) {
    // Forced playouts: the child furthest below sqrt(k * P * N) visits (leaves in flight count
    // as visits, so one batch does not send all its leaves down the same forced edge).
    const float total = float(p.visits) + float(p.pending) - ((p.flags & kEvaluated) ? 1.0f : 0.0f);
    float most = 0.0f;
    uint32_t forced = p.num_children;
    for (uint32_t k = 0; k < p.num_children; ++k) {
      const Node& ch = child[k];
      if (ch.proof && parent_view(ch) == kProvenLoss) continue;  // solver: never worth a visit
      const float deficit =
          std::sqrt(config_.forced_playouts_k * ch.prior * total) - float(ch.visits + ch.pending);
      if (deficit > most) {
        most = deficit;
        forced = k;
      }
    }
    if (forced < p.num_children) return p.first_child + forced;
  }
  const float n_parent = float(p.visits) + config_.virtual_loss * float(p.pending);
  const float explore = explore_scale(config_.c_puct, config_.c_puct_base, n_parent);
  const float parent_q = p.visits ? p.q_sum / float(p.visits) : 0.0f;
  const float fpu = parent_q - (node == 0 ? config_.fpu_reduction_root : config_.fpu_reduction);
  uint32_t best = 0;
  float best_score = -std::numeric_limits<float>::infinity();
  for (uint32_t k = 0; k < p.num_children; ++k) {
    const Node& ch = child[k];
    if (ch.proof && parent_view(ch) == kProvenLoss) continue;  // solver: never worth a visit
    const float q = (ch.visits | ch.pending) ? ch.q_eff : fpu;
    const float score = q + explore * ch.u_scale;
    if (score > best_score) {
      best_score = score;
      best = k;
    }
  }
  return p.first_child + best;
}

void BatchedMcts::expand_node(Tree& t, uint32_t node, const uint8_t* actions, int n, const float* priors) {
  const uint32_t first = uint32_t(t.nodes.size());
  // Each legal action's weight: its prior (NaN and negatives count as zero), raised to 1/T.
  std::array<float, kMaxLegalActions> weight;  // read only where priors were given
  float total = 0.0f;
  if (priors) {
    for (int k = 0; k < n; ++k) {
      const float p = priors[actions[k]];
      weight[k] = p > 0.0f ? p : 0.0f;
    }
    if (config_.policy_temperature != 1.0f) {
      const float inv_t = 1.0f / config_.policy_temperature;
      for (int k = 0; k < n; ++k) weight[k] = std::pow(weight[k], inv_t);  // pow(0, x > 0) is 0
    }
    for (int k = 0; k < n; ++k) total += weight[k];
  }
  t.nodes.resize(first + n);
  for (int k = 0; k < n; ++k) {
    Node& c = t.nodes[first + k];
    c.action = actions[k];
    c.prior = total > 0.0f ? weight[k] / total : 1.0f / float(n);
    c.u_scale = c.prior;  // no visits yet
  }
  Node& nd = t.nodes[node];
  nd.first_child = first;
  nd.num_children = uint8_t(n);
  nd.flags |= kExpanded;
}

void BatchedMcts::backup(Tree& t, const uint32_t* path, int len, float q, float d, bool release) {
  for (int i = len - 1; i >= 0; --i) {
    Node& n = t.nodes[path[i]];
    n.visits += 1;
    n.q_sum += q;
    n.d_sum += d;
    if (release) n.pending -= 1;
    refresh(n);
    if (n.flags & kFlip) q = -q;  // the parent's side to move differs
  }
}

BatchedMcts::Descent BatchedMcts::descend(int gi) {
  Tree& t = trees_[gi];
  Game& g = t.game;
  path_.clear();
  path_.push_back(0);
  uint32_t node = 0;
  int depth = 0;
  std::array<int, kMaxLegalActions> acts;
  Descent outcome;
  for (;;) {
    const uint8_t flags = t.nodes[node].flags;
    if (flags & kTerminal) {
      const bool draw = flags & kTerminalDraw;
      const float q = draw ? 0.0f : (flags & kTerminalWin) ? 1.0f : -1.0f;
      backup(t, path_.data(), int(path_.size()), q, draw ? 1.0f : 0.0f, false);
      ++terminal_hits_;
      if (config_.solver) prove_path(t);
      outcome = Descent::Terminal;
      break;
    }
    if (node != 0 && t.nodes[node].proof) {
      // Solver: decided below here; back up the exact value as at a terminal, search no deeper.
      const uint8_t p = t.nodes[node].proof;
      backup(t, path_.data(), int(path_.size()), proof_value(p), p == kProvenDraw ? 1.0f : 0.0f, false);
      ++terminal_hits_;
      outcome = Descent::Terminal;
      break;
    }
    if (!(flags & kExpanded)) {
      if (flags & kInFlight) {
        ++collisions_;
        outcome = Descent::Collision;
        break;
      }
      // First arrival: score the position by the rules before asking the network.
      const int k = g.legal_actions(acts.data());
      bool terminal = k == 0, draw = false;
      if (!terminal && !g.mid_jump()) {
        const State& s = g.state();
        draw = s.no_progress >= kMaxPliesWithoutProgress ||
               (g.max_plies() > 0 && s.ply >= g.max_plies()) || g.repetitions() >= kRepetitionsForDraw;
        terminal = draw;
      }
      if (terminal) {
        t.nodes[node].flags |= kTerminal | (draw ? kTerminalDraw : 0);
        if (config_.solver) {
          t.nodes[node].proof = draw ? kProvenDraw : kProvenLoss;  // no legal move: the mover lost
          refresh(t.nodes[node]);
        }
        continue;  // scored by the branch above
      }
      if (egdb_ && node != 0 && !g.mid_jump()) {
        const egdb::Value v = egdb_->probe(g.board());
        if (v != egdb::kUnknown) {
          ++egdb_hits_;
          t.nodes[node].flags |=
              kTerminal | (v == egdb::kDraw ? kTerminalDraw : 0) | (v == egdb::kWin ? kTerminalWin : 0);
          if (config_.solver) {
            t.nodes[node].proof = uint8_t(v);  // egdb::Value and Proof number the same results
            refresh(t.nodes[node]);
          }
          continue;  // exact, scored by the branch above
        }
      }
      uint8_t small[kMaxLegalActions];
      for (int j = 0; j < k; ++j) small[j] = uint8_t(acts[j]);
      if (k == 1 && config_.collapse_forced) {
        expand_node(t, node, small, 1, nullptr);  // forced: same value as its only child
      } else {
        const int L = int(leaves_.size());
        Leaf leaf{gi, node, uint32_t(paths_.size()), 0, uint32_t(leaf_actions_.size()), k};
        paths_.insert(paths_.end(), path_.begin(), path_.end());
        leaf.path_end = uint32_t(paths_.size());
        leaf_actions_.insert(leaf_actions_.end(), small, small + k);
        g.pack_history(packed_.data() + size_t(L) * kHistory * kPackedWords);
        t.nodes[node].flags |= kInFlight;
        for (uint32_t p : path_) {
          t.nodes[p].pending += 1;
          refresh(t.nodes[p]);
        }
        t.inflight += 1;
        leaves_.push_back(leaf);
        outcome = Descent::Leaf;
        break;
      }
    }
    const Node& n = t.nodes[node];
    const uint32_t c = n.num_children == 1 ? n.first_child : select_child(t, node);
    const Color before = g.board().side;
    g.step(t.nodes[c].action);
    ++depth;
    Node& ch = t.nodes[c];
    if (!(ch.flags & kEntered)) {
      ch.flags |= kEntered | (g.board().side != before ? kFlip : 0);
      refresh(ch);
    }
    path_.push_back(c);
    node = c;
  }
  for (int i = 0; i < depth; ++i) g.undo();
  return outcome;
}

int BatchedMcts::gather(int max_per_game, int total_cap) {
  if (!leaves_.empty()) throw std::logic_error("gather() called again before expand()");
  if (max_per_game <= 0) max_per_game = config_.leaves_per_game;
  const size_t cap = size_t(total_cap <= 0 ? capacity_ : std::min(total_cap, capacity_));
  paths_.clear();
  leaf_actions_.clear();
  const int G = int(trees_.size());
  for (int j = 0; j < G && leaves_.size() < cap; ++j) {
    const int gi = (next_start_ + j) % G;
    Tree& t = trees_[gi];
    int got = 0;
    while (got < max_per_game && leaves_.size() < cap && needs_search(t)) {
      const Descent r = descend(gi);
      if (r == Descent::Collision) break;  // this tree is saturated for this batch
      if (r == Descent::Leaf) {
        ++got;
        if (leaves_.back().node == 0) break;  // the root itself: nothing below it yet
      }
    }
  }
  next_start_ = (next_start_ + 1) % G;
  const int L = int(leaves_.size());
  encode_packed(size_, packed_.data(), L, planes_.data());
  std::memset(masks_.data(), 0, size_t(L) * num_actions_);
  for (int k = 0; k < L; ++k) {
    const Leaf& lf = leaves_[k];
    uint8_t* mask = masks_.data() + size_t(k) * num_actions_;
    for (int j = 0; j < lf.num_actions; ++j) mask[leaf_actions_[lf.actions_begin + j]] = 1;
  }
  return L;
}

void BatchedMcts::expand(const float* priors, const float* wdl, int n) {
  if (n != int(leaves_.size()))
    throw std::invalid_argument("expand() got " + std::to_string(n) + " evaluations for " +
                                std::to_string(leaves_.size()) + " gathered leaves");
  // Every value is checked before any tree changes, so a refused batch can be evaluated again.
  for (int k = 0; k < n; ++k) {
    const Leaf& lf = leaves_[k];
    const float* row = priors + size_t(k) * num_actions_;
    for (int j = 0; j < lf.num_actions; ++j) {
      const int a = leaf_actions_[lf.actions_begin + j];
      if (!(std::isfinite(row[a]) && row[a] >= 0.0f))
        throw std::invalid_argument("priors[" + std::to_string(k) + ", " + std::to_string(a) + "] is " +
                                    float_text(row[a]) +
                                    ": the priors of legal actions must be finite and >= 0");
    }
    for (int j = 0; j < 3; ++j) {
      const float v = wdl[size_t(k) * 3 + j];
      if (!(std::isfinite(v) && v >= 0.0f))
        throw std::invalid_argument("wdl[" + std::to_string(k) + ", " + std::to_string(j) + "] is " +
                                    float_text(v) + ": win/draw/loss values must be finite and >= 0");
    }
  }
  for (int k = 0; k < n; ++k) {
    const Leaf& lf = leaves_[k];
    Tree& t = trees_[lf.game];
    expand_node(t, lf.node, leaf_actions_.data() + lf.actions_begin, lf.num_actions,
                priors + size_t(k) * num_actions_);
    Node& nd = t.nodes[lf.node];
    nd.flags = uint8_t((nd.flags & ~kInFlight) | kEvaluated);
    const float* v = wdl + size_t(k) * 3;
    const float w = v[0] > 0 ? v[0] : 0, d = v[1] > 0 ? v[1] : 0, l = v[2] > 0 ? v[2] : 0;
    const float s = w + d + l;
    const float q = s > 0 ? (w - l) / s : 0.0f, dd = s > 0 ? d / s : 1.0f;
    backup(t, paths_.data() + lf.path_begin, int(lf.path_end - lf.path_begin), q, dd, true);
    t.inflight -= 1;
    if (lf.node == 0 && !t.noised) add_noise(t);
  }
  leaves_.clear();
}

void BatchedMcts::node_stats(int i, const std::vector<int>& path, float* priors, int32_t* visits) const {
  const Tree& t = tree(i);
  uint32_t node = 0;
  for (size_t j = 0; j < path.size(); ++j) {
    const Node& nd = t.nodes[node];
    uint32_t next = 0;
    for (uint32_t k = 0; k < nd.num_children; ++k)
      if (t.nodes[nd.first_child + k].action == path[j]) next = nd.first_child + k;
    if (!next)
      throw std::invalid_argument("action " + std::to_string(path[j]) + " at index " + std::to_string(j) +
                                  " of the path is not in the tree");
    node = next;
  }
  std::fill(priors, priors + num_actions_, 0.0f);
  std::fill(visits, visits + num_actions_, 0);
  const Node& nd = t.nodes[node];
  for (uint32_t k = 0; k < nd.num_children; ++k) {
    const Node& c = t.nodes[nd.first_child + k];
    priors[c.action] = c.prior;
    visits[c.action] = int32_t(c.visits);
  }
}

void BatchedMcts::advance(int i, int action) {
  Tree& t = tree(i);
  if (t.inflight) throw std::logic_error("advance() with leaves in flight: call expand() first");
  if (t.over) throw std::logic_error("advance() on a finished game");
  if (!t.game.is_legal_action(action))
    throw std::invalid_argument("illegal action " + std::to_string(action) + " in game " + std::to_string(i));
  const Node& root = t.nodes[0];
  uint32_t c = 0;
  for (uint32_t k = 0; k < root.num_children; ++k)
    if (t.nodes[root.first_child + k].action == action) c = root.first_child + k;
  t.game.step(action);
  t.spare.clear();
  if (c && (t.nodes[c].flags & kExpanded)) {
    // Breadth-first copy keeps every node's children contiguous in the new arena.
    t.spare.push_back(t.nodes[c]);
    t.spare[0].flags &= uint8_t(~kFlip);
    t.spare[0].prior = 0.0f;
    for (size_t j = 0; j < t.spare.size(); ++j) {
      const uint32_t nc = t.spare[j].num_children;
      if (!nc) continue;
      const uint32_t old = t.spare[j].first_child;
      t.spare[j].first_child = uint32_t(t.spare.size());
      t.spare.insert(t.spare.end(), t.nodes.begin() + old, t.nodes.begin() + old + nc);
    }
  } else {
    t.spare.push_back(Node{});
  }
  std::swap(t.nodes, t.spare);
  t.noised = false;
  t.mixed = false;
  std::array<int, kMaxLegalActions> acts;
  t.root_legal = t.game.legal_actions(acts.data());
  t.over = t.game.result() != Result::Ongoing;
  if (!t.over && (t.nodes[0].flags & kExpanded)) add_noise(t);
}

}  // namespace cz
