// The network's forward pass (convnet.h). Every hot function is always_inline, so it is compiled
// twice: inside ConvNet::run_avx2 (AVX2+FMA, chosen at run time on CPUs that have them) and inside
// ConvNet::run_portable (the package's baseline instructions).
#include "convnet.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#pragma GCC diagnostic ignored "-Wpsabi"  // 32-byte vectors pass only between inlined functions

namespace cz::net {
namespace {

#define CZ_INLINE [[gnu::always_inline]] inline

typedef float v8 __attribute__((vector_size(32)));

CZ_INLINE v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

CZ_INLINE void store8(float* p, const v8& v) { std::memcpy(p, &v, sizeof v); }

int round_up(int n, int m) { return (n + m - 1) / m * m; }

}  // namespace

namespace {

// One block of X output cells of row `y` starting at column `x0` (interior coordinates), all output
// channels in chunks of 8 * K: bias, the taps' weight rows scaled by the input values, then the
// residual (a grid of the output's stride) and the ReLU.
template <int X, int K>
CZ_INLINE void conv_cells(int taps, int cin, int cout, const float* w, const float* bias, const float* in,
                          int in_s, float* out, const float* residual, bool relu, int P, int y, int x0) {
  for (int co = 0; co < cout; co += 8 * K) {
    v8 acc[X][K];
    for (int k = 0; k < K; ++k) {
      const v8 b = load8(bias + co + 8 * k);
      for (int i = 0; i < X; ++i) acc[i][k] = b;
    }
    for (int t = 0; t < taps; ++t) {
      const int ky = taps == 9 ? t / 3 : 1;
      const int kx = taps == 9 ? t % 3 : 1;
      const float* ip = in + ((y + ky) * P + (x0 + kx)) * in_s;
      const float* wp = w + size_t(t) * cin * cout + co;
      for (int ci = 0; ci < cin; ++ci) {
        v8 wk[K];
        for (int k = 0; k < K; ++k) wk[k] = load8(wp + size_t(ci) * cout + 8 * k);
        for (int i = 0; i < X; ++i) {
          const float a = ip[i * in_s + ci];
          for (int k = 0; k < K; ++k) acc[i][k] += a * wk[k];
        }
      }
    }
    for (int i = 0; i < X; ++i) {
      float* op = out + ((y + 1) * P + (x0 + 1 + i)) * cout + co;
      for (int k = 0; k < K; ++k) {
        v8 v = acc[i][k];
        if (residual) v += load8(residual + ((y + 1) * P + (x0 + 1 + i)) * cout + co + 8 * k);
        float lanes[8];
        store8(lanes, v);
        if (relu)
          for (float& l : lanes) l = l > 0.0f ? l : 0.0f;
        std::memcpy(op + 8 * k, lanes, sizeof lanes);
      }
    }
  }
}

// A whole convolution over the S x S interior; the output stride is `cout` (a multiple of 8).
template <int K>
CZ_INLINE void conv_grid(int taps, int cin, int cout, const float* w, const float* bias, const float* in, int in_s,
                         float* out, const float* residual, bool relu, int S) {
  const int P = S + 2;
  for (int y = 0; y < S; ++y) {
    int x = 0;
    for (; x + 4 <= S; x += 4) conv_cells<4, K>(taps, cin, cout, w, bias, in, in_s, out, residual, relu, P, y, x);
    for (; x < S; ++x) conv_cells<1, K>(taps, cin, cout, w, bias, in, in_s, out, residual, relu, P, y, x);
  }
}

template <int K>
CZ_INLINE void dense_chunks(const float* in, int n_in, const float* w, int w_stride, float* acc_out, int h0) {
  v8 acc[K];
  for (int k = 0; k < K; ++k) acc[k] = load8(acc_out + h0 + 8 * k);
  for (int f = 0; f < n_in; ++f) {
    const float a = in[f];
    if (a == 0.0f) continue;  // most inputs are zero after a ReLU
    const float* wp = w + size_t(f) * w_stride + h0;
    for (int k = 0; k < K; ++k) acc[k] += a * load8(wp + 8 * k);
  }
  for (int k = 0; k < K; ++k) store8(acc_out + h0 + 8 * k, acc[k]);
}

// out[0..stride) (starting from the bias already there) += sum_f in[f] * w[f][..]; stride % 8 == 0.
CZ_INLINE void dense(const float* in, int n_in, const float* w, int stride, float* out) {
  int h = 0;
  for (; h + 64 <= stride; h += 64) dense_chunks<8>(in, n_in, w, stride, out, h);
  for (; h + 16 <= stride; h += 16) dense_chunks<2>(in, n_in, w, stride, out, h);
  for (; h < stride; h += 8) dense_chunks<1>(in, n_in, w, stride, out, h);
}

}  // namespace

namespace {

void check(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("network (cpp backend): " + what);
}

}  // namespace

ConvNet::ConvNet(const Shape& s, const std::vector<Layer>& layers, const std::vector<int32_t>& policy_index)
    : shape_(s), avx2_(kernel() == "avx2+fma") {
  check(s.size >= 4 && s.size <= 16 && s.size % 2 == 0, "board size " + std::to_string(s.size));
  check(s.in_planes >= 1 && s.in_planes <= 64, "in_planes " + std::to_string(s.in_planes));
  check(s.channels >= 1 && s.channels <= 512, "channels " + std::to_string(s.channels));
  check(s.blocks >= 0 && s.blocks <= 64, "blocks " + std::to_string(s.blocks));
  check(s.policy_channels >= 1 && s.policy_channels <= 512, "policy_channels " + std::to_string(s.policy_channels));
  check(s.value_channels >= 1 && s.value_channels <= 512, "value_channels " + std::to_string(s.value_channels));
  check(s.value_hidden >= 1 && s.value_hidden <= 4096, "value_hidden " + std::to_string(s.value_hidden));
  const int cells = s.size * s.size;
  check(s.num_actions == cells / 2 * 4, "num_actions " + std::to_string(s.num_actions));
  const size_t expected_layers = 1 + 2 * size_t(s.blocks) + 5;
  check(layers.size() == expected_layers,
        std::to_string(layers.size()) + " layers, expected " + std::to_string(expected_layers));
  size_t at = 0;
  auto take = [&](const char* name, size_t weights, size_t biases) -> const Layer& {
    const Layer& l = layers[at++];
    const std::string where = std::string(name) + " (layer " + std::to_string(at - 1) + ")";
    check(l.weight.size() == weights,
          where + " has " + std::to_string(l.weight.size()) + " weights, expected " + std::to_string(weights));
    check(l.bias.size() == biases,
          where + " has " + std::to_string(l.bias.size()) + " biases, expected " + std::to_string(biases));
    for (float v : l.weight) check(std::isfinite(v), where + " has a non-finite weight");
    for (float v : l.bias) check(std::isfinite(v), where + " has a non-finite bias");
    return l;
  };
  // torch [out][in][taps] -> [tap][in][out_stride]
  auto repack = [](const Layer& l, int cin, int cout, int taps, int out_stride) {
    Conv c;
    c.in = cin;
    c.out = out_stride;
    c.taps = taps;
    c.w.assign(size_t(taps) * cin * out_stride, 0.0f);
    c.b.assign(out_stride, 0.0f);
    for (int o = 0; o < cout; ++o) {
      c.b[o] = l.bias[o];
      for (int i = 0; i < cin; ++i)
        for (int t = 0; t < taps; ++t)
          c.w[(size_t(t) * cin + i) * out_stride + o] = l.weight[(size_t(o) * cin + i) * taps + t];
    }
    return c;
  };
  const int C = s.channels;
  stride_ = round_up(C, 16);
  policy_stride_ = round_up(s.policy_channels, 8);
  value_stride_ = round_up(s.value_channels, 8);
  hidden_stride_ = round_up(s.value_hidden, 8);
  stem_ = repack(take("stem", size_t(C) * s.in_planes * 9, C), s.in_planes, C, 9, stride_);
  for (int b = 0; b < 2 * s.blocks; ++b)
    tower_.push_back(repack(take("tower conv", size_t(C) * C * 9, C), C, C, 9, stride_));
  policy1_ = repack(take("policy 1x1", size_t(s.policy_channels) * C, s.policy_channels), C, s.policy_channels, 1,
                    policy_stride_);
  const Layer& p2 = take("policy output", size_t(4) * s.policy_channels, 4);
  policy2_w_ = p2.weight;
  policy2_b_ = p2.bias;
  value1_ = repack(take("value 1x1", size_t(s.value_channels) * C, s.value_channels), C, s.value_channels, 1,
                   value_stride_);
  const int features = s.value_channels * cells;
  const Layer& f1 = take("value dense", size_t(s.value_hidden) * features, s.value_hidden);
  fc1_w_.assign(size_t(features) * hidden_stride_, 0.0f);
  fc1_b_.assign(hidden_stride_, 0.0f);
  for (int h = 0; h < s.value_hidden; ++h) {
    fc1_b_[h] = f1.bias[h];
    for (int f = 0; f < features; ++f) fc1_w_[size_t(f) * hidden_stride_ + h] = f1.weight[size_t(h) * features + f];
  }
  const Layer& f2 = take("value output", size_t(3) * s.value_hidden, 3);
  fc2_w_ = f2.weight;
  fc2_b_ = f2.bias;

  check(policy_index.size() == size_t(s.num_actions),
        "policy index has " + std::to_string(policy_index.size()) + " entries, expected " +
            std::to_string(s.num_actions));
  std::vector<int32_t> slot(cells, -1);  // per cell: its index in playable_
  for (int32_t flat : policy_index) {
    check(flat >= 0 && flat < 4 * cells, "policy index entry " + std::to_string(flat) + " out of range");
    const int cell = flat % cells;
    if (slot[cell] < 0) {
      slot[cell] = int32_t(playable_.size());
      playable_.push_back(cell);
    }
    policy_logit_.push_back(slot[cell] * 4 + flat / cells);
  }
}

std::string ConvNet::kernel() {
  const char* forced = std::getenv("CHECKERZERO_CPU_KERNEL");
  if (forced && std::string(forced) == "portable") return "portable";
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2+fma";
#endif
  return "portable";
}

// The forward pass of `n` positions (ConvNet::evaluate). always_inline, with every kernel it calls, so
// that run_avx2 and run_portable each get a copy built for their instruction set.
[[gnu::always_inline]] inline void ConvNet::forward(const float* planes, const uint8_t* mask, int n, float* priors,
                                                   float* wdl) const {
  const Shape& s = shape_;
  const int S = s.size, P = S + 2, cells = S * S, C = s.channels;
  // Padded grids ([cell][channel], zero border): the input, three for the tower, the value head's.
  // Only interiors are written, so the borders stay zero for every position.
  std::vector<float> input(size_t(P) * P * s.in_planes, 0.0f), value(size_t(P) * P * value_stride_, 0.0f);
  std::vector<float> grids(3 * size_t(P) * P * stride_, 0.0f);
  std::vector<float> features(size_t(s.value_channels) * cells);
  std::vector<float> hidden(hidden_stride_);
  std::vector<float> policy_hidden(policy_stride_);
  std::vector<float> logits(playable_.size() * 4);
  for (int p = 0; p < n; ++p) {
    const float* pl = planes + size_t(p) * s.in_planes * cells;
    for (int c = 0; c < s.in_planes; ++c)
      for (int y = 0; y < S; ++y)
        for (int x = 0; x < S; ++x)
          input[((y + 1) * P + (x + 1)) * s.in_planes + c] = pl[(size_t(c) * S + y) * S + x];
    float* x_ = grids.data();  // the tower's output so far
    float* y_ = x_ + size_t(P) * P * stride_;
    float* z_ = y_ + size_t(P) * P * stride_;
    conv_grid<2>(9, s.in_planes, stride_, stem_.w.data(), stem_.b.data(), input.data(), s.in_planes, x_, nullptr,
                 true, S);
    for (int b = 0; b < s.blocks; ++b) {
      const Conv& c1 = tower_[2 * b];
      const Conv& c2 = tower_[2 * b + 1];
      conv_grid<2>(9, C, stride_, c1.w.data(), c1.b.data(), x_, stride_, y_, nullptr, true, S);
      conv_grid<2>(9, C, stride_, c2.w.data(), c2.b.data(), y_, stride_, z_, x_, true, S);
      std::swap(x_, z_);
    }
    // value head: 1x1 conv, its grid read in torch's (V, S, S) order, two dense layers
    conv_grid<1>(1, C, value_stride_, value1_.w.data(), value1_.b.data(), x_, stride_, value.data(), nullptr, true,
                 S);
    for (int v = 0; v < s.value_channels; ++v)
      for (int y = 0; y < S; ++y)
        for (int x = 0; x < S; ++x)
          features[(size_t(v) * S + y) * S + x] = value[((y + 1) * P + (x + 1)) * value_stride_ + v];
    std::copy(fc1_b_.begin(), fc1_b_.end(), hidden.begin());
    dense(features.data(), int(features.size()), fc1_w_.data(), hidden_stride_, hidden.data());
    for (float& h : hidden) h = h > 0.0f ? h : 0.0f;
    float z[3];
    for (int o = 0; o < 3; ++o) {
      float sum = fc2_b_[o];
      for (int h = 0; h < s.value_hidden; ++h) sum += fc2_w_[size_t(o) * s.value_hidden + h] * hidden[h];
      z[o] = sum;
    }
    const float zmax = std::max({z[0], z[1], z[2]});
    float e[3], total = 0.0f;
    for (int o = 0; o < 3; ++o) total += e[o] = std::exp(z[o] - zmax);
    for (int o = 0; o < 3; ++o) wdl[size_t(p) * 3 + o] = e[o] / total;
    // policy head at the playable cells: 1x1 conv C -> P (ReLU), 1x1 conv P -> 4
    for (size_t k = 0; k < playable_.size(); ++k) {
      const float* in = x_ + ((playable_[k] / S + 1) * P + (playable_[k] % S + 1)) * stride_;
      std::copy(policy1_.b.begin(), policy1_.b.end(), policy_hidden.begin());
      dense(in, C, policy1_.w.data(), policy_stride_, policy_hidden.data());
      for (int d = 0; d < 4; ++d) {
        float sum = policy2_b_[d];
        for (int h = 0; h < s.policy_channels; ++h)
          sum += policy2_w_[size_t(d) * s.policy_channels + h] * std::max(policy_hidden[h], 0.0f);
        logits[k * 4 + d] = sum;
      }
    }
    const uint8_t* m = mask + size_t(p) * s.num_actions;
    float* out = priors + size_t(p) * s.num_actions;
    float lmax = -INFINITY;
    for (int a = 0; a < s.num_actions; ++a)
      if (m[a]) lmax = std::max(lmax, logits[policy_logit_[a]]);
    float psum = 0.0f;
    for (int a = 0; a < s.num_actions; ++a) {
      out[a] = m[a] ? std::exp(logits[policy_logit_[a]] - lmax) : 0.0f;
      psum += out[a];
    }
    if (psum > 0.0f)  // no legal action: all zeros
      for (int a = 0; a < s.num_actions; ++a) out[a] /= psum;
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2,fma"))) void ConvNet::run_avx2(const float* planes, const uint8_t* mask, int n,
                                                          float* priors, float* wdl) const {
  forward(planes, mask, n, priors, wdl);
}
#endif

void ConvNet::run_portable(const float* planes, const uint8_t* mask, int n, float* priors, float* wdl) const {
  forward(planes, mask, n, priors, wdl);
}

void ConvNet::evaluate(const float* planes, const uint8_t* mask, int n, float* priors, float* wdl) const {
  if (n <= 0) return;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (avx2_) return run_avx2(planes, mask, n, priors, wdl);
#endif
  run_portable(planes, mask, n, priors, wdl);
}

}  // namespace cz::net
