#include "nneval.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace cz::nn {

namespace {

constexpr int kInt8Max = 127;
constexpr int kInt16Max = 32767;

void check_length(const char* name, size_t got, size_t want) {
  if (got != want)
    throw std::invalid_argument(std::string("learned evaluation: ") + name + " has " + std::to_string(got) +
                                " values, expected " + std::to_string(want));
}

template <typename T>
void check_int8(const char* name, const std::vector<T>& v) {
  for (T x : v)
    if (x < -kInt8Max - 1 || x > kInt8Max)
      throw std::invalid_argument(std::string("learned evaluation: ") + name + " holds " + std::to_string(x) +
                                  ", outside int8");
}

// Adds (sign +1) or subtracts (sign -1) the weight column of `feature` to one accumulator.
inline void apply_column(const Weights& w, int16_t* acc, int feature_index, int sign) {
  const int16_t* col = &w.ft_w[size_t(feature_index) * w.hidden];
  if (sign > 0)
    for (int j = 0; j < w.hidden; ++j) acc[j] = int16_t(acc[j] + col[j]);
  else
    for (int j = 0; j < w.hidden; ++j) acc[j] = int16_t(acc[j] - col[j]);
}

// Men and kings of each colour: the four bitboards the features are read from.
struct Planes {
  Bitboard b[2][2];  // [colour][king]
  explicit Planes(const Board& board) {
    for (int c = 0; c < 2; ++c) {
      b[c][0] = board.pieces[c] & ~board.kings;
      b[c][1] = board.pieces[c] & board.kings;
    }
  }
};

inline int16_t clipped(int x) {
  return int16_t(std::clamp(x, 0, kActivationOne));
}

}  // namespace

void check_weights(const Weights& w) {
  if (w.size != 6 && w.size != 8)
    throw std::invalid_argument("learned evaluation: board size must be 6 or 8, got " +
                                std::to_string(w.size));
  if (w.squares != w.size * w.size / 2 || w.inputs != kFeatureKinds * w.squares)
    throw std::invalid_argument("learned evaluation: " + std::to_string(w.inputs) + " inputs on " +
                                std::to_string(w.squares) + " squares do not fit a board of side " +
                                std::to_string(w.size));
  auto check_width = [](const char* name, int n, int most) {
    if (n < 1 || n > most)
      throw std::invalid_argument(std::string("learned evaluation: ") + name + " width " + std::to_string(n) +
                                  " is outside 1.." + std::to_string(most));
  };
  check_width("hidden", w.hidden, kMaxHidden);
  check_width("dense1", w.dense1, kMaxDense);
  check_width("dense2", w.dense2, kMaxDense);
  if (w.output_scale < 1 || w.output_scale > kMaxOutputScale)
    throw std::invalid_argument("learned evaluation: output scale " + std::to_string(w.output_scale) +
                                " is outside 1.." + std::to_string(kMaxOutputScale));
  check_length("ft_w", w.ft_w.size(), size_t(w.inputs) * w.hidden);
  check_length("ft_b", w.ft_b.size(), size_t(w.hidden));
  check_length("l1_w", w.l1_w.size(), size_t(w.dense1) * 2 * w.hidden);
  check_length("l1_b", w.l1_b.size(), size_t(w.dense1));
  check_length("l2_w", w.l2_w.size(), size_t(w.dense2) * w.dense1);
  check_length("l2_b", w.l2_b.size(), size_t(w.dense2));
  check_length("out_w", w.out_w.size(), size_t(w.dense2));
  check_int8("l1_w", w.l1_w);
  check_int8("l2_w", w.l2_w);
  // A board holds at most twice a side's starting men; the accumulator of any position must fit
  // int16 whatever pieces stand where, so each unit's bias plus that many of its largest column
  // entries must.
  const int most_pieces = 2 * (w.size / 2) * (w.size / 2 - 1);
  for (int j = 0; j < w.hidden; ++j) {
    int largest = 0;
    for (int i = 0; i < w.inputs; ++i)
      largest = std::max(largest, std::abs(int(w.ft_w[size_t(i) * w.hidden + j])));
    const long bound = std::abs(long(w.ft_b[j])) + long(most_pieces) * largest;
    if (bound > kInt16Max)
      throw std::invalid_argument("learned evaluation: first-layer unit " + std::to_string(j) +
                                  " could reach " + std::to_string(bound) + ", beyond the int16 accumulator");
  }
  // Dense sums stay far inside int32: 2 * 256 inputs * 127 * 128 plus a bias, checked here.
  auto check_bias = [](const char* name, const std::vector<int32_t>& b) {
    for (int32_t x : b)
      if (std::abs(long(x)) > (1L << 24))
        throw std::invalid_argument(std::string("learned evaluation: ") + name + " bias " +
                                    std::to_string(x) + " beyond 2^24");
  };
  check_bias("l1_b", w.l1_b);
  check_bias("l2_b", w.l2_b);
  check_bias("out_b", std::vector<int32_t>{w.out_b});
  if (w.policy_outputs != 0) {
    if (w.policy_outputs != w.squares * 4)
      throw std::invalid_argument("learned evaluation: the move-ordering head has " +
                                  std::to_string(w.policy_outputs) + " outputs, expected " +
                                  std::to_string(w.squares * 4) + " (4 per square)");
    check_length("pol_w", w.pol_w.size(), size_t(w.policy_outputs) * 2 * w.hidden);
    check_length("pol_b", w.pol_b.size(), size_t(w.policy_outputs));
    check_int8("pol_w", w.pol_w);
    check_bias("pol_b", w.pol_b);
  }
}

