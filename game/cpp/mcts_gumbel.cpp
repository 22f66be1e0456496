// Gumbel root search (Danihelka et al., ICLR 2022): sequential halving at the root, the
// completed-Q policy, the deterministic selection below the root (mcts.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "mcts.h"
#include "mcts_internal.h"

namespace cz {

using namespace mcts_internal;

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

}  // namespace cz
