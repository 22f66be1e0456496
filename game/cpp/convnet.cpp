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

CZ_INLINE void store8(float* p, const v8& v) {
  std::memcpy(p, &v, sizeof v);
}

CZ_INLINE v8 relu8(const v8& v) {
  const v8 zero = {0, 0, 0, 0, 0, 0, 0, 0};
  const v8i kept = (v8i)v & (v > zero);  // a vector compare gives all-ones lanes where true
  return (v8)kept;
}

int round_up(int n, int m) {
  return (n + m - 1) / m * m;
}

// Positions run through each layer four at a time: the weights a layer loads serve all four, and
// the Winograd domain's scratch (74 KB for 4 positions on 8x8 at 32 channels) stays in the L2
// cache (1, 2, 4 and 8 at a time were tried on the shipped network: 4 was the fastest).
constexpr int kChunk = 4;

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

// out = a w for `rows` rows of `a` (`a_s` apart, `n` columns) and w [n][cout] (cout a multiple of 8):
// blocks of rows that share each loaded row of weights, 12 accumulators where cout allows.
CZ_INLINE void matmul(const float* a, int a_s, int rows, int n, const float* w, int cout, float* out) {
  int r = 0;
  if (cout % 32 == 0 && rows % 4 != 0 && rows % 3 == 0) {
    for (; r + 3 <= rows; r += 3)
      matmul_rows<3, 4>(a + size_t(r) * a_s, a_s, n, w, cout, out + size_t(r) * cout);
    for (; r < rows; ++r) matmul_rows<1, 4>(a + size_t(r) * a_s, a_s, n, w, cout, out + size_t(r) * cout);
  } else if (cout % 16 == 0) {
    for (; r + 4 <= rows; r += 4)
      matmul_rows<4, 2>(a + size_t(r) * a_s, a_s, n, w, cout, out + size_t(r) * cout);
    for (; r < rows; ++r) matmul_rows<1, 2>(a + size_t(r) * a_s, a_s, n, w, cout, out + size_t(r) * cout);
  } else {
    for (; r + 4 <= rows; r += 4)
      matmul_rows<4, 1>(a + size_t(r) * a_s, a_s, n, w, cout, out + size_t(r) * cout);
    for (; r < rows; ++r) matmul_rows<1, 1>(a + size_t(r) * a_s, a_s, n, w, cout, out + size_t(r) * cout);
  }
}

// rows of `stride` floats: x = max(x + bias, 0).
CZ_INLINE void bias_relu(float* x, int rows, int stride, const float* bias) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < stride; c += 8) {
      float* at = x + size_t(r) * stride + c;
      store8(at, relu8(load8(at) + load8(bias + c)));
    }
}

// Winograd F(MxM, 3x3) (Lavin and Gray, 2016), M = 2 or 4, tiles of N = M + 2: U = G g G^T of a
// 3x3 kernel g, V = B^T d B of an N x N input tile d, and the M x M output tile A^T X A of
// X = sum over input channels of U * V (elementwise). Each Tile<M> applies B^T and A^T to a
// column of vectors, written out so that no product by 0 or 1 is computed.
template <int M>
struct Tile;