namespace {

int round_up(int n, int step) {
  return (n + step - 1) / step * step;
}

// FNV-1a over the values of some arrays and numbers (any change to a weight changes it).
struct Fingerprint {
  static constexpr uint64_t kOffset = 1469598103934665603ULL, kPrime = 1099511628211ULL;
  uint64_t h = kOffset;
  void add(int64_t x) {
    for (int i = 0; i < 8; ++i, x >>= 8) h = (h ^ uint64_t(x & 0xFF)) * kPrime;
  }
  template <typename T>
  void add(const std::vector<T>& v) {
    add(int64_t(v.size()));
    for (T x : v) add(int64_t(x));
  }
};

}  // namespace

void prepare(Weights& w) {
  check_weights(w);
  Fingerprint f;
  for (int x : {w.size, w.hidden, w.dense1, w.dense2, w.output_scale, int(w.out_b)}) f.add(x);
  f.add(w.ft_w), f.add(w.ft_b), f.add(w.l1_w), f.add(w.l1_b), f.add(w.l2_w), f.add(w.l2_b), f.add(w.out_w);
  w.fingerprint = f.h;
  const int in1 = 2 * w.hidden;
  w.dense1_rows = round_up(w.dense1, kRowBlock);
  w.dense2_rows = round_up(w.dense2, kRowBlock);
  w.dense2_inputs = round_up(w.dense1_rows, kByteLanes);
  w.l1_w8.assign(size_t(w.dense1_rows) * in1, 0);
  w.l1_b8.assign(size_t(w.dense1_rows), 0);
  for (int o = 0; o < w.dense1; ++o) {
    for (int i = 0; i < in1; ++i) w.l1_w8[size_t(o) * in1 + i] = int8_t(w.l1_w[size_t(o) * in1 + i]);
    w.l1_b8[o] = w.l1_b[o];
  }
  w.l2_w8.assign(size_t(w.dense2_rows) * w.dense2_inputs, 0);
  w.l2_b8.assign(size_t(w.dense2_rows), 0);
  for (int o = 0; o < w.dense2; ++o) {
    for (int i = 0; i < w.dense1; ++i)
      w.l2_w8[size_t(o) * w.dense2_inputs + i] = int8_t(w.l2_w[size_t(o) * w.dense1 + i]);
    w.l2_b8[o] = w.l2_b[o];
  }
  w.out_w8.assign(size_t(round_up(w.dense2_rows, kWordLanes)), 0);
  std::copy(w.out_w.begin(), w.out_w.end(), w.out_w8.begin());
  w.pol_w8.assign(w.pol_w.begin(), w.pol_w.end());
  w.kernels = avx2_unusable(w).empty() ? Kernels::Avx2 : Kernels::Scalar;
}

