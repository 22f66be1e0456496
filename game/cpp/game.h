// A game in progress: the board plus everything the rules need to end it (repetition,
// the no-progress count, a ply cap), make/undo, Zobrist hashing, and the learning interface
// in which a turn is a sequence of actions (one per single jump) from the mover's point of view.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "movegen.h"

namespace cz {

// 40 moves by each side without a capture or a man moving draws (ACF rule), counted in plies.
constexpr int kMaxPliesWithoutProgress = 80;
// Threefold repetition of the same position with the same side to move draws.
constexpr int kRepetitionsForDraw = 3;
// Network history: the current position and this many earlier ones (packed states per sample).
constexpr int kHistory = 3;
// Planes: 4 piece planes per history slot, no-progress, mid-jump piece, constant ones.
constexpr int kPlanesPerSlot = 4;
constexpr int kNumPlanes = kPlanesPerSlot * kHistory + 3;
// A packed state is four uint32 words: black, white, kings, meta (see pack_state()).
constexpr int kPackedWords = 4;
// State::ply and State::no_progress are 16-bit counters; they saturate here instead of wrapping.
constexpr int kMaxCounter = 0xFFFF;
// Deepest perft/divide: the recursion keeps one move list (about 5 KB) per ply on the stack, and
// depth 13 from the start already takes hours.
constexpr int kMaxPerftDepth = 64;

enum class Result : uint8_t { Ongoing = 0, BlackWin = 1, WhiteWin = 2, Draw = 3 };
enum class EndReason : uint8_t { None = 0, NoMoves = 1, Repetition = 2, NoProgress = 3, PlyCap = 4 };

struct State {
  Board board;
  uint64_t hash = 0;
  uint16_t no_progress = 0;  // plies since the last capture or man move
  uint16_t ply = 0;          // turns played (a multi-jump is one turn)
  int8_t jumping = -1;       // square of the piece in the middle of a multi-jump, else -1
};

uint64_t zobrist_hash(const Board& b);

// Why `b` is not a position of the rules on a size x size board, or "" when it is one: pieces
// off the board, both sides on one square, kings on empty squares, men on their crowning row,
// more pieces on a side than it starts with. Throws std::invalid_argument for a bad size.
std::string board_error(int size, const Board& b);

// meta word: bit 0 side to move, bits 1-6 jumping square + 1, bits 8-15 no-progress plies,
// bit 16 set when the slot holds a position (history slots before the game's start are empty).
uint32_t pack_meta(const State& s);
void pack_state(const State& s, uint32_t* out);
State unpack_state(const uint32_t* in);
// Checks the first `check_slots` states of n packed samples (each `stride_slots` states long)
// before they are decoded: a present slot must hold a position (board_error()) with a valid meta
// word (no unknown bits, a mid-jump square holding a piece of the side to move), an absent slot
// must be all zeros, and with require_first the newest slot must be present. Throws
// std::invalid_argument naming the sample, the slot and the fault. Called once per batch by the
// bindings: the encoder's loop itself trusts its input (the search feeds it states it made).
void check_packed(int size, const uint32_t* packed, size_t n, int stride_slots, int check_slots,
                  bool require_first);

class Game {
 public:
  explicit Game(int size = 8, int max_plies = 0);
  // Throws std::invalid_argument when the board is not a position (board_error()), a counter
  // is out of range (no_progress 0..kMaxPliesWithoutProgress, ply 0..kMaxCounter) or `jumping`
  // (the square of a piece in the middle of a multi-jump, -1 for none) names no piece of the
  // side to move that can jump on.
  static Game from_board(int size, const Board& board, int max_plies = 0, int no_progress = 0,
                         int ply = 0, int jumping = -1);
  // The game at one packed state (kPackedWords words, as pack_state() writes them), with the
  // same checks as from_board(); also throws when the meta word marks no position or has
  // unknown bits set.
  static Game from_packed(int size, const uint32_t* words, int max_plies = 0, int ply = 0);

  int size() const { return size_; }
  int num_squares() const { return size_ * size_ / 2; }
  int num_actions() const { return num_squares() * kDirections; }
  int max_plies() const { return max_plies_; }
  const State& state() const { return st_; }
  const Board& board() const { return st_.board; }
  const std::vector<State>& history() const { return stack_; }
  bool mid_jump() const { return st_.jumping >= 0; }

  // Whole moves (only between turns, never in the middle of a multi-jump).
  void legal_moves(MoveList& out) const;
  bool is_legal_move(const Move& m) const;  // one of legal_moves() (false mid-jump)
  void make(const Move& m);  // unchecked: call is_legal_move() first on untrusted input
  // Takes back the last make() or step().
  void undo();

  Result result() const;
  EndReason end_reason() const;
  int repetitions() const;  // times the current position has occurred (1 = first time)

  // Learning interface.
  int legal_actions(int* out) const;  // fills up to num_actions() entries, returns the count
  void legal_action_mask(uint8_t* mask) const;
  bool is_legal_action(int action) const;
  void step(int action);  // unchecked: call is_legal_action() first on untrusted input
  std::vector<int> actions_of(const Move& m) const;
  Move move_of(const std::vector<int>& actions) const;  // throws std::invalid_argument

  // The current position and the kHistory-1 before it, newest first: kHistory*kPackedWords words.
  void pack_history(uint32_t* out) const;

 private:
  int size_;
  int max_plies_;
  State st_;
  std::vector<State> stack_;
};

// Mover-relative action index <-> (absolute square, absolute direction).
int action_of(int size, Color side, int square, int direction);
void decode_action(int size, Color side, int action, int& square, int& direction);

// Leaf count of the move tree to `depth` (0..kMaxPerftDepth, else std::invalid_argument).
uint64_t perft(int size, const Board& b, int depth);

// Batched encoder: n samples of kHistory packed states each -> float planes (n, kNumPlanes, S, S).
void encode_packed(int size, const uint32_t* packed, int n, float* out);
// Legal-action masks of n packed current states -> (n, num_actions) bytes.
void legal_mask_packed(int size, const uint32_t* packed, int n, int stride_words, uint8_t* out);

}  // namespace cz
