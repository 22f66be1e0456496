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
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
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

// Quantised weights, row-major. Dense weights are stored as int8 in the file and widened to
// int16 here so that the dot products vectorise (pmaddwd).
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
};

// Throws std::invalid_argument naming the first fault: a size or width out of range, an array of
// the wrong length, an int8 weight out of range, or first-layer weights whose worst-case sum over
// a full board could overflow the int16 accumulator.
void check_weights(const Weights& w);

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
// The accumulators of `child` from those of `parent` and the features that differ between the two
// boards (a step changes 2 per colour, a capture 2 plus the captured pieces).
void update(const Weights& w, const Accumulator& parent, const Board& parent_board, const Board& child_board,
            Accumulator& child);
// Score of the board whose accumulators are `a`, in centi-men from `side`'s (the mover's) view,
// within +-kScoreLimit.
int evaluate(const Weights& w, const Accumulator& a, Color side);
// refresh() then evaluate().
int evaluate_board(const Weights& w, const Board& b);

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

}  // namespace cz::nn