std::string avx2_unusable(const Weights& w) {
  if (!detail::cpu_has_avx2()) return "this build or CPU has no AVX2";
  if (w.l1_w8.empty()) return "the weights were not prepared for the AVX2 kernels";
  if (w.hidden % kByteLanes != 0)
    return "the AVX2 kernels need an accumulator width that is a multiple of " + std::to_string(kByteLanes) +
           ", this one is " + std::to_string(w.hidden);
  return "";
}

void set_kernels(Weights& w, Kernels k) {
  if (k == Kernels::Avx2) {
    const std::string why = avx2_unusable(w);
    if (!why.empty()) throw std::invalid_argument("learned evaluation: " + why);
  }
  w.kernels = k;
}

void refresh(const Weights& w, const Board& b, Accumulator& out) {
  const Planes planes(b);
  for (int view = 0; view < 2; ++view) {
    int16_t* acc = out.v[view].data();
    std::copy(w.ft_b.begin(), w.ft_b.end(), acc);
    for (int c = 0; c < 2; ++c)
      for (int king = 0; king < 2; ++king)
        for (Bitboard bb = planes.b[c][king]; bb;)
          apply_column(w, acc, feature(w, view, c, king, pop_lsb(bb)), +1);
  }
}

namespace {

// The features a move removes and adds, in both views: feature(w, view, colour, king, square)
// written out, Black's view (0) reading colour c as kind 2c + king, White's swapping the colours
// and turning the board.
struct FeatureOf {
  int n;
  void operator()(int colour, bool king, int sq, int* out) const {
    out[0] = (2 * colour + king) * n + sq;
    out[1] = (2 * (colour ^ 1) + king) * n + n - 1 - sq;
  }
};

// The changes from `parent_board` to `child_board`, one move later: the mover's piece leaves its
// square (as a man or a king) and arrives (as a king when it was one or was crowned), unless a
// king's capture loop ended where it began; each captured piece leaves.
void changes(const Weights& w, const Board& parent_board, const Board& child_board, detail::Changes& out) {
  const FeatureOf feature_of{w.squares};
  const int us = index(parent_board.side), them = us ^ 1;
  int removed[2], added[2];
  out.n_removed = out.n_added = 0;
  auto remove = [&](int colour, bool king, int sq) {
    feature_of(colour, king, sq, removed);
    out.removed[0][out.n_removed] = removed[0];
    out.removed[1][out.n_removed++] = removed[1];
  };
  if (const Bitboard moved = parent_board.pieces[us] ^ child_board.pieces[us]) {
    const int from = lsb(moved & parent_board.pieces[us]), to = lsb(moved & child_board.pieces[us]);
    remove(us, parent_board.kings & bit(from), from);
    feature_of(us, child_board.kings & bit(to), to, added);
    out.added[0][0] = added[0];
    out.added[1][0] = added[1];
    out.n_added = 1;
  }
  for (Bitboard taken = parent_board.pieces[them] & ~child_board.pieces[them]; taken;) {
    const int sq = pop_lsb(taken);
    remove(them, parent_board.kings & bit(sq), sq);
  }
}

}  // namespace

void update(const Weights& w, const Accumulator& parent, const Board& parent_board, const Board& child_board,
            Accumulator& child) {
  detail::Changes c;
  changes(w, parent_board, child_board, c);
  if (w.kernels == Kernels::Avx2)
    detail::update_avx2(w, parent, c, child);
  else
    detail::update_scalar(w, parent, c, child);
}

int evaluate(const Weights& w, const Accumulator& a, Color side) {
  return w.kernels == Kernels::Avx2 ? detail::evaluate_avx2(w, a, side) : detail::evaluate_scalar(w, a, side);
}

