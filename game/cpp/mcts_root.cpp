// The root: Dirichlet noise, forced playouts' policy target pruning, the policy target, the
// root's statistics, and the move choice with temperature (mcts.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "mcts.h"
#include "mcts_internal.h"

namespace cz {

using namespace mcts_internal;

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

}  // namespace cz
