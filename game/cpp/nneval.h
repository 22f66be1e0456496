// A small learned evaluation for the alpha-beta search, updated incrementally (NNUE style).
//
// Inputs are piece-square features seen from one colour's side: its own men, its own kings, the
// opponent's men, the opponent's kings, each on the board's squares (4 x 32 = 128 on 8x8). White's
// view turns the board half a turn (square s becomes N-1-s), so one set of weights serves both.
// The first layer is a sum of weight columns, one per present feature: it is kept per colour in an
// int16 accumulator and updated by adding and subtracting the columns of the features a move
// changes, never recomputed inside the search. The evaluation concatenates the side to move's
// accumulator and the other one, clips both to [0, 1] and runs two small dense layers (int8
// weights, int32 sums, clipped ReLU) and an output unit, then scales to centi-men.
//
// Fixed-point units: an activation of 1.0 is kActivationOne (127); weights of the first layer are
// scaled by kActivationOne, those of the dense layers and the output by 2^kWeightShift (64), so a
// dense layer's int32 sum shifted right by kWeightShift is again in activation units. The output
// sum z * kActivationOne * 2^kWeightShift is a logit z; the score is z * output_scale centi-men.
// evaluation/nneval reference code (game/nneval.py) mirrors every rounding step exactly.
//
// Two sets of kernels compute the same integers: plain C++ (any CPU) and AVX2 intrinsics
// (nneval_avx2.cpp, chosen at run time on x86-64 CPUs that have AVX2). The arithmetic is exact in
// both (int16 accumulators that check_weights() keeps from overflowing, int32 dot products), so
// the order of the additions cannot change a result; the AVX2 dense layers multiply the clipped
// activations as unsigned bytes with the int8 weights (pmaddubsw: a pair of products is at most
// 2 * 127 * 128 = 32512, inside int16), which is the same product. Tests compare both kernels
// with each other and with the NumPy reference on many positions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "movegen.h"

