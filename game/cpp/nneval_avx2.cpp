// The learned evaluation's AVX2 kernels (nneval.h). This file is compiled for the build's baseline
// CPU like the rest of the core: only the functions marked CZ_TARGET_AVX2 use AVX2 instructions, and
// nneval.cpp calls them only after cpu_has_avx2() said the CPU runs them. Without an x86-64
// compiler that supports the target attribute the kernels are absent and cpu_has_avx2() is false.
#include <algorithm>

#include "nneval.h"

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define CZ_NNEVAL_AVX2 1
#include <immintrin.h>
#endif

namespace cz::nn::detail {

#ifdef CZ_NNEVAL_AVX2

#define CZ_TARGET_AVX2 __attribute__((target("avx2")))

namespace {

// Four horizontal sums at once: the int32 lanes of a, b, c and d summed, as [a, b, c, d].
CZ_TARGET_AVX2 inline __m128i sum4(__m256i a, __m256i b, __m256i c, __m256i d) {
  a = _mm256_hadd_epi32(a, b);
  c = _mm256_hadd_epi32(c, d);
  a = _mm256_hadd_epi32(a, c);
  return _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
}

// Eight int32 sums of four products each: chunk k of x times chunk k of the row at w.
CZ_TARGET_AVX2 inline __m256i products(__m256i xv, const int8_t* w, int k, __m256i ones) {
  const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w) + k);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(xv, wv), ones);
}

// The int32 sums of x with kRowBlock rows of n int8 weights each (row `stride` bytes apart), as
// [row 0, row 1, row 2, row 3]. kChunks is n / kByteLanes when known when compiled (the loops
// unroll), 0 for n at run time. Products are paired into int16 by pmaddubsw (exact: |pair| <=
// 2 * 127 * 128 = 32512) and widened to int32 by pmaddwd with ones.
template <int kChunks>
CZ_TARGET_AVX2 inline __m128i dot_rows(const uint8_t* x, const int8_t* w, size_t stride, int n) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  const int chunks = kChunks > 0 ? kChunks : n / kByteLanes;
  for (int k = 0; k < chunks; ++k) {
    const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(x) + k);
    s0 = _mm256_add_epi32(s0, products(xv, w, k, ones));
    s1 = _mm256_add_epi32(s1, products(xv, w + stride, k, ones));
    s2 = _mm256_add_epi32(s2, products(xv, w + 2 * stride, k, ones));
    s3 = _mm256_add_epi32(s3, products(xv, w + 3 * stride, k, ones));
  }
  return sum4(s0, s1, s2, s3);
}

// One dense layer: out[o] = clip((bias[o] + x . row_o) >> kWeightShift) for `rows` rows (a
// multiple of kRowBlock) of n int8 weights, as int32 written kRowBlock at a time. (Whole-register
// stores read back whole: narrower stores read back wider would stall store forwarding.)
// kRows is `rows` when known when compiled, else 0.
template <int kChunks, int kRows = 0>
CZ_TARGET_AVX2 inline void dense(const uint8_t* x, const int8_t* w, const int32_t* bias, int rows, int n,
                                 int32_t* out) {
  const __m128i zero = _mm_setzero_si128(), top = _mm_set1_epi32(kActivationOne);
  if (kRows > 0) rows = kRows;
  for (int o = 0; o < rows; o += kRowBlock) {
    __m128i v = _mm_add_epi32(dot_rows<kChunks>(x, w + size_t(o) * n, size_t(n), n),
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(bias + o)));
    v = _mm_min_epi32(_mm_max_epi32(_mm_srai_epi32(v, kWeightShift), zero), top);
    _mm_store_si128(reinterpret_cast<__m128i*>(out + o), v);
  }
}

