#include "mcts.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "egdb.h"

namespace cz {

namespace {

// Most legal actions any position can have: every square times every direction (8x8).
constexpr int kMaxLegalActions = 32 * kDirections;
// A tree rarely goes deeper than this; the descent path vector grows past it if needed.
constexpr int kTypicalDepth = 256;
// Node::pending is 16 bits and counts the leaves of one tree in flight at once.
constexpr int kMaxLeavesPerGame = 65535;
// Most leaves one gather() may return (num_games * leaves_per_game): the batch buffers then take
// about 4 GB on 8x8, far more than one forward pass holds, and sizes stay well inside int.
constexpr int64_t kMaxCapacity = int64_t(1) << 20;

// A child's Proof seen by its parent's mover: a win and a loss swap where the side changes
// (kFlip); a multi-jump continuation keeps the side, and with it the child's win or loss.
uint8_t parent_view(const Node& c) {
  if (!(c.flags & kFlip) || c.proof == kProvenDraw) return c.proof;
  return c.proof == kProvenWin ? kProvenLoss : c.proof == kProvenLoss ? kProvenWin : kUnproven;
}

float proof_value(uint8_t proof) { return proof == kProvenWin ? 1.0f : proof == kProvenLoss ? -1.0f : 0.0f; }

std::string float_text(float x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return std::to_string(x);
}

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

int considered_visit(int m, int n, int index) {
  if (m <= 1 || index < 0) return std::max(index, 0);
  const int log2max = int(std::ceil(std::log2(double(m))));
  int level = 0, num = m;
  int64_t pos = 0;
  for (;;) {
    // Each phase gives every survivor `extra` visits, in passes over the survivors; the last
    // phase (two survivors) goes on until the budget ends.
    const int extra = std::max(1, int(double(n) / (double(log2max) * double(num))));
    const int64_t block = int64_t(extra) * num;
    if (index < pos + block || num == 2) return level + int((index - pos) / num);
    pos += block;
    level += extra;
    num = std::max(2, num / 2);
  }
}

float explore_scale(float c_puct, float c_puct_base, float n_parent) {
  float c = c_puct;
  if (c_puct_base > 0) c += std::log((1.0f + n_parent + c_puct_base) / c_puct_base);
  return c * std::sqrt(std::max(n_parent, 1.0f));
}

void prune_forced_visits(int n, const float* prior, const float* q, int32_t* visits, int best, float k,
                         float scale) {
  if (best < 0 || best >= n)
    throw std::invalid_argument("best child " + std::to_string(best) + " out of range for " +
                                std::to_string(n) + " children");
  if (!(std::isfinite(k) && k >= 0))
    throw std::invalid_argument("k must be finite and >= 0, got " + float_text(k));
  if (!(std::isfinite(scale) && scale >= 0))
    throw std::invalid_argument("the exploration scale must be finite and >= 0, got " + float_text(scale));
  int64_t total = 0;
  for (int j = 0; j < n; ++j) {
    if (visits[j] < 0)
      throw std::invalid_argument("visits[" + std::to_string(j) + "] is " + std::to_string(visits[j]) +
                                  ": visit counts must be >= 0");
    if (!(std::isfinite(prior[j]) && prior[j] >= 0))
      throw std::invalid_argument("prior[" + std::to_string(j) + "] is " + float_text(prior[j]) +
                                  ": priors must be finite and >= 0");
    if (visits[j] > 0 && !std::isfinite(q[j]))
      throw std::invalid_argument("q[" + std::to_string(j) + "] is " + float_text(q[j]) +
                                  ": a visited child's value must be finite");
    total += visits[j];
  }
  const float best_puct = q[best] + scale * prior[best] / (1.0f + float(visits[best]));
  for (int j = 0; j < n; ++j) {
    if (j == best || visits[j] <= 0) continue;
    // At most its visits (a huge k must not overflow the count).
    const double share = std::ceil(std::sqrt(double(k) * prior[j] * double(total)));
    const int forced = int(std::min(share, double(visits[j])));
    int v = visits[j];
    for (int taken = 0; taken < forced && v > 0; ++taken) {
      if (!(q[j] + scale * prior[j] / float(v) < best_puct)) break;  // PUCT with v - 1 visits
      --v;
    }
    visits[j] = v == 1 ? 0 : v;
  }
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

void BatchedMcts::add_noise(Tree& t) {
  t.noised = true;
  if (config_.gumbel) {  // Gumbel draws in place of Dirichlet noise, a new decision's schedule
    gumbel_setup(t, t.full && config_.dirichlet_epsilon > 0.0f);
    return;
  }
  Node& root = t.nodes[0];
  const int n = root.num_children;
  if (!t.full || t.mixed || config_.dirichlet_epsilon <= 0.0f || n <= 1) return;
  std::gamma_distribution<float> gamma(config_.dirichlet_alpha, 1.0f);
  weights_.resize(n);
  float total = 0.0f;
  for (int k = 0; k < n; ++k) total += weights_[k] = gamma(rng_);
  if (!(total > 0.0f)) return;  // every draw underflowed (tiny alpha): no noise this time
  const float eps = config_.dirichlet_epsilon;
  t.clean.resize(n);
  t.mixed = true;
  for (int k = 0; k < n; ++k) {
    Node& c = t.nodes[root.first_child + k];
    t.clean[k] = c.prior;
    c.prior = (1.0f - eps) * c.prior + eps * weights_[k] / total;
    refresh(c);
  }
}

void BatchedMcts::remove_noise(Tree& t) {
  if (config_.gumbel) {
    gumbel_setup(t, false);
    return;
  }
  if (!t.mixed) return;
  const Node& root = t.nodes[0];
  for (int k = 0; k < root.num_children; ++k) {
    Node& c = t.nodes[root.first_child + k];
    c.prior = t.clean[k];
    refresh(c);
  }
  t.mixed = false;
}

namespace {

float logit_of(float prior) { return std::log(std::max(prior, 1e-30f)); }

// A child's mean value from its parent mover's view, exact when proven.
float child_q(const Node& c) {
  if (c.proof) return proof_value(parent_view(c));
  const float sum = (c.flags & kFlip) ? -c.q_sum : c.q_sum;
  return sum / float(c.visits);
}

}  // namespace

bool BatchedMcts::gumbel_ready(const Tree& t) const {
  return t.gumbel.size() == t.nodes[0].num_children && t.nodes[0].num_children > 0;
}

void BatchedMcts::gumbel_setup(Tree& t, bool noise) {
  const Node& root = t.nodes[0];
  const int n = root.num_children;
  const Node* child = t.nodes.data() + root.first_child;
  t.gumbel.assign(n, 0.0f);
  t.base.resize(n);
  t.considered.assign(n, 0);
  if (noise && n > 1) {
    std::uniform_real_distribution<float> uniform(std::numeric_limits<float>::min(), 1.0f);
    for (int k = 0; k < n; ++k) t.gumbel[k] = -std::log(-std::log(uniform(rng_)));
  }
  std::array<int, kMaxLegalActions> order;
  std::array<float, kMaxLegalActions> key;
  for (int k = 0; k < n; ++k) {
    t.base[k] = child[k].visits;
    order[k] = k;
    key[k] = t.gumbel[k] + logit_of(child[k].prior);
  }
  // Gumbel-top-k: the m highest g + logit, ties to the lower index.
  std::stable_sort(order.begin(), order.begin() + n, [&](int a, int b) { return key[a] > key[b]; });
  t.num_considered = std::min(config_.gumbel_m, n);
  for (int j = 0; j < t.num_considered; ++j) t.considered[order[j]] = 1;
}

void BatchedMcts::gumbel_sigma(const Tree& t, uint32_t node, bool virtual_loss, float* sigma) const {
  const Node& p = t.nodes[node];
  const Node* child = t.nodes.data() + p.first_child;
  const int n = p.num_children;
  const float vl = config_.virtual_loss;
  // The node's own value (its network evaluation, and any visit that ended here): what its
  // visits hold beyond its children's, from its mover's view.
  float own = p.q_sum, own_n = float(p.visits);
  float visited_p = 0.0f, visited_pq = 0.0f, total_n = 0.0f, max_n = 0.0f;
  std::array<float, kMaxLegalActions> q;
  std::array<bool, kMaxLegalActions> known;
  for (int k = 0; k < n; ++k) {
    const Node& c = child[k];
    if (c.visits) {
      own -= (c.flags & kFlip) ? -c.q_sum : c.q_sum;
      own_n -= float(c.visits);
      const float qc = child_q(c);
      visited_p += c.prior;
      visited_pq += c.prior * qc;
      total_n += float(c.visits);
    }
    const float nv = float(c.visits) + (virtual_loss ? vl * float(c.pending) : 0.0f);
    max_n = std::max(max_n, nv);
    known[k] = c.visits || (virtual_loss && c.pending) || c.proof;
    q[k] = !known[k] ? 0.0f : virtual_loss ? c.q_eff : c.visits ? child_q(c) : proof_value(parent_view(c));
  }
  float raw = own_n > 0.5f ? own / own_n : p.visits ? p.q_sum / float(p.visits) : 0.0f;
  raw = std::clamp(raw, -1.0f, 1.0f);
  const float mixed =
      visited_p > 0.0f ? (raw + total_n * (visited_pq / visited_p)) / (total_n + 1.0f) : raw;
  const float scale = (config_.gumbel_c_visit + max_n) * config_.gumbel_c_scale;
  for (int k = 0; k < n; ++k) sigma[k] = scale * 0.5f * ((known[k] ? q[k] : mixed) + 1.0f);
}

uint32_t BatchedMcts::gumbel_select_root(const Tree& t) const {
  const Node& p = t.nodes[0];
  const Node* child = t.nodes.data() + p.first_child;
  const int n = p.num_children;
  const bool ready = gumbel_ready(t);
  std::array<float, kMaxLegalActions> sigma;
  gumbel_sigma(t, 0, false, sigma.data());
  int64_t started = 0, base_total = 0;
  std::array<int64_t, kMaxLegalActions> fresh;  // this decision's visits, leaves in flight included
  for (int k = 0; k < n; ++k) {
    const int64_t b = ready ? t.base[k] : 0;
    fresh[k] = int64_t(child[k].visits) - b + child[k].pending;
    started += fresh[k];
    base_total += b;
  }
  const int m = ready ? t.num_considered : n;
  const int budget_new = int(std::max<int64_t>(1, budget(t) - base_total));
  const int64_t want = considered_visit(m, budget_new, int(started));
  int best = -1, least = -1;
  float best_score = 0.0f, least_score = 0.0f;
  for (int k = 0; k < n; ++k) {
    if (ready && !t.considered[k]) continue;
    if (child[k].proof && parent_view(child[k]) == kProvenLoss) continue;  // never worth a visit
    const float score = (ready ? t.gumbel[k] : 0.0f) + logit_of(child[k].prior) + sigma[k];
    if (fresh[k] == want && (best < 0 || score > best_score)) {
      best = k;
      best_score = score;
    }
    if (least < 0 || fresh[k] < fresh[least] || (fresh[k] == fresh[least] && score > least_score)) {
      least = k;
      least_score = score;
    }
  }
  if (best >= 0) return p.first_child + best;
  if (least >= 0) return p.first_child + least;  // the schedule does not fit (budget changed)
  // Every considered action is proven lost: the least visited other one.
  for (int k = 0; k < n; ++k) {
    if (child[k].proof && parent_view(child[k]) == kProvenLoss) continue;
    if (least < 0 || fresh[k] < fresh[least]) least = k;
  }
  return p.first_child + (least >= 0 ? least : 0);
}

uint32_t BatchedMcts::gumbel_select_inner(const Tree& t, uint32_t node) const {
  const Node& p = t.nodes[node];
  const Node* child = t.nodes.data() + p.first_child;
  const int n = p.num_children;
  std::array<float, kMaxLegalActions> s;
  gumbel_sigma(t, node, true, s.data());
  float top = -std::numeric_limits<float>::infinity(), total_n = 0.0f;
  const float vl = config_.virtual_loss;
  for (int k = 0; k < n; ++k) {
    s[k] += logit_of(child[k].prior);
    top = std::max(top, s[k]);
    total_n += float(child[k].visits) + vl * float(child[k].pending);
  }
  float z = 0.0f;
  for (int k = 0; k < n; ++k) z += s[k] = std::exp(s[k] - top);
  int best = -1;
  float best_score = 0.0f;
  for (int k = 0; k < n; ++k) {
    const Node& c = child[k];
    if (c.proof && parent_view(c) == kProvenLoss) continue;  // solver: never worth a visit
    const float score = s[k] / z - (float(c.visits) + vl * float(c.pending)) / (1.0f + total_n);
    if (best < 0 || score > best_score) {
      best = k;
      best_score = score;
    }
  }
  return p.first_child + uint32_t(best < 0 ? 0 : best);
}

int BatchedMcts::gumbel_choice(const Tree& t, const bool* ok, int only) const {
  const Node& p = t.nodes[0];
  const Node* child = t.nodes.data() + p.first_child;
  const int n = p.num_children;
  const bool ready = gumbel_ready(t);
  std::array<float, kMaxLegalActions> sigma;
  gumbel_sigma(t, 0, false, sigma.data());
  // The last survivors: the considered (playable) actions with the most new visits.
  for (int pass = 0; pass < 2; ++pass) {
    const bool considered_only = pass == 0 && ready;
    int64_t most = -1;
    for (int k = 0; k < n; ++k)
      if ((!considered_only || t.considered[k]) && (!only || ok[k]))
        most = std::max<int64_t>(most, int64_t(child[k].visits) - (ready ? t.base[k] : 0));
    int best = -1;
    float best_score = 0.0f;
    for (int k = 0; k < n; ++k) {
      if ((considered_only && !t.considered[k]) || (only && !ok[k])) continue;
      if (int64_t(child[k].visits) - (ready ? t.base[k] : 0) != most) continue;
      const float score = (ready ? t.gumbel[k] : 0.0f) + logit_of(child[k].prior) + sigma[k];
      if (best < 0 || score > best_score) {
        best = k;
        best_score = score;
      }
    }
    if (best >= 0) return best;
  }
  return 0;
}

void BatchedMcts::gumbel_policy(const Tree& t, float* pi) const {
  const Node& p = t.nodes[0];
  const Node* child = t.nodes.data() + p.first_child;
  const int n = p.num_children;
  std::array<bool, kMaxLegalActions> ok;
  const int only = playable(t, ok.data());
  gumbel_sigma(t, 0, false, pi);
  float top = -std::numeric_limits<float>::infinity();
  for (int k = 0; k < n; ++k) {
    pi[k] += logit_of(child[k].prior);
    if (!only || ok[k]) top = std::max(top, pi[k]);
  }
  float z = 0.0f;
  for (int k = 0; k < n; ++k) z += pi[k] = (!only || ok[k]) ? std::exp(pi[k] - top) : 0.0f;
  for (int k = 0; k < n; ++k) pi[k] /= z;
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

int BatchedMcts::root_child_visits(int i) const {
  const Tree& t = tree(i);
  const Node& root = t.nodes[0];
  int n = 0;
  for (uint32_t k = 0; k < root.num_children; ++k) n += int(t.nodes[root.first_child + k].visits);
  return n;
}

void BatchedMcts::root_visits(int i, int32_t* out) const {
  const Tree& t = tree(i);
  std::fill(out, out + num_actions_, 0);
  const Node& root = t.nodes[0];
  for (uint32_t k = 0; k < root.num_children; ++k) {
    const Node& c = t.nodes[root.first_child + k];
    out[c.action] = int32_t(c.visits);
  }
}

void BatchedMcts::root_target(int i, int32_t* out) const {
  root_visits(i, out);
  const Tree& t = tree(i);
  const Node& root = t.nodes[0];
  const int n = root.num_children;
  const Node* child = t.nodes.data() + root.first_child;
  if (config_.gumbel) {
    if (root_child_visits(i) == 0) return;  // no search: no target (all 0, as under PUCT)
    std::array<float, kMaxLegalActions> pi;
    gumbel_policy(t, pi.data());
    float top = 0.0f;
    for (int k = 0; k < n; ++k) top = std::max(top, pi[k]);
    for (int k = 0; k < n; ++k) out[child[k].action] = int32_t(std::lround(65535.0 * pi[k] / top));
    return;
  }
  std::array<bool, kMaxLegalActions> ok;
  const int only = playable(t, ok.data());  // solver: the moves choose() may play
  if (only == 2) {  // a proven win: the target is the winning moves' visits (raw, no pruning)
    for (int k = 0; k < n; ++k)
      if (!ok[k]) out[child[k].action] = 0;
    return;
  }
  if (forcing(t) && n > 1) {
    std::array<float, kMaxLegalActions> prior, q;
    std::array<int32_t, kMaxLegalActions> visits;
    int best = -1;
    for (int k = 0; k < n; ++k) {
      const Node& c = child[k];
      prior[k] = c.prior;
      visits[k] = int32_t(c.visits);
      q[k] = c.visits ? ((c.flags & kFlip) ? -c.q_sum : c.q_sum) / float(c.visits) : 0.0f;
      // The most visited child that may be played, ties to the higher prior (as choose() at
      // temperature 0).
      if (only && !ok[k]) continue;
      if (best < 0 || visits[k] > visits[best] || (visits[k] == visits[best] && prior[k] > prior[best]))
        best = k;
    }
    const float scale = explore_scale(config_.c_puct, config_.c_puct_base, float(root.visits));
    prune_forced_visits(n, prior.data(), q.data(), visits.data(), best, config_.forced_playouts_k, scale);
    for (int k = 0; k < n; ++k) out[child[k].action] = visits[k];
  }
  if (only == 1) {  // proven losses leave the target; if nothing else had a visit, the rest share it
    int64_t left = 0;
    for (int k = 0; k < n; ++k) {
      if (!ok[k]) out[child[k].action] = 0;
      left += out[child[k].action];
    }
    if (left == 0)
      for (int k = 0; k < n; ++k) out[child[k].action] = ok[k] ? 1 : 0;
  }
}

void BatchedMcts::root_policy(int i, float* out) const {
  const Tree& t = tree(i);
  std::fill(out, out + num_actions_, 0.0f);
  const Node& root = t.nodes[0];
  const int n = root.num_children;
  const Node* child = t.nodes.data() + root.first_child;
  if (root_child_visits(i) == 0) return;
  if (config_.gumbel) {
    std::array<float, kMaxLegalActions> pi;
    gumbel_policy(t, pi.data());
    for (int k = 0; k < n; ++k) out[child[k].action] = pi[k];
    return;
  }
  std::vector<int32_t> target(num_actions_);
  root_target(i, target.data());
  double total = 0.0;
  for (int32_t v : target) total += v;
  if (total > 0)
    for (int a = 0; a < num_actions_; ++a) out[a] = float(target[a] / total);
}

void BatchedMcts::root_gumbel(int i, float* g, uint8_t* considered) const {
  const Tree& t = tree(i);
  std::fill(g, g + num_actions_, std::numeric_limits<float>::quiet_NaN());
  std::fill(considered, considered + num_actions_, uint8_t(0));
  const Node& root = t.nodes[0];
  const bool ready = gumbel_ready(t);
  for (int k = 0; k < root.num_children; ++k) {
    const int a = t.nodes[root.first_child + k].action;
    g[a] = ready ? t.gumbel[k] : 0.0f;
    considered[a] = ready ? t.considered[k] : 1;
  }
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

void BatchedMcts::root_priors(int i, float* out) const {
  const Tree& t = tree(i);
  std::fill(out, out + num_actions_, 0.0f);
  const Node& root = t.nodes[0];
  for (uint32_t k = 0; k < root.num_children; ++k) {
    const Node& c = t.nodes[root.first_child + k];
    out[c.action] = c.prior;
  }
}

void BatchedMcts::root_q(int i, float* out) const {
  const Tree& t = tree(i);
  std::fill(out, out + num_actions_, std::numeric_limits<float>::quiet_NaN());
  const Node& root = t.nodes[0];
  for (uint32_t k = 0; k < root.num_children; ++k) {
    const Node& c = t.nodes[root.first_child + k];
    if (c.visits) out[c.action] = ((c.flags & kFlip) ? -c.q_sum : c.q_sum) / float(c.visits);
  }
}

void BatchedMcts::root_wdl(int i, float* out) const {
  const Node& root = tree(i).nodes[0];
  if (!root.visits) {
    out[0] = out[1] = out[2] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  // Win and loss from the sums of Q and D. Exact database values summed with near-exact network
  // ones round in float32 (a sum of Q that reaches n while D's sum stays above 0), so a share can
  // come out a hair below 0: clamp each to [0, 1] and renormalise, so the record gets a
  // probability vector.
  const float n = float(root.visits);
  const float w = std::clamp((n - root.d_sum + root.q_sum) / (2 * n), 0.0f, 1.0f);
  const float d = std::clamp(root.d_sum / n, 0.0f, 1.0f);
  const float l = std::clamp((n - root.d_sum - root.q_sum) / (2 * n), 0.0f, 1.0f);
  const float total = w + d + l;
  out[0] = w / total;
  out[1] = d / total;
  out[2] = l / total;
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

int BatchedMcts::choose(int i, float temperature) {
  Tree& t = tree(i);
  if (t.over) throw std::logic_error("choose() on a finished game");
  if (t.inflight) throw std::logic_error("choose() with leaves in flight: call expand() first");
  if (std::isnan(temperature)) throw std::invalid_argument("choose() temperature is nan");
  const Node& root = t.nodes[0];
  if (!(root.flags & kExpanded)) {
    if (t.root_legal == 1) {
      std::array<int, kMaxLegalActions> acts;
      t.game.legal_actions(acts.data());
      return acts[0];
    }
    throw std::logic_error("choose() before any search at the root of game " + std::to_string(i));
  }
  const Node* child = t.nodes.data() + root.first_child;
  const int n = root.num_children;
  // Solver: a proven win is always played (the most visited one), a proven loss never while
  // another move is not proven lost. Without proofs every child may be played.
  std::array<bool, kMaxLegalActions> ok;
  const int only = playable(t, ok.data());
  // Gumbel: the search's own choice among its last survivors (a proven win as under PUCT).
  if (config_.gumbel && only != 2) return child[gumbel_choice(t, ok.data(), only)].action;
  const auto allowed = [&](int k) { return !only || ok[k]; };
  uint32_t vmax = 0;
  for (int k = 0; k < n; ++k)
    if (allowed(k)) vmax = std::max(vmax, child[k].visits);
  if (vmax == 0 || temperature <= 0.0f || only == 2) {
    // Argmax of visits, ties (and the no-visit case) to the higher prior, then the lower index.
    int best = -1;
    for (int k = 0; k < n; ++k)
      if (allowed(k) && (best < 0 || child[k].visits > child[best].visits ||
                         (child[k].visits == child[best].visits && child[k].prior > child[best].prior)))
        best = k;
    return child[best].action;
  }
  weights_.resize(n);
  double total = 0.0;
  const double inv_t = 1.0 / double(temperature);
  for (int k = 0; k < n; ++k) {
    const double w =
        allowed(k) && child[k].visits ? std::pow(double(child[k].visits) / double(vmax), inv_t) : 0.0;
    weights_[k] = float(w);
    total += w;
  }
  double r = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (int k = 0; k < n; ++k) {
    r -= weights_[k];
    if (r < 0.0 && weights_[k] > 0.0f) return child[k].action;
  }
  for (int k = n - 1; k >= 0; --k)  // rounding left r >= 0: the last action with weight
    if (weights_[k] > 0.0f) return child[k].action;
  return child[0].action;
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
