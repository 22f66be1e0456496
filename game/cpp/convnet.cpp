// The network's forward pass (convnet.h). Every hot function is always_inline, so it is compiled
// twice: inside ConvNet::run_avx2 (AVX2+FMA, chosen at run time on CPUs that have them) and inside
// ConvNet::run_portable (the package's baseline instructions).
#include "convnet.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"  // 32-byte vectors pass only between inlined functions
#endif

namespace cz::net {
namespace {

#define CZ_INLINE [[gnu::always_inline]] inline

typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

CZ_INLINE v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

CZ_INLINE void store8(float* p, const v8& v) { std::memcpy(p, &v, sizeof v); }

CZ_INLINE v8 relu8(const v8& v) {
  const v8 zero = {0, 0, 0, 0, 0, 0, 0, 0};
  const v8i kept = (v8i)v & (v > zero);  // a vector compare gives all-ones lanes where true
  return (v8)kept;
}

int round_up(int n, int m) { return (n + m - 1) / m * m; }

// A 1x1 convolution and its ReLU at X output cells of row `y` starting at column `x0` (interior
// coordinates), all output channels in chunks of 8 * K.
template <int X, int K>
CZ_INLINE void conv1x1_cells(int cin, int cout, const float* w, const float* bias, const float* in, int in_s,
                             float* out, int P, int y, int x0) {
  for (int co = 0; co < cout; co += 8 * K) {
    v8 acc[X][K];
    for (int k = 0; k < K; ++k) {
      const v8 b = load8(bias + co + 8 * k);
      for (int i = 0; i < X; ++i) acc[i][k] = b;
    }
    const float* ip = in + ((y + 1) * P + (x0 + 1)) * in_s;
    for (int ci = 0; ci < cin; ++ci) {
      v8 wk[K];
      for (int k = 0; k < K; ++k) wk[k] = load8(w + size_t(ci) * cout + co + 8 * k);
      for (int i = 0; i < X; ++i) {
        const float a = ip[i * in_s + ci];
        for (int k = 0; k < K; ++k) acc[i][k] += a * wk[k];
      }
    }
    for (int i = 0; i < X; ++i)
      for (int k = 0; k < K; ++k) store8(out + ((y + 1) * P + (x0 + 1 + i)) * cout + co + 8 * k, relu8(acc[i][k]));
  }
}

// A 1x1 convolution and its ReLU over the S x S interior; the output stride is `cout` (a multiple of 8).
CZ_INLINE void conv1x1(int cin, int cout, const float* w, const float* bias, const float* in, int in_s, float* out,
                       int S) {
  const int P = S + 2;
  for (int y = 0; y < S; ++y) {
    int x = 0;
    for (; x + 4 <= S; x += 4) conv1x1_cells<4, 1>(cin, cout, w, bias, in, in_s, out, P, y, x);
    for (; x < S; ++x) conv1x1_cells<1, 1>(cin, cout, w, bias, in, in_s, out, P, y, x);
  }
}

// X rows of a matrix product: out[i][0..cout) = sum_k a[i][k] * w[k][0..cout), rows of `a` `a_s`
// apart, `w` and `out` with stride cout (a multiple of 8 * K).
template <int X, int K>
CZ_INLINE void matmul_rows(const float* a, int a_s, int n, const float* w, int cout, float* out) {
  for (int co = 0; co < cout; co += 8 * K) {
    const v8 zero = {0, 0, 0, 0, 0, 0, 0, 0};
    v8 acc[X][K];
    for (int i = 0; i < X; ++i)
      for (int j = 0; j < K; ++j) acc[i][j] = zero;
    for (int k = 0; k < n; ++k) {
      v8 wk[K];
      for (int j = 0; j < K; ++j) wk[j] = load8(w + size_t(k) * cout + co + 8 * j);
      for (int i = 0; i < X; ++i) {
        const float x = a[size_t(i) * a_s + k];
        for (int j = 0; j < K; ++j) acc[i][j] += x * wk[j];
      }
    }
    for (int i = 0; i < X; ++i)
      for (int j = 0; j < K; ++j) store8(out + size_t(i) * cout + co + 8 * j, acc[i][j]);
  }
}

template <int K>
CZ_INLINE void dense_chunks(const float* in, int n_in, const float* w, int w_stride, float* acc_out, int h0) {
  v8 acc[K];
  for (int k = 0; k < K; ++k) acc[k] = load8(acc_out + h0 + 8 * k);
  for (int f = 0; f < n_in; ++f) {
    const float a = in[f];  // no skip of zeros: the branch's mispredictions cost more than it saves
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

// Winograd F(2x2, 3x3): U = G g G^T of a 3x3 kernel g, V = B^T d B of a 4x4 input tile d, and
// the 2x2 output tile A^T M A of M = sum over input channels of U * V (elementwise).
//   G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]     A^T = [1 1 1 0; 0 1 -1 -1]
// A 3x3 convolution: the input grid (`cin` channels, stride `in_s`, a multiple of 8) tile by
// tile into `v` ([16][tile][in_s]), the 16 products into `m` ([16][tile][s]), then the output
// tiles into `out` (stride `s`, a multiple of 16) with the bias, the residual (nullptr: none; a
// grid of stride `s`) and the ReLU.
CZ_INLINE void winograd_conv(const float* u, const float* bias, int cin, int in_s, int s, const float* in,
                             float* out, const float* residual, int S, float* v, float* m) {
  const int P = S + 2, side = S / 2, tiles = side * side;
  const size_t in_plane = size_t(tiles) * in_s;  // one of the 16 transformed input planes
  const size_t plane = size_t(tiles) * s;        // one of the 16 product planes
  for (int t = 0; t < tiles; ++t) {
    const int ty = t / side, tx = t % side;
    for (int c = 0; c < cin; c += 8) {
      v8 d[4][4];
      for (int r = 0; r < 4; ++r)
        for (int q = 0; q < 4; ++q) d[r][q] = load8(in + ((2 * ty + r) * P + (2 * tx + q)) * in_s + c);
      v8 e[4][4];  // B^T d
      for (int q = 0; q < 4; ++q) {
        e[0][q] = d[0][q] - d[2][q];
        e[1][q] = d[1][q] + d[2][q];
        e[2][q] = d[2][q] - d[1][q];
        e[3][q] = d[1][q] - d[3][q];
      }
      for (int r = 0; r < 4; ++r) {  // (B^T d) B
        float* vp = v + size_t(4 * r) * in_plane + size_t(t) * in_s + c;
        store8(vp, e[r][0] - e[r][2]);
        store8(vp + in_plane, e[r][1] + e[r][2]);
        store8(vp + 2 * in_plane, e[r][2] - e[r][1]);
        store8(vp + 3 * in_plane, e[r][1] - e[r][3]);
      }
    }
  }
  for (int xi = 0; xi < 16; ++xi) {  // M = V U, a (tiles x cin) by (cin x s) product per xi
    const float* vp = v + size_t(xi) * in_plane;
    const float* up = u + size_t(xi) * cin * s;
    float* mp = m + size_t(xi) * plane;
    int t = 0;
    if (s % 32 == 0) {  // 12 accumulators: 3 tiles x 32 channels
      for (; t + 3 <= tiles; t += 3) matmul_rows<3, 4>(vp + size_t(t) * in_s, in_s, cin, up, s, mp + size_t(t) * s);
      for (; t < tiles; ++t) matmul_rows<1, 4>(vp + size_t(t) * in_s, in_s, cin, up, s, mp + size_t(t) * s);
    } else {  // 8: 4 tiles x 16 channels
      for (; t + 4 <= tiles; t += 4) matmul_rows<4, 2>(vp + size_t(t) * in_s, in_s, cin, up, s, mp + size_t(t) * s);
      for (; t < tiles; ++t) matmul_rows<1, 2>(vp + size_t(t) * in_s, in_s, cin, up, s, mp + size_t(t) * s);
    }
  }
  for (int t = 0; t < tiles; ++t) {
    const int ty = t / side, tx = t % side;
    for (int c = 0; c < s; c += 8) {
      v8 q[4][4];
      for (int xi = 0; xi < 16; ++xi) q[xi / 4][xi % 4] = load8(m + size_t(xi) * plane + size_t(t) * s + c);
      v8 h[2][4];  // A^T M
      for (int j = 0; j < 4; ++j) {
        h[0][j] = q[0][j] + q[1][j] + q[2][j];
        h[1][j] = q[1][j] - q[2][j] - q[3][j];
      }
      const v8 b = load8(bias + c);
      for (int dy = 0; dy < 2; ++dy) {
        const v8 y2[2] = {h[dy][0] + h[dy][1] + h[dy][2] + b, h[dy][1] - h[dy][2] - h[dy][3] + b};
        for (int dx = 0; dx < 2; ++dx) {
          const size_t at = size_t((2 * ty + dy + 1) * P + (2 * tx + dx + 1)) * s + c;
          v8 y = y2[dx];
          if (residual) y += load8(residual + at);
          store8(out + at, relu8(y));
        }
      }
    }
  }
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
  // a 1x1 convolution: torch [out][in] -> [in][out_stride]
  auto repack = [](const Layer& l, int cin, int cout, int out_stride) {
    Conv c;
    c.w.assign(size_t(cin) * out_stride, 0.0f);
    c.b.assign(out_stride, 0.0f);
    for (int o = 0; o < cout; ++o) {
      c.b[o] = l.bias[o];
      for (int i = 0; i < cin; ++i) c.w[size_t(i) * out_stride + o] = l.weight[size_t(o) * cin + i];
    }
    return c;
  };
  // torch [out][in][3][3] -> [16][in][out_stride], each kernel g as G g G^T (winograd_conv)
  auto winograd = [](const Layer& l, int cin, int cout, int out_stride) {
    static constexpr float G[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
    Winograd c;
    c.u.assign(size_t(16) * cin * out_stride, 0.0f);
    c.b.assign(out_stride, 0.0f);
    for (int o = 0; o < cout; ++o) {
      c.b[o] = l.bias[o];
      for (int i = 0; i < cin; ++i) {
        const float* g = &l.weight[(size_t(o) * cin + i) * 9];
        float gg[4][3];  // G g
        for (int r = 0; r < 4; ++r)
          for (int q = 0; q < 3; ++q) gg[r][q] = G[r][0] * g[q] + G[r][1] * g[3 + q] + G[r][2] * g[6 + q];
        for (int r = 0; r < 4; ++r)
          for (int q = 0; q < 4; ++q)
            c.u[(size_t(4 * r + q) * cin + i) * out_stride + o] =
                gg[r][0] * G[q][0] + gg[r][1] * G[q][1] + gg[r][2] * G[q][2];
      }
    }
    return c;
  };
  const int C = s.channels;
  stride_ = round_up(C, 16);
  policy_stride_ = round_up(s.policy_channels, 8);
  value_stride_ = round_up(s.value_channels, 8);
  hidden_stride_ = round_up(s.value_hidden, 8);
  in_stride_ = round_up(s.in_planes, 8);
  stem_ = winograd(take("stem", size_t(C) * s.in_planes * 9, C), s.in_planes, C, stride_);
  for (int b = 0; b < 2 * s.blocks; ++b)
    tower_.push_back(winograd(take("tower conv", size_t(C) * C * 9, C), C, C, stride_));
  policy1_ = repack(take("policy 1x1", size_t(s.policy_channels) * C, s.policy_channels), C, s.policy_channels,
                    policy_stride_);
  const Layer& p2 = take("policy output", size_t(4) * s.policy_channels, 4);
  policy2_w_ = p2.weight;
  policy2_b_ = p2.bias;
  value1_ = repack(take("value 1x1", size_t(s.value_channels) * C, s.value_channels), C, s.value_channels,
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
  std::vector<float> input(size_t(P) * P * in_stride_, 0.0f), value(size_t(P) * P * value_stride_, 0.0f);
  std::vector<float> grids(3 * size_t(P) * P * stride_, 0.0f);
  const int tiles = (S / 2) * (S / 2);  // the Winograd domain's scratch: inputs and products
  std::vector<float> wv(16 * size_t(tiles) * std::max(stride_, in_stride_)), wm(16 * size_t(tiles) * stride_);
  std::vector<float> features(size_t(s.value_channels) * cells);
  std::vector<float> hidden(hidden_stride_);
  std::vector<float> policy_hidden(policy_stride_);
  std::vector<float> logits(playable_.size() * 4);
  for (int p = 0; p < n; ++p) {
    const float* pl = planes + size_t(p) * s.in_planes * cells;
    for (int c = 0; c < s.in_planes; ++c)
      for (int y = 0; y < S; ++y)
        for (int x = 0; x < S; ++x)
          input[((y + 1) * P + (x + 1)) * in_stride_ + c] = pl[(size_t(c) * S + y) * S + x];
    float* x_ = grids.data();  // the tower's output so far
    float* y_ = x_ + size_t(P) * P * stride_;
    float* z_ = y_ + size_t(P) * P * stride_;
    winograd_conv(stem_.u.data(), stem_.b.data(), s.in_planes, in_stride_, stride_, input.data(), x_, nullptr, S,
                  wv.data(), wm.data());
    for (int b = 0; b < s.blocks; ++b) {
      const Winograd& c1 = tower_[2 * b];
      const Winograd& c2 = tower_[2 * b + 1];
      winograd_conv(c1.u.data(), c1.b.data(), C, stride_, stride_, x_, y_, nullptr, S, wv.data(), wm.data());
      winograd_conv(c2.u.data(), c2.b.data(), C, stride_, stride_, y_, z_, x_, S, wv.data(), wm.data());
      std::swap(x_, z_);
    }
    // value head: 1x1 conv, its grid read in torch's (V, S, S) order, two dense layers
    conv1x1(C, value_stride_, value1_.w.data(), value1_.b.data(), x_, stride_, value.data(), S);
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