// Activations h[0..rows) (int32, 0..127) as the bytes of the next layer's input, n of them (a
// multiple of kByteLanes), zero past `rows`.
CZ_TARGET_AVX2 inline void to_bytes(const int32_t* h, int rows, int n, uint8_t* out) {
  auto block = [h, rows](int o) {  // four activations, or zeros past the end
    return o < rows ? _mm_load_si128(reinterpret_cast<const __m128i*>(h + o)) : _mm_setzero_si128();
  };
  for (int i = 0; i < n; i += kByteLanes) {
    const __m128i lo = _mm_packus_epi16(_mm_packs_epi32(block(i), block(i + 4)),
                                        _mm_packs_epi32(block(i + 8), block(i + 12)));
    const __m128i hi = _mm_packus_epi16(_mm_packs_epi32(block(i + 16), block(i + 20)),
                                        _mm_packs_epi32(block(i + 24), block(i + 28)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + i), _mm256_set_m128i(hi, lo));
  }
}

// The dense layers' input as bytes: the mover's accumulator then the other side's, clipped to
// [0, 127]. packus clips below at 0 and interleaves the 128-bit halves of its two inputs; the
// permute puts them back in order. kH is the accumulator width when known when compiled, else 0.
template <int kH>
CZ_TARGET_AVX2 inline void clipped_bytes(const Weights& w, const Accumulator& a, Color side, uint8_t* x) {
  const int H = kH > 0 ? kH : w.hidden;
  const int us = index(side);
  const __m256i top = _mm256_set1_epi16(kActivationOne);
  for (int half = 0; half < 2; ++half) {
    const int16_t* acc = a.v[half == 0 ? us : us ^ 1].data();
    for (int j = 0; j < H; j += kByteLanes) {
      const __m256i lo = _mm256_min_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(acc + j)), top);
      const __m256i hi =
          _mm256_min_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(acc + j + kWordLanes)), top);
      const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), 0xD8);
      _mm256_store_si256(reinterpret_cast<__m256i*>(x + half * H + j), bytes);
    }
  }
}

template <int kChunks>
CZ_TARGET_AVX2 inline void layer1(const uint8_t* x, const Weights& w, int32_t* out) {
  dense<kChunks>(x, w.l1_w8.data(), w.l1_b8.data(), w.dense1_rows, 2 * w.hidden, out);
}

}  // namespace

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

namespace {

// The network's score with the AVX2 kernels. kH, kRows1 and kRows2 are the accumulator width and
// the padded dense widths when known when compiled (the loops unroll and the layers' outputs stay
// in registers), 0 for any width at run time.
template <int kH, int kRows1, int kRows2>
CZ_TARGET_AVX2 inline int evaluate_shape(const Weights& w, const Accumulator& a, Color side) {
  const int H = kH > 0 ? kH : w.hidden;
  const int rows1 = kRows1 > 0 ? kRows1 : w.dense1_rows, rows2 = kRows2 > 0 ? kRows2 : w.dense2_rows;
  const int inputs2 = kRows1 > 0 ? (kRows1 + kByteLanes - 1) / kByteLanes * kByteLanes : w.dense2_inputs;
  alignas(32) uint8_t x[2 * kMaxHidden];
  clipped_bytes<kH>(w, a, side, x);
  alignas(32) int32_t h1[kMaxDense];
  if (kH > 0) {
    dense<kH / kWordLanes, kRows1>(x, w.l1_w8.data(), w.l1_b8.data(), rows1, 2 * H, h1);
  } else {
    switch (H / kWordLanes) {  // 2 * H inputs in chunks of kByteLanes
      case 2:
        layer1<2>(x, w, h1);
        break;
      case 4:
        layer1<4>(x, w, h1);
        break;
      case 8:
        layer1<8>(x, w, h1);
        break;
      case 16:
        layer1<16>(x, w, h1);
        break;
      default:
        layer1<0>(x, w, h1);
    }
  }
  alignas(32) uint8_t x2[kMaxDense];
  to_bytes(h1, rows1, inputs2, x2);
  alignas(32) int32_t h2[kMaxDense];
  if (inputs2 == kByteLanes)
    dense<1, kRows2>(x2, w.l2_w8.data(), w.l2_b8.data(), rows2, kByteLanes, h2);
  else
    dense<0, kRows2>(x2, w.l2_w8.data(), w.l2_b8.data(), rows2, inputs2, h2);
  // Output unit: activations packed to int16 eight at a time times the int16 weights, paired into
  // int32 by pmaddwd (exact: 2 * 127 * 32768 fits int32).
  __m128i t = _mm_setzero_si128();
  for (int i = 0; i < rows2; i += 2 * kRowBlock) {
    const __m128i lo = _mm_load_si128(reinterpret_cast<const __m128i*>(h2 + i));
    const __m128i hi = i + kRowBlock < rows2
                           ? _mm_load_si128(reinterpret_cast<const __m128i*>(h2 + i + kRowBlock))
                           : _mm_setzero_si128();
    t = _mm_add_epi32(t,
                      _mm_madd_epi16(_mm_packs_epi32(lo, hi),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.out_w8.data() + i))));
  }
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
  const int32_t out = w.out_b + _mm_cvtsi128_si32(t);
  const int64_t score = int64_t(out) * w.output_scale / (int64_t(kActivationOne) << kWeightShift);
  return int(std::clamp<int64_t>(score, -kScoreLimit, kScoreLimit));
}

