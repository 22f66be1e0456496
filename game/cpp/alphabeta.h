// The alpha-beta baseline: iterative deepening negamax with principal variation search, a
// transposition table, capture quiescence and a hand-written evaluation.
//
// It is the fixed opponent ladder of the evaluation (depths 1..8) and a sanity check for the
// network players, so it aims to be correct, deterministic at a fixed depth and reasonably fast,
// not to be a world-class checkers engine (no endgame databases, no opening book).
//
// Scores are in centi-men (a man is worth 100) from the point of view of the side to move.
// A won position scores kMateScore minus the plies to the win, a lost one the negation, so a
// quicker win scores higher. Draws by the rules (repetition along the search path or the game's
// history, the forty-move rule, the game's ply cap) score 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "game.h"

namespace cz {

namespace egdb {
class Database;
}
namespace nn {
struct Weights;
}

// Score of a side to move with no legal move at the root (it has lost); wins found n plies from
// the root score kMateScore - n. Fits an int16 transposition-table slot with room to spare.
constexpr int kMateScore = 30000;
// Any score at least this far from zero is a forced win or loss (no evaluation comes near it:
// 24 kings at the default weights is under 5000).
constexpr int kMateThreshold = kMateScore - 1000;
// Deepest iteration and deepest ply (iteration depth plus capture and forced-move extensions).
constexpr int kMaxSearchDepth = 64;
constexpr int kMaxSearchPly = 128;
// With an endgame database, a position in it that is won for the side to move n plies from the
// root scores kDatabaseWin - n: above any evaluation, below every forced win the search itself
// proves (those keep their exact distance), so a database result is never read as a mate score.
constexpr int kDatabaseWin = kMateThreshold - 1 - kMaxSearchPly;

// Evaluation weights, all in centi-men per unit of the feature, counted for each side and
// subtracted (own minus opponent's). Python sets them from conf/evaluation/baseline.yaml.
struct EvalWeights {
  int man = 100;          // a man (the unit)
  int king = 130;         // a king: worth more than a man (moves backwards), ~1.3 in the literature
  int advancement = 2;    // per row a man has advanced from its own back rank
  int back_rank = 8;      // per man still on its own back rank (guards the king row)
  int centre = 4;         // per piece on a central square (the 8 classic ones; 2 on 6x6)
  int mobility = 2;       // per available non-capturing step
  int runaway = 40;       // per man with no opposing piece in the cone ahead of it
  int king_centre = 3;    // per king on a central square (on top of `centre`), kings belong there
};

// Search switches (player-spec options, docs/api.md), each off by default: an equal-time match
// against the same player without it decides whether it is worth its cost.
struct SearchSwitches {
  // At the horizon, a quiet position where the opponent (were it to move) could capture is
  // searched one ply more (captures themselves always are: they are compulsory).
  bool threat_quiescence = false;
  // Each iteration from kAspirationFromDepth starts with a window around the previous score,
  // widened and searched again when the score falls outside it.
  bool aspiration = false;
  // Reverse futility: a shallow non-PV node without a capture on either side whose evaluation
  // beats beta by a margin per ply of depth returns beta unsearched.
  bool margin_pruning = false;
  // Cautious late-move reductions: late quiet moves of non-PV nodes deep enough are searched one
  // ply shallower, and again at full depth if they beat alpha.
  bool lmr = false;
  // Keep the transposition table between searches: entries of earlier moves stay readable and
  // are replaced first. Without it each search starts from a logically empty table.
  bool tt_keep = false;
  // ProbCut (multi-probability cut): a quiet non-PV node deep enough whose shallow search (a
  // fixed number of plies less) beats beta by a margin is taken to hold at full depth.
  bool probcut = false;
  // ProbCut only at nodes with at least this many pieces on the board (0: at every node).
  int probcut_min_pieces = 0;
  // Move ordering by the learned evaluation's move-ordering head (a file that has one): at nodes
  // kPolicyMinDepth plies or more from the horizon, quiet moves after the table's move, crowning
  // steps and killers go in the order of its logits instead of the history scores.
  bool policy_order = false;
};

struct SearchLimits {
  int depth = 0;    // deepest iteration; 0: no depth limit (a time limit is then required)
  int time_ms = 0;  // budget per move in milliseconds (of the search's clock); 0: none
  // Time management (with time_ms > 0): time_ms becomes the target and max_ms (>= time_ms) the
  // hard limit. A root whose best move has held for several iterations with a steady score stops
  // at half the target; one whose best move changed or whose score fell (between iterations, or
  // within the running one) runs on towards max_ms; any other stops at the target, inside an
  // iteration if need be (keeping a better root move that iteration found). 0: no management
  // (time_ms is both target and limit, and an iteration starts only with half of it left).
  int max_ms = 0;
  // The search's clock: 0 reads the machine's steady clock; N > 0 counts N nodes as a
  // millisecond, so a timed search is deterministic (tests, reproducible runs).
  int nodes_per_ms = 0;
  SearchSwitches switches;
};

// Why a search ended (SearchResult::stop).
enum class SearchStop : uint8_t {
  kGameOver,  // no search: the game is over
  kDepth,     // the depth limit was reached
  kResult,    // a forced win or loss within the horizon: more depth cannot change it
  kOnlyMove,  // a timed search with a single legal move
  kLimit,     // the time limit (unmanaged) or the hard limit (managed)
  kSettled,   // managed: a settled root stopped at its share of the target
  kTarget,    // managed: stopped at the target
  kExtended,  // managed: an unsettled root ran past the target
};

struct SearchResult {
  bool has_move = false;  // false when the game is already over
  Move best{};
  int score = 0;      // centi-men from the mover's view; +-(kMateScore - plies) for a forced result
  int depth = 0;      // deepest completed iteration
  uint64_t nodes = 0;
  std::vector<Move> pv;
  double seconds = 0.0;   // wall clock
  double clock_ms = 0.0;  // the search's own clock (SearchLimits::nodes_per_ms), milliseconds
  SearchStop stop = SearchStop::kGameOver;
};

// One transposition-table slot. The move is stored as its index in the (deterministic) list
// generate_moves() produces for the position, so a slot fits in 16 bytes.
struct TTEntry {
  uint64_t key = 0;
  int16_t score = 0;
  uint8_t depth = 0;
  uint8_t bound = 0;       // 0 empty, else Bound
  uint8_t generation = 0;  // search that wrote it; other generations read as empty
  uint8_t move = 0xFF;     // index of the best move, 0xFF for none
  uint8_t pad[2] = {0, 0};
};
static_assert(sizeof(TTEntry) == 16, "keep transposition-table slots at 16 bytes");

// Two slots a bucket (one kept for the deepest result, one always replaced), aligned so that a
// bucket never straddles two cache lines: a probe costs one memory access, not two.
struct alignas(32) TTBucket {
  TTEntry slot[2];
};
static_assert(sizeof(TTBucket) == 32, "keep a bucket inside half a cache line");

// A searcher owns its transposition table (fixed size, allocated once) and scratch tables, so a
// player that searches move after move allocates nothing per move. Each search() starts from a
// logically empty table (entries of earlier searches are ignored), which makes a fixed-depth
// search a pure function of the game and the weights.
struct SearchScratch;

class AlphaBeta {
 public:
  explicit AlphaBeta(size_t tt_megabytes = 16);
  ~AlphaBeta();
  AlphaBeta(const AlphaBeta&) = delete;
  AlphaBeta& operator=(const AlphaBeta&) = delete;
  // Throws std::invalid_argument on a game in the middle of a multi-jump or with no limit.
  // With `db`, positions below the root that are in the endgame database score its exact value
  // (kDatabaseWin - ply, 0, or the negation) instead of being searched. With `nn`, leaves are
  // scored by the learned evaluation (nneval.h, accumulators updated move by move) instead of
  // the hand-written one; `weights` is then unused.
  SearchResult search(const Game& game, const SearchLimits& limits, const EvalWeights& weights,
                      const egdb::Database* db = nullptr, const nn::Weights* nn = nullptr);
  size_t tt_entries() const { return tt_.size() * 2; }

 private:
  std::vector<TTBucket> tt_;
  std::unique_ptr<SearchScratch> scratch_;  // per-ply move lists, PV, killers, history
  uint8_t generation_ = 0;
};

// Static evaluation of a board from the side to move's view, in centi-men (no search).
int evaluate(int size, const Board& board, const EvalWeights& weights);

}  // namespace cz