namespace cz::nn {

constexpr int kFeatureKinds = 4;  // own men, own kings, opponent's men, opponent's kings
constexpr int kMaxSquares = 32;   // 8x8 board
constexpr int kMaxInputs = kFeatureKinds * kMaxSquares;
constexpr int kMaxHidden = 256;      // accumulator width per colour (a 1 KB accumulator pair)
constexpr int kMaxDense = 64;        // widest dense layer
constexpr int kActivationOne = 127;  // 1.0 in activation units (the clipped ReLU's ceiling)
constexpr int kWeightShift = 6;      // dense-layer weights are scaled by 2^6
// |score| cap in centi-men: far below kMateThreshold and kDatabaseWin, so a learned score can
// never pass for a proven result, and an int16 transposition-table slot holds it.
constexpr int kScoreLimit = 10000;
// Centi-men per unit of logit: between 1 and this (the file's output_scale).
constexpr int kMaxOutputScale = 2000;

constexpr int kByteLanes = 32;  // bytes in an AVX2 register
constexpr int kWordLanes = 16;  // int16 values in an AVX2 register
constexpr int kRowBlock = 4;    // dense rows the AVX2 kernel sums at once (four horizontal sums)

// Which kernels evaluate() and update() run. Both give the same results to the bit.
enum class Kernels : uint8_t { Scalar = 0, Avx2 = 1 };

// Quantised weights, row-major. Dense weights are stored as int8 in the file and widened to
// int16 here for the plain kernels; prepare() adds the AVX2 kernels' int8 copies.
struct Weights {
  int size = 8;                // board side (6 or 8)
  int squares = 32;            // size * size / 2
  int inputs = 128;            // kFeatureKinds * squares
  int hidden = 0;              // accumulator width per colour
  int dense1 = 0;              // first dense layer's width (input 2 * hidden)
  int dense2 = 0;              // second dense layer's width
  int output_scale = 0;        // centi-men per unit of logit
  std::vector<int16_t> ft_w;   // [inputs][hidden]
  std::vector<int16_t> ft_b;   // [hidden]
  std::vector<int16_t> l1_w;   // [dense1][2 * hidden], int8 values
  std::vector<int32_t> l1_b;   // [dense1]
  std::vector<int16_t> l2_w;   // [dense2][dense1], int8 values
  std::vector<int32_t> l2_b;   // [dense2]
  std::vector<int16_t> out_w;  // [dense2]
  int32_t out_b = 0;
  // A hash of every number above: the search's score cache tells weights apart by it (set by
  // prepare(); call it again after changing any weight).
  uint64_t fingerprint = 0;
  // Set by prepare() (plain kernels and no copies until then). The AVX2 copies are padded with
  // zeros: rows to a multiple of kRowBlock, a row's inputs to a multiple of kByteLanes.
  Kernels kernels = Kernels::Scalar;
  int dense1_rows = 0, dense2_rows = 0, dense2_inputs = 0;  // padded sizes
  std::vector<int8_t> l1_w8;                                // [dense1_rows][2 * hidden]
  std::vector<int32_t> l1_b8;                               // [dense1_rows]
  std::vector<int8_t> l2_w8;                                // [dense2_rows][dense2_inputs]
  std::vector<int32_t> l2_b8;                               // [dense2_rows]
  std::vector<int16_t> out_w8;                              // [dense2_rows padded to kWordLanes]
  // The optional move-ordering head (absent: policy_outputs 0): one int8 row per action of the
  // mover (a square and a direction in the mover's frame, game.h's action_of, as the MCTS
  // network's policy) over the same clipped accumulators the first dense layer reads, and an
  // int32 bias per action; its sums are logits on a scale of the file's choosing (only their
  // order counts). Scores never depend on it, so the fingerprint leaves it out.
  int policy_outputs = 0;       // squares * 4 when present
  std::vector<int16_t> pol_w;   // [policy_outputs][2 * hidden], int8 values
  std::vector<int32_t> pol_b;   // [policy_outputs]
  std::vector<int8_t> pol_w8;   // the AVX2 kernels' copy (set by prepare())
};

// Throws std::invalid_argument naming the first fault: a size or width out of range, an array of
// the wrong length, an int8 weight out of range, or first-layer weights whose worst-case sum over
// a full board could overflow the int16 accumulator.
void check_weights(const Weights& w);
// check_weights(), then the fingerprint, the AVX2 copies, and the AVX2 kernels where
// avx2_unusable() is "".
void prepare(Weights& w);
// Why the AVX2 kernels cannot run `w` on this machine ("" when they can): a build or CPU without
// AVX2, weights not prepare()d, or an accumulator width that is not a multiple of kByteLanes.
std::string avx2_unusable(const Weights& w);
// Chooses the kernels; throws std::invalid_argument with avx2_unusable()'s reason.
void set_kernels(Weights& w, Kernels k);

struct alignas(64) Accumulator {
  std::array<std::array<int16_t, kMaxHidden>, 2> v;  // [colour][hidden]
};

// Feature index of a piece of `colour` (king or man) on `square`, seen from `view`'s side.
inline int feature(const Weights& w, int view, int colour, bool king, int square) {
  const int kind = (colour == view ? 0 : 2) + (king ? 1 : 0);
  const int sq = view == 0 ? square : w.squares - 1 - square;
  return kind * w.squares + sq;
}

// The accumulators of a board computed from scratch.
void refresh(const Weights& w, const Board& b, Accumulator& out);
// The accumulators of `child` from those of `parent`, where `child_board` is `parent_board` after
// one move of its side to move: the moving piece's feature leaves its square and arrives on its
// destination (a step changes 2 features per view, a capture also removes the captured pieces').
void update(const Weights& w, const Accumulator& parent, const Board& parent_board, const Board& child_board,
            Accumulator& child);
// Score of the board whose accumulators are `a`, in centi-men from `side`'s (the mover's) view,
// within +-kScoreLimit.
int evaluate(const Weights& w, const Accumulator& a, Color side);
// refresh() then evaluate().
int evaluate_board(const Weights& w, const Board& b);
// The move-ordering head's logits of `n` actions (each below w.policy_outputs) of the board whose
// accumulators are `a`, `side` to move: out[i] for actions[i] (w must have the head). Only the
// rows asked for are computed: a node pays for its own moves, not for every action.
void policy(const Weights& w, const Accumulator& a, Color side, const int* actions, int n, int32_t* out);

// A stack of accumulators along a line of play, updated as moves are made and taken back: what
// the search does with its per-ply accumulators, exposed so tests can compare it with refresh().
class Tracker {
 public:
  Tracker(const Weights& w, const Board& root);
  void push(const Board& child);  // the board after a move from the current one
  void pop();                     // back to the previous board; throws at the root
  const Accumulator& top() const { return accs_.back(); }
  int evaluate() const { return nn::evaluate(w_, accs_.back(), boards_.back().side); }
  size_t depth() const { return boards_.size() - 1; }

 private:
  Weights w_;  // a copy (a few tens of KB): the tracker outlives any caller's weights
  std::vector<Accumulator> accs_;
  std::vector<Board> boards_;
};

// The kernels behind evaluate() and update(), one set per Kernels value.
namespace detail {
// Feature indices a move removes and adds, for each view.
struct Changes {
  static constexpr int kMost = kMaxSquares;  // a move removes or adds at most one per square
  int removed[2][kMost];
  int added[2][kMost];
  int n_removed = 0, n_added = 0;
};
int evaluate_scalar(const Weights& w, const Accumulator& a, Color side);
void update_scalar(const Weights& w, const Accumulator& parent, const Changes& c, Accumulator& child);
bool cpu_has_avx2();
int evaluate_avx2(const Weights& w, const Accumulator& a, Color side);
void update_avx2(const Weights& w, const Accumulator& parent, const Changes& c, Accumulator& child);
void policy_scalar(const Weights& w, const Accumulator& a, Color side, const int* actions, int n, int32_t* out);
void policy_avx2(const Weights& w, const Accumulator& a, Color side, const int* actions, int n, int32_t* out);
}  // namespace detail

}  // namespace cz::nn