// The move-ordering head's sums (no shift, no clip) of the rows `actions` names, kRowBlock at a
// time (a short last block repeats its first row and drops the extra sums).
template <int kChunks>
CZ_TARGET_AVX2 inline void policy_rows(const uint8_t* x, const Weights& w, const int* actions, int n,
                                       int32_t* out) {
  const int inputs = 2 * w.hidden;
  const __m256i ones = _mm256_set1_epi16(1);
  const int chunks = kChunks > 0 ? kChunks : inputs / kByteLanes;
  for (int k = 0; k < n; k += kRowBlock) {
    const int8_t* rows[kRowBlock];
    int32_t bias[kRowBlock];
    for (int r = 0; r < kRowBlock; ++r) {
      const int action = actions[k + r < n ? k + r : k];
      rows[r] = w.pol_w8.data() + size_t(action) * inputs;
      bias[r] = w.pol_b[action];
    }
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (int c = 0; c < chunks; ++c) {
      const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(x) + c);
      s0 = _mm256_add_epi32(s0, products(xv, rows[0], c, ones));
      s1 = _mm256_add_epi32(s1, products(xv, rows[1], c, ones));
      s2 = _mm256_add_epi32(s2, products(xv, rows[2], c, ones));
      s3 = _mm256_add_epi32(s3, products(xv, rows[3], c, ones));
    }
    alignas(16) int32_t sums[kRowBlock];
    _mm_store_si128(reinterpret_cast<__m128i*>(sums),
                    _mm_add_epi32(sum4(s0, s1, s2, s3), _mm_loadu_si128(reinterpret_cast<const __m128i*>(bias))));
    for (int r = 0; r < kRowBlock && k + r < n; ++r) out[k + r] = sums[r];
  }
}

}  // namespace

CZ_TARGET_AVX2 void policy_avx2(const Weights& w, const Accumulator& a, Color side, const int* actions, int n,
                                int32_t* out) {
  alignas(32) uint8_t x[2 * kMaxHidden];
  if (w.hidden == 64) {
    clipped_bytes<64>(w, a, side, x);
    return policy_rows<4>(x, w, actions, n, out);
  }
  clipped_bytes<0>(w, a, side, x);
  policy_rows<0>(x, w, actions, n, out);
}

CZ_TARGET_AVX2 int evaluate_avx2(const Weights& w, const Accumulator& a, Color side) {
  // The shipped network's shape gets its own unrolled copy; every other shape the general one.
  if (w.hidden == 64 && w.dense1_rows == 16 && w.dense2_rows == 16)
    return evaluate_shape<64, 16, 16>(w, a, side);
  return evaluate_shape<0, 0, 0>(w, a, side);
}