void policy(const Weights& w, const Accumulator& a, Color side, const int* actions, int n, int32_t* out) {
  if (w.kernels == Kernels::Avx2)
    detail::policy_avx2(w, a, side, actions, n, out);
  else
    detail::policy_scalar(w, a, side, actions, n, out);
}

void detail::update_scalar(const Weights& w, const Accumulator& parent, const Changes& c,
                           Accumulator& child) {
  for (int view = 0; view < 2; ++view) {
    int16_t* acc = child.v[view].data();
    std::copy(parent.v[view].begin(), parent.v[view].begin() + w.hidden, acc);
    for (int i = 0; i < c.n_removed; ++i) apply_column(w, acc, c.removed[view][i], -1);
    for (int i = 0; i < c.n_added; ++i) apply_column(w, acc, c.added[view][i], +1);
  }
}

namespace {

// The dense layers' input: the mover's accumulator then the other side's, clipped to [0, 127].
void clipped_inputs(const Weights& w, const Accumulator& a, Color side, int16_t* x) {
  const int H = w.hidden, us = index(side);
  for (int j = 0; j < H; ++j) x[j] = clipped(a.v[us][j]);
  for (int j = 0; j < H; ++j) x[H + j] = clipped(a.v[us ^ 1][j]);
}

}  // namespace

void detail::policy_scalar(const Weights& w, const Accumulator& a, Color side, const int* actions, int n,
                           int32_t* out) {
  const int inputs = 2 * w.hidden;
  alignas(64) int16_t x[2 * kMaxHidden];
  clipped_inputs(w, a, side, x);
  for (int k = 0; k < n; ++k) {
    const int16_t* row = &w.pol_w[size_t(actions[k]) * inputs];
    int32_t s = w.pol_b[actions[k]];
    for (int i = 0; i < inputs; ++i) s += int32_t(x[i]) * int32_t(row[i]);
    out[k] = s;
  }
}

int detail::evaluate_scalar(const Weights& w, const Accumulator& a, Color side) {
  const int H = w.hidden;
  alignas(64) int16_t x[2 * kMaxHidden];
  clipped_inputs(w, a, side, x);
  alignas(64) int16_t h1[kMaxDense];
  for (int o = 0; o < w.dense1; ++o) {
    const int16_t* row = &w.l1_w[size_t(o) * 2 * H];
    int32_t s = 0;
    for (int i = 0; i < 2 * H; ++i) s += int32_t(x[i]) * int32_t(row[i]);
    h1[o] = clipped((s + w.l1_b[o]) >> kWeightShift);
  }
  alignas(64) int16_t h2[kMaxDense];
  for (int o = 0; o < w.dense2; ++o) {
    const int16_t* row = &w.l2_w[size_t(o) * w.dense1];
    int32_t s = 0;
    for (int i = 0; i < w.dense1; ++i) s += int32_t(h1[i]) * int32_t(row[i]);
    h2[o] = clipped((s + w.l2_b[o]) >> kWeightShift);
  }
  int32_t out = w.out_b;
  for (int i = 0; i < w.dense2; ++i) out += int32_t(h2[i]) * int32_t(w.out_w[i]);
  // out = logit * 127 * 64; integer division truncates towards zero (the reference does too).
  const int64_t score = int64_t(out) * w.output_scale / (int64_t(kActivationOne) << kWeightShift);
  return int(std::clamp<int64_t>(score, -kScoreLimit, kScoreLimit));
}

int evaluate_board(const Weights& w, const Board& b) {
  Accumulator a;
  refresh(w, b, a);
  return evaluate(w, a, b.side);
}

Tracker::Tracker(const Weights& w, const Board& root) : w_(w), accs_(1), boards_{root} {
  refresh(w_, root, accs_[0]);
}

void Tracker::push(const Board& child) {
  accs_.emplace_back();
  update(w_, accs_[accs_.size() - 2], boards_.back(), child, accs_.back());
  boards_.push_back(child);
}

void Tracker::pop() {
  if (boards_.size() <= 1) throw std::invalid_argument("learned evaluation tracker: nothing to take back");
  accs_.pop_back();
  boards_.pop_back();
}

}  // namespace cz::nn