template <>
struct Tile<2> {
  static constexpr int N = 4;
  static constexpr float G[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
  // B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
  CZ_INLINE static void input(const v8* d, v8* t) {
    t[0] = d[0] - d[2];
    t[1] = d[1] + d[2];
    t[2] = d[2] - d[1];
    t[3] = d[1] - d[3];
  }
  // A^T = [1 1 1 0; 0 1 -1 -1]
  CZ_INLINE static void output(const v8* x, v8* y) {
    y[0] = x[0] + x[1] + x[2];
    y[1] = x[1] - x[2] - x[3];
  }
};

template <>
struct Tile<4> {
  static constexpr int N = 6;
  static constexpr float G[6][3] = {{0.25f, 0, 0},
                                    {-1 / 6.0f, -1 / 6.0f, -1 / 6.0f},
                                    {-1 / 6.0f, 1 / 6.0f, -1 / 6.0f},
                                    {1 / 24.0f, 1 / 12.0f, 1 / 6.0f},
                                    {1 / 24.0f, -1 / 12.0f, 1 / 6.0f},
                                    {0, 0, 1}};
  // B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
  CZ_INLINE static void input(const v8* d, v8* t) {
    const v8 a = d[4] - 4 * d[2], b = d[3] - 4 * d[1], c = d[4] - d[2], e = 2 * (d[3] - d[1]);
    t[0] = 4 * d[0] - 5 * d[2] + d[4];
    t[1] = a + b;
    t[2] = a - b;
    t[3] = c + e;
    t[4] = c - e;
    t[5] = 4 * d[1] - 5 * d[3] + d[5];
  }
  // A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
  CZ_INLINE static void output(const v8* x, v8* y) {
    const v8 p = x[1] + x[2], q = x[1] - x[2], r = x[3] + x[4], s = x[3] - x[4];
    y[0] = x[0] + p + r;
    y[1] = q + 2 * s;
    y[2] = p + 4 * r;
    y[3] = q + 8 * s + x[5];
  }
};

// A 3x3 convolution over the S x S interior (S a multiple of M) of `count` positions' grids (one
// after another) in the Winograd domain: the input grids (`cin` channels, stride `in_s`, a
// multiple of 8) tile by tile into `v` ([N*N][tile][in_s], the tiles of every position), the N*N
// products into `x` ([N*N][tile][s]), one matrix product each whose weights serve every tile, then
// the output tiles into `out` (stride `s`, a multiple of 16) with the bias, the residual (nullptr:
// none; grids of stride `s`) and the ReLU.
template <int M>
CZ_INLINE void winograd_conv(const float* u, const float* bias, int cin, int in_s, int s, const float* in,
                             float* out, const float* residual, int S, int count, float* v, float* x) {
  constexpr int N = Tile<M>::N;
  const int P = S + 2, side = S / M, per = side * side, tiles = per * count;
  const size_t in_plane = size_t(tiles) * in_s;  // one of the N*N transformed input planes
  const size_t plane = size_t(tiles) * s;        // one of the N*N product planes
  for (int t = 0; t < tiles; ++t) {
    const int ty = t % per / side, tx = t % side;
    const float* grid = in + size_t(t / per) * P * P * in_s;
    for (int c = 0; c < cin; c += 8) {
      v8 e[N][N];  // B^T d, row-major
      for (int q = 0; q < N; ++q) {
        v8 col[N], out_col[N];
        for (int r = 0; r < N; ++r) col[r] = load8(grid + ((M * ty + r) * P + (M * tx + q)) * in_s + c);
        Tile<M>::input(col, out_col);
        for (int r = 0; r < N; ++r) e[r][q] = out_col[r];
      }
      for (int r = 0; r < N; ++r) {
        v8 row[N];
        Tile<M>::input(e[r], row);  // (B^T d) B, row r
        for (int q = 0; q < N; ++q) store8(v + size_t(N * r + q) * in_plane + size_t(t) * in_s + c, row[q]);
      }
    }
  }
  for (int xi = 0; xi < N * N; ++xi) {  // X = V U, a (tiles x cin) by (cin x s) product per xi
    const float* vp = v + size_t(xi) * in_plane;
    const float* up = u + size_t(xi) * cin * s;
    float* xp = x + size_t(xi) * plane;
    matmul(vp, in_s, tiles, cin, up, s, xp);
  }
  for (int t = 0; t < tiles; ++t) {
    const int ty = t % per / side, tx = t % side;
    const size_t grid = size_t(t / per) * P * P * s;
    for (int c = 0; c < s; c += 8) {
      v8 h[N][M];  // A^T X, column q in h[q]
      for (int q = 0; q < N; ++q) {
        v8 col[N];
        for (int r = 0; r < N; ++r) col[r] = load8(x + size_t(N * r + q) * plane + size_t(t) * s + c);
        Tile<M>::output(col, h[q]);
      }
      const v8 b = load8(bias + c);
      for (int dy = 0; dy < M; ++dy) {
        v8 row[N], y[M];
        for (int q = 0; q < N; ++q) row[q] = h[q][dy];
        Tile<M>::output(row, y);  // (A^T X) A, row dy
        for (int dx = 0; dx < M; ++dx) {
          const size_t at = grid + size_t((M * ty + dy + 1) * P + (M * tx + dx + 1)) * s + c;
          v8 o = y[dx] + b;
          if (residual) o += load8(residual + at);
          store8(out + at, relu8(o));
        }
      }
    }
  }
}

// The N*N planes of U = G g G^T for every (out, in) kernel g of a torch [out][in][3][3] weight, as
// [N*N][in][out_stride] (computed in double, rounded once).
template <int M>
std::vector<float> winograd_kernels(const std::vector<float>& weight, int cin, int cout, int out_stride) {
  constexpr int N = Tile<M>::N;
  const auto& G = Tile<M>::G;
  std::vector<float> u(size_t(N) * N * cin * out_stride, 0.0f);
  for (int o = 0; o < cout; ++o)
    for (int i = 0; i < cin; ++i) {
      const float* g = &weight[(size_t(o) * cin + i) * 9];
      double gg[N][3];  // G g
      for (int r = 0; r < N; ++r)
        for (int q = 0; q < 3; ++q)
          gg[r][q] = double(G[r][0]) * g[q] + double(G[r][1]) * g[3 + q] + double(G[r][2]) * g[6 + q];
      for (int r = 0; r < N; ++r)
        for (int q = 0; q < N; ++q)
          u[(size_t(N * r + q) * cin + i) * out_stride + o] =
              float(gg[r][0] * G[q][0] + gg[r][1] * G[q][1] + gg[r][2] * G[q][2]);
    }
  return u;
}

// A 3x3 convolution with the Winograd tile the network was built for (ConvNet::tile_).
CZ_INLINE void conv3x3(int tile, const float* u, const float* bias, int cin, int in_s, int s, const float* in,
                       float* out, const float* residual, int S, int count, float* v, float* x) {
  if (tile == 4)
    winograd_conv<4>(u, bias, cin, in_s, s, in, out, residual, S, count, v, x);
  else
    winograd_conv<2>(u, bias, cin, in_s, s, in, out, residual, S, count, v, x);
}

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
  check(s.policy_channels >= 1 && s.policy_channels <= 512,
        "policy_channels " + std::to_string(s.policy_channels));
  check(s.value_channels >= 1 && s.value_channels <= 512,
        "value_channels " + std::to_string(s.value_channels));
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
    check(l.weight.size() == weights, where + " has " + std::to_string(l.weight.size()) +
                                          " weights, expected " + std::to_string(weights));
    check(l.bias.size() == biases,
          where + " has " + std::to_string(l.bias.size()) + " biases, expected " + std::to_string(biases));
    for (float v : l.weight)
      if (!std::isfinite(v)) check(false, where + " has a non-finite weight");
    for (float v : l.bias)
      if (!std::isfinite(v)) check(false, where + " has a non-finite bias");
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
  // A 3x3 convolution in the Winograd domain of the board's tile: F(4x4, 3x3) where the side is a
  // multiple of 4 (8x8: 36 products per 16 outputs), else F(2x2, 3x3) (6x6: 16 per 4).
  tile_ = s.size % 4 == 0 ? 4 : 2;
  auto winograd = [this](const Layer& l, int cin, int cout, int out_stride) {
    Winograd c;
    c.u = tile_ == 4 ? winograd_kernels<4>(l.weight, cin, cout, out_stride)
                     : winograd_kernels<2>(l.weight, cin, cout, out_stride);
    c.b.assign(out_stride, 0.0f);
    std::copy(l.bias.begin(), l.bias.end(), c.b.begin());
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
  policy1_ = repack(take("policy 1x1", size_t(s.policy_channels) * C, s.policy_channels), C,
                    s.policy_channels, policy_stride_);
  const Layer& p2 = take("policy output", size_t(4) * s.policy_channels, 4);
  policy2_w_.assign(size_t(s.policy_channels) * 8, 0.0f);  // [P][8], directions 0-3 used
  for (int d = 0; d < 4; ++d)
    for (int h = 0; h < s.policy_channels; ++h)
      policy2_w_[size_t(h) * 8 + d] = p2.weight[size_t(d) * s.policy_channels + h];
  policy2_b_.assign(8, 0.0f);
  std::copy(p2.bias.begin(), p2.bias.end(), policy2_b_.begin());
  value1_ = repack(take("value 1x1", size_t(s.value_channels) * C, s.value_channels), C, s.value_channels,
                   value_stride_);
  const int features = s.value_channels * cells;
  const Layer& f1 = take("value dense", size_t(s.value_hidden) * features, s.value_hidden);
  fc1_w_.assign(size_t(features) * hidden_stride_, 0.0f);
  fc1_b_.assign(hidden_stride_, 0.0f);
  for (int h = 0; h < s.value_hidden; ++h) {
    fc1_b_[h] = f1.bias[h];
    for (int f = 0; f < features; ++f)
      fc1_w_[size_t(f) * hidden_stride_ + h] = f1.weight[size_t(h) * features + f];
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
    policy_logit_.push_back(slot[cell] * 8 + flat / cells);
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
[[gnu::always_inline]] inline void ConvNet::forward(const float* planes, const uint8_t* mask, int n,
                                                    float* priors, float* wdl) const {
  const Shape& s = shape_;
  const int S = s.size, P = S + 2, cells = S * S, C = s.channels, squares = int(playable_.size());
  const int features = s.value_channels * cells;
  const int chunk = std::min(n, kChunk);
  const size_t grid = size_t(P) * P;
  // Padded grids ([cell][channel], zero border), `chunk` positions' one after another: the input,
  // three for the tower (only interiors are written: the borders stay zero), the value head's.
  std::vector<float> input(chunk * grid * in_stride_, 0.0f), value(chunk * grid * value_stride_, 0.0f);
  std::vector<float> tower(3 * chunk * grid * stride_, 0.0f);
  // the Winograd domain's scratch: transformed inputs and products, (tile + 2)^2 planes of them
  const size_t domain = size_t(tile_ + 2) * (tile_ + 2) * (S / tile_) * (S / tile_) * chunk;
  std::vector<float> wv(domain * std::max(stride_, in_stride_)), wm(domain * stride_);
  std::vector<float> flat(size_t(chunk) * features), hidden(size_t(chunk) * hidden_stride_);
  std::vector<float> gathered(size_t(chunk) * squares * stride_);  // the tower at the playable cells
  std::vector<float> policy_hidden(size_t(chunk) * squares * policy_stride_),
      logits(size_t(chunk) * squares * 8);
  for (int first = 0; first < n; first += chunk) {
    const int count = std::min(chunk, n - first);
    for (int p = 0; p < count; ++p) {
      const float* pl = planes + size_t(first + p) * s.in_planes * cells;
      float* in = input.data() + p * grid * in_stride_;
      for (int c = 0; c < s.in_planes; ++c)
        for (int y = 0; y < S; ++y)
          for (int x = 0; x < S; ++x)
            in[((y + 1) * P + (x + 1)) * in_stride_ + c] = pl[(size_t(c) * S + y) * S + x];
    }
    float* x_ = tower.data();  // the tower's output so far
    float* y_ = x_ + chunk * grid * stride_;
    float* z_ = y_ + chunk * grid * stride_;
    conv3x3(tile_, stem_.u.data(), stem_.b.data(), s.in_planes, in_stride_, stride_, input.data(), x_,
            nullptr, S, count, wv.data(), wm.data());
    for (int b = 0; b < s.blocks; ++b) {
      const Winograd& c1 = tower_[2 * b];
      const Winograd& c2 = tower_[2 * b + 1];
      conv3x3(tile_, c1.u.data(), c1.b.data(), C, stride_, stride_, x_, y_, nullptr, S, count, wv.data(),
              wm.data());
      conv3x3(tile_, c2.u.data(), c2.b.data(), C, stride_, stride_, y_, z_, x_, S, count, wv.data(),
              wm.data());
      std::swap(x_, z_);
    }
    // value head: the 1x1 conv as one matrix product over every cell of the grids (the borders'
    // outputs are never read), its grid read in torch's (V, S, S) order, two dense layers
    const int cells_in = int(count * grid);
    matmul(x_, stride_, cells_in, C, value1_.w.data(), value_stride_, value.data());
    bias_relu(value.data(), cells_in, value_stride_, value1_.b.data());
    for (int p = 0; p < count; ++p) {
      const float* vg = value.data() + p * grid * value_stride_;
      for (int v = 0; v < s.value_channels; ++v)
        for (int y = 0; y < S; ++y)
          for (int x = 0; x < S; ++x)
            flat[size_t(p) * features + (size_t(v) * S + y) * S + x] =
                vg[((y + 1) * P + (x + 1)) * value_stride_ + v];
    }
    matmul(flat.data(), features, count, features, fc1_w_.data(), hidden_stride_, hidden.data());
    bias_relu(hidden.data(), count, hidden_stride_, fc1_b_.data());
    for (int p = 0; p < count; ++p) {
      const float* h = hidden.data() + size_t(p) * hidden_stride_;
      float z[3];
      for (int o = 0; o < 3; ++o) {
        float sum = fc2_b_[o];
        for (int k = 0; k < s.value_hidden; ++k) sum += fc2_w_[size_t(o) * s.value_hidden + k] * h[k];
        z[o] = sum;
      }
      const float zmax = std::max({z[0], z[1], z[2]});
      float e[3], total = 0.0f;
      for (int o = 0; o < 3; ++o) total += e[o] = std::exp(z[o] - zmax);
      for (int o = 0; o < 3; ++o) wdl[size_t(first + p) * 3 + o] = e[o] / total;
    }
    // policy head at the playable cells: 1x1 conv C -> P (ReLU), 1x1 conv P -> 4 (8 wide, 4 used)
    for (int p = 0; p < count; ++p)
      for (int k = 0; k < squares; ++k) {
        const float* cell =
            x_ + p * grid * stride_ + ((playable_[k] / S + 1) * P + (playable_[k] % S + 1)) * stride_;
        std::copy(cell, cell + stride_, gathered.begin() + (size_t(p) * squares + k) * stride_);
      }
    const int rows = count * squares;
    matmul(gathered.data(), stride_, rows, C, policy1_.w.data(), policy_stride_, policy_hidden.data());
    bias_relu(policy_hidden.data(), rows, policy_stride_, policy1_.b.data());
    matmul(policy_hidden.data(), policy_stride_, rows, s.policy_channels, policy2_w_.data(), 8,
           logits.data());
    for (int p = 0; p < count; ++p) {
      const float* l = logits.data() + size_t(p) * squares * 8;
      const uint8_t* m = mask + size_t(first + p) * s.num_actions;
      float* out = priors + size_t(first + p) * s.num_actions;
      float lmax = -INFINITY;
      for (int a = 0; a < s.num_actions; ++a)
        if (m[a]) lmax = std::max(lmax, l[policy_logit_[a]] + policy2_b_[policy_logit_[a] % 8]);
      float psum = 0.0f;
      for (int a = 0; a < s.num_actions; ++a) {
        out[a] = m[a] ? std::exp(l[policy_logit_[a]] + policy2_b_[policy_logit_[a] % 8] - lmax) : 0.0f;
        psum += out[a];
      }
      if (psum > 0.0f)  // no legal action: all zeros
        for (int a = 0; a < s.num_actions; ++a) out[a] /= psum;
    }
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