namespace {

// One view's accumulator, kRegs registers (kRegs * kWordLanes values) from `j` on: the parent's,
// less the removed columns, plus the added ones, in registers from the first load to the store.
// kWidth is the accumulator width when known when compiled (0: `width` at run time).
template <int kRegs, int kWidth>
CZ_TARGET_AVX2 inline void update_view(const int16_t* from, int16_t* to, const int16_t* ft, int width,
                                       const int* removed, int n_removed, const int* added, int n_added,
                                       int j) {
  const size_t stride = size_t(kWidth > 0 ? kWidth : width);
  __m256i r[kRegs];
  for (int k = 0; k < kRegs; ++k) r[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(from + j) + k);
  for (int i = 0; i < n_removed; ++i) {
    const __m256i* col = reinterpret_cast<const __m256i*>(ft + size_t(removed[i]) * stride + j);
    for (int k = 0; k < kRegs; ++k) r[k] = _mm256_sub_epi16(r[k], _mm256_loadu_si256(col + k));
  }
  for (int i = 0; i < n_added; ++i) {
    const __m256i* col = reinterpret_cast<const __m256i*>(ft + size_t(added[i]) * stride + j);
    for (int k = 0; k < kRegs; ++k) r[k] = _mm256_add_epi16(r[k], _mm256_loadu_si256(col + k));
  }
  for (int k = 0; k < kRegs; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(to + j) + k, r[k]);
}

// Both views of an accumulator kWidth values wide, all of it in registers at once.
template <int kWidth>
CZ_TARGET_AVX2 inline void update_whole(const Weights& w, const Accumulator& parent, const Changes& c,
                                        Accumulator& child) {
  for (int view = 0; view < 2; ++view)
    update_view<kWidth / kWordLanes, kWidth>(parent.v[view].data(), child.v[view].data(), w.ft_w.data(),
                                             kWidth, c.removed[view], c.n_removed, c.added[view], c.n_added,
                                             0);
}

// Registers an accumulator block of a wider accumulator keeps at once (8 of the 16: 128 values).
constexpr int kBlockRegs = 8;

}  // namespace

CZ_TARGET_AVX2 void update_avx2(const Weights& w, const Accumulator& parent, const Changes& c,
                                Accumulator& child) {
  switch (w.hidden) {
    case 32:
      return update_whole<32>(w, parent, c, child);
    case 64:
      return update_whole<64>(w, parent, c, child);
    case 96:
      return update_whole<96>(w, parent, c, child);
    case 128:
      return update_whole<128>(w, parent, c, child);
    default:
      break;
  }
  // Wider: blocks of kBlockRegs registers, then the rest (H is a multiple of 2 * kWordLanes).
  const int H = w.hidden;
  for (int view = 0; view < 2; ++view) {
    const int16_t* from = parent.v[view].data();
    int16_t* to = child.v[view].data();
    int j = 0;
    for (; j + kBlockRegs * kWordLanes <= H; j += kBlockRegs * kWordLanes)
      update_view<kBlockRegs, 0>(from, to, w.ft_w.data(), H, c.removed[view], c.n_removed, c.added[view],
                                 c.n_added, j);
    for (; j < H; j += 2 * kWordLanes)
      update_view<2, 0>(from, to, w.ft_w.data(), H, c.removed[view], c.n_removed, c.added[view], c.n_added,
                        j);
  }
}

#undef CZ_TARGET_AVX2

#else  // no AVX2 kernels in this build

bool cpu_has_avx2() {
  return false;
}
int evaluate_avx2(const Weights& w, const Accumulator& a, Color side) {
  return evaluate_scalar(w, a, side);
}
void update_avx2(const Weights& w, const Accumulator& parent, const Changes& c, Accumulator& child) {
  update_scalar(w, parent, c, child);
}
void policy_avx2(const Weights& w, const Accumulator& a, Color side, const int* actions, int n, int32_t* out) {
  policy_scalar(w, a, side, actions, n, out);
}

#endif

}  // namespace cz::nn::detail
