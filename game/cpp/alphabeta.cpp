#include "alphabeta.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "egdb.h"
#include "nneval.h"
#include "search_clock.h"

namespace cz {

namespace {

// Search switches (SearchSwitches). Aspiration: the first window is the previous score plus or
// minus kAspirationWindow (a quarter man: iterations here move by less most of the time), grown
// kAspirationGrowth-fold on each failure; below kAspirationFromDepth scores are too jumpy.
constexpr int kAspirationWindow = 25;
constexpr int kAspirationGrowth = 4;
constexpr int kAspirationFromDepth = 5;
// Reverse futility: a node within kMarginMaxDepth plies of the horizon whose evaluation beats
// beta by kMarginPerPly per ply of depth left is cut (a man and a half at depth 3).
constexpr int kMarginMaxDepth = 3;
constexpr int kMarginPerPly = 50;
// Late-move reductions, used cautiously (aggressive reductions have cost engines dearly): only
// at non-PV nodes kLmrMinDepth plies or more from the horizon, from the kLmrFromMove-th move on
// (0-based: the table's move, crowning steps and killers come first), by kLmrReduction ply.
constexpr int kLmrMinDepth = 3;
constexpr int kLmrFromMove = 3;
constexpr int kLmrReduction = 1;
// ProbCut: at quiet non-PV nodes kProbCutMinDepth plies or more from the horizon, a null-window
// search kProbCutReduction plies shallower against beta + kProbCutMargin; a score at or above
// it cuts the node. A shallow score that far above beta seldom falls below it with 4 plies more.
constexpr int kProbCutMinDepth = 6;
constexpr int kProbCutReduction = 4;
constexpr int kProbCutMargin = 80;
// Policy ordering: nodes this many plies from the horizon or more (nearer ones are many and
// cheap to search: the history scores order them).
constexpr int kPolicyMinDepth = 3;
// Logits are clamped to +-kPolicyKeyRange and shifted up by it, so a policy key lies in
// [0, 2 * kPolicyKeyRange], below the killers'.
constexpr int kPolicyKeyRange = 1 << 25;
// Two killer moves per ply (the classic choice: more rarely helps).
constexpr int kKillersPerPly = 2;
// History scores are halved when one passes this, so old cutoffs fade and nothing overflows.
constexpr int kHistoryLimit = 1 << 24;
// Larger than any score, so that -kInfinity..kInfinity is a full window.
constexpr int kInfinity = kMateScore + 1;
constexpr uint8_t kNoMove = 0xFF;
// Two slots per bucket (TTBucket): one kept for the deepest result, one always replaced.
constexpr size_t kBucketSlots = 2;
constexpr size_t kBytesPerMegabyte = size_t(1) << 20;
// Learned scores cached by position, 8 bytes a slot: a hit skips both the accumulator updates and
// the network. Most hits are near repeats (a null-window search re-searched with the full window,
// transpositions among siblings), so a table that stays in the L1 cache pays best: 8 KB found 17%
// of the leaves there at depth 7 and raised the node rate by about 13%, 512 KB found 21% and
// raised it by about 1% (its misses cost a trip to L2 or beyond on every leaf).
constexpr size_t kEvalCacheSlots = size_t(1) << 10;
constexpr int kEvalScoreBits = 16;  // a learned score fits int16 (|score| <= nn::kScoreLimit)
static_assert(nn::kScoreLimit < (1 << (kEvalScoreBits - 1)));

enum Bound : uint8_t { kBoundNone = 0, kBoundExact = 1, kBoundLower = 2, kBoundUpper = 3 };

// Move-ordering keys, highest first: the table's move, then (captures being compulsory, a node
// has either only captures or none) bigger captures, crowning steps, killers, history.
constexpr int kOrderTTMove = 1 << 30;
constexpr int kOrderCapture = 1 << 29;
constexpr int kOrderPerCaptured = 1 << 10;  // more pieces taken first, then kings taken
constexpr int kOrderPerKingCaptured = 1 << 8;
constexpr int kOrderCrowning = 1 << 28;
constexpr int kOrderKiller = 1 << 27;  // above any history score (kHistoryLimit) or policy key
static_assert(2 * kPolicyKeyRange < kOrderKiller - kKillersPerPly);

constexpr Bitboard square_mask(int sq) { return sq < 0 ? 0 : bit(sq); }

// Rows and columns between the centre block and the board's edge.
constexpr int kCentreMargin = 2;

// Feature masks of the evaluation for one board size.
template <int S>
struct EvalTables {
  using G = Geometry<S>;
  int advance[2][G::kSquares];      // rows a man of each colour has advanced from its back rank
  Bitboard cone[2][G::kSquares];    // squares ahead of a man that an interceptor could stand on
  Bitboard back_rank[2];
  Bitboard centre;

  EvalTables() {
    back_rank[index(Color::Black)] = G::row(0);
    back_rank[index(Color::White)] = G::row(S - 1);
    // The central block: rows and columns 2..S-3, the classic 8 squares (10, 11, 14, 15, 18,
    // 19, 22, 23) on 8x8, 2 squares (8, 11) on 6x6.
    centre = 0;
    for (int r = kCentreMargin; r < S - kCentreMargin; ++r)
      for (int c = kCentreMargin; c < S - kCentreMargin; ++c) centre |= square_mask(G::square_at(r, c));
    for (int sq = 0; sq < G::kSquares; ++sq) {
      const int r = G::row_of(sq), c = G::col_of(sq);
      advance[index(Color::Black)][sq] = r;
      advance[index(Color::White)][sq] = S - 1 - r;
      for (int colour = 0; colour < 2; ++colour) {
        Bitboard b = 0;
        const int step = colour == index(Color::Black) ? 1 : -1;
        for (int dist = 1;; ++dist) {
          const int rr = r + step * dist;
          if (rr < 0 || rr >= S) break;
          for (int cc = c - dist; cc <= c + dist; ++cc) b |= square_mask(G::square_at(rr, cc));
        }
        cone[colour][sq] = b;
      }
    }
  }
};

template <int S>
const EvalTables<S>& eval_tables() {
  static const EvalTables<S> tables;
  return tables;
}

template <int S>
int steps_available(const Board& b, Color c, Bitboard empty) {
  using G = Geometry<S>;
  const Bitboard own = b.pieces[index(c)], kings = own & b.kings;
  return popcount(G::template shift<DownLeft>(is_forward(c, DownLeft) ? own : kings) & empty) +
         popcount(G::template shift<DownRight>(is_forward(c, DownRight) ? own : kings) & empty) +
         popcount(G::template shift<UpLeft>(is_forward(c, UpLeft) ? own : kings) & empty) +
         popcount(G::template shift<UpRight>(is_forward(c, UpRight) ? own : kings) & empty);
}

template <int S>
int evaluate_board(const Board& b, const EvalWeights& w) {
  using G = Geometry<S>;
  const EvalTables<S>& t = eval_tables<S>();
  const Bitboard empty = G::kAll & ~b.occupied();
  int side_score[2];
  for (int c = 0; c < 2; ++c) {
    const Bitboard own = b.pieces[c], kings = own & b.kings, enemy = b.pieces[c ^ 1];
    Bitboard men = own & ~b.kings;
    int s = popcount(men) * w.man + popcount(kings) * w.king;
    s += w.back_rank * popcount(men & t.back_rank[c]);
    s += w.centre * popcount(own & t.centre) + w.king_centre * popcount(kings & t.centre);
    s += w.mobility * steps_available<S>(b, Color(c), empty);
    while (men) {
      const int sq = pop_lsb(men);
      s += w.advancement * t.advance[c][sq];
      if (!(t.cone[c][sq] & enemy)) s += w.runaway;
    }
    side_score[c] = s;
  }
  const int us = index(b.side);
  return side_score[us] - side_score[us ^ 1];
}

// A bound on |evaluation| on an S x S board: each feature's |weight| times the most a side can
// count of it (pieces, rows advanced, steps available, ...). A side's score lies between minus
// the negative weights' part and plus the positive weights' part, so the difference of the two
// sides' scores is at most the sum.
template <int S>
int64_t evaluation_bound(const EvalWeights& w) {
  using G = Geometry<S>;
  const int64_t pieces = G::kMenPerSide;
  const int64_t centre = popcount(eval_tables<S>().centre);
  auto mag = [](int x) { return x < 0 ? -int64_t(x) : int64_t(x); };
  const int64_t sum = std::max(mag(w.man), mag(w.king)) * pieces + mag(w.back_rank) * G::kPerRow +
                      (mag(w.centre) + mag(w.king_centre)) * centre +
                      mag(w.mobility) * pieces * kDirections + mag(w.advancement) * pieces * (S - 2) +
                      mag(w.runaway) * pieces;
  return sum;
}

// Weights whose evaluations could reach the mate range (or overflow int) would make the search
// report false wins; refused once per call, never checked in the search itself.
void check_weights(int size, const EvalWeights& w) {
  const int64_t bound = size == 8 ? evaluation_bound<8>(w) : evaluation_bound<6>(w);
  if (bound >= kMateThreshold)
    throw std::invalid_argument("evaluation weights too large: a position could score " +
                                std::to_string(bound) + " centi-men, beyond the mate threshold " +
                                std::to_string(kMateThreshold));
}

// Zobrist keys are XOR-linear in (colour, king, square) features, so the change a move makes is
// the hash of a "difference board" holding just the features it adds or removes (with White to
// move, which toggles the side key). Equal to zobrist_hash(child) ^ zobrist_hash(parent).
template <int S>
uint64_t move_hash_delta(const Board& b, const Move& m) {
  const int us = index(b.side), them = us ^ 1;
  const Bitboard from = bit(m.from), to = bit(m.to);
  const bool king = b.kings & from;
  Board d;
  d.side = Color::White;
  d.pieces[us] = from ^ to;  // zero when a king's capture loop ends where it started
  d.pieces[them] = m.captured;
  d.kings = (b.kings & m.captured) | (king ? (from ^ to) : 0) | (crowns<S>(b, m) ? to : 0);
  return zobrist_hash(d);
}

// The direction of a step (a quiet move): the one that shifts its square onto its target.
template <int S>
int step_direction(const Move& m) {
  int d = 0;
  while (d < kDirections - 1 && !(Geometry<S>::shift(bit(m.from), d) & bit(m.to))) ++d;
  return d;
}

int score_to_tt(int score, int ply) {
  if (score >= kMateThreshold) return score + ply;
  if (score <= -kMateThreshold) return score - ply;
  return score;
}

int score_from_tt(int score, int ply) {
  if (score >= kMateThreshold) return score - ply;
  if (score <= -kMateThreshold) return score + ply;
  return score;
}

}  // namespace

struct SearchScratch {
  std::array<MoveList, kMaxSearchPly + 1> lists;
  std::array<std::array<Move, kMaxSearchPly + 1>, kMaxSearchPly + 1> pv;  // triangular PV table
  std::array<int, kMaxSearchPly + 1> pv_len;
  std::array<std::array<Move, kKillersPerPly>, kMaxSearchPly + 1> killers;
  int history[2][32][32];  // [side][from][to] cutoff credit of quiet moves
  std::vector<uint64_t> keys;  // hashes of the game's positions, then of the search path
  // Learned evaluation: the board at each ply of the current path and its accumulators, which
  // are brought up to date only when a node below is evaluated (acc_ready: this ply's are).
  std::array<nn::Accumulator, kMaxSearchPly + 2> accs;
  std::array<Board, kMaxSearchPly + 2> boards;
  std::array<bool, kMaxSearchPly + 2> acc_ready;
  // Learned scores by position, kept across searches: slot i holds the upper 48 bits of
  // (hash ^ the weights' fingerprint) and the score in the low 16 (see learned_eval()).
  std::array<uint64_t, kEvalCacheSlots> evals{};

  void reset() {
    for (auto& k : killers) k.fill(Move{});
    std::memset(history, 0, sizeof(history));
    keys.clear();
  }
};

namespace {

template <int S>
class Searcher {
 public:
  Searcher(std::vector<TTBucket>& tt, uint8_t generation, SearchScratch& scratch, const EvalWeights& w,
           const Game& game, const SearchLimits& limits, const egdb::Database* db, const nn::Weights* nn)
      : tt_(tt),
        generation_(generation),
        s_(scratch),
        w_(w),
        game_(game),
        limits_(limits),
        sw_(limits.switches),
        db_(db),
        nn_(nn),
        clock_(limits) {}

  SearchResult run() {
    SearchResult result;
    s_.reset();
    // Positions of the game at turn boundaries (multi-jump intermediates skipped), then the root.
    for (const State& st : game_.history())
      if (st.jumping < 0) s_.keys.push_back(st.hash);
    s_.keys.push_back(game_.state().hash);
    root_index_ = int(s_.keys.size()) - 1;
    s_.keys.resize(s_.keys.size() + kMaxSearchPly + 1);
    root_ply_ = game_.state().ply;
    if (nn_) {
      nn::refresh(*nn_, game_.board(), s_.accs[0]);
      s_.boards[0] = game_.board();
      s_.acc_ready[0] = true;
    }

    MoveList root_moves;
    generate_moves<S>(game_.board(), root_moves);
    if (game_.result() != Result::Ongoing || root_moves.size == 0)
      return finish(result, SearchStop::kGameOver);
    const int max_depth = limits_.depth > 0 ? std::min(limits_.depth, kMaxSearchDepth) : kMaxSearchDepth;
    SearchStop why = SearchStop::kDepth;
    int held = 0;  // iterations in a row that ended on the same best move
    for (int depth = 1; depth <= max_depth; ++depth) {
      can_stop_ = depth > 1 && clock_.timed();  // always finish depth 1: we need a move
      const int score = iterate(depth, result);
      if (stop_) {
        // A managed search may stop inside an iteration: a root move that beat the first one's
        // score at the new depth is played (moves not yet searched were worse one ply less deep).
        if (clock_.managed() && root_changed_ && s_.pv_len[0] > 0 && result.has_move) {
          result.score = root_score_;
          result.pv.assign(s_.pv[0].begin(), s_.pv[0].begin() + s_.pv_len[0]);
          result.best = result.pv[0];
        }
        why = clock_.stopped();
        break;
      }
      const Move best = s_.pv_len[0] > 0 ? s_.pv[0][0] : root_moves[0];
      const bool same_best = result.has_move && best == result.best;
      const int swing = result.has_move ? score - result.score : 0;
      held = same_best ? held + 1 : 1;
      result.has_move = true;
      result.score = score;
      result.depth = depth;
      result.pv.assign(s_.pv[0].begin(), s_.pv[0].begin() + s_.pv_len[0]);
      result.best = result.pv.empty() ? root_moves[0] : result.pv[0];
      // A forced result within the searched horizon cannot get shorter with more depth.
      if (std::abs(score) >= kMateThreshold && kMateScore - std::abs(score) <= depth) {
        why = SearchStop::kResult;
        break;
      }
      if (clock_.timed()) {
        if (root_moves.size == 1) {  // nothing to choose
          why = SearchStop::kOnlyMove;
          break;
        }
        if (!clock_.next_iteration(nodes_, depth, same_best, swing, held)) {
          why = clock_.stopped();
          break;
        }
      }
    }
    return finish(result, why);
  }

 private:
  SearchResult& finish(SearchResult& result, SearchStop why) {
    result.nodes = nodes_;
    result.seconds = clock_.wall_seconds();
    result.clock_ms = clock_.elapsed_ms(nodes_);
    result.stop = why;
    return result;
  }

  // One iteration of the root (with aspiration windows when switched on); `last` holds the
  // previous iteration's result.
  int iterate(int depth, const SearchResult& last) {
    const Board& b = game_.board();
    const uint64_t hash = game_.state().hash;
    const int no_progress = game_.state().no_progress;
    root_changed_ = root_fell_ = false;
    root_first_ = last.has_move ? last.score : -kInfinity;
    const bool window = sw_.aspiration && depth >= kAspirationFromDepth && last.has_move &&
                        std::abs(last.score) < kMateThreshold;
    if (!window)
      return search(b, hash, no_progress, depth, -kInfinity, kInfinity, 0);
    int delta = kAspirationWindow;
    int alpha = std::max(last.score - delta, -kInfinity), beta = std::min(last.score + delta, kInfinity);
    for (;;) {
      const int score = search(b, hash, no_progress, depth, alpha, beta, 0);
      if (stop_) return 0;
      delta *= kAspirationGrowth;
      if (score <= alpha && alpha > -kInfinity) {
        root_fell_ = true;  // the score fell out of its window: the time manager's "unsettled"
        alpha = std::max(alpha - delta, -kInfinity);
      } else if (score >= beta && beta < kInfinity) {
        beta = std::min(beta + delta, kInfinity);
      } else {
        return score;
      }
      root_changed_ = false;
    }
  }

  // A root move's score at ply 0, before alpha takes it: what the time manager reads inside an
  // iteration (the first move falling, another move taking over).
  void note_root_move(int k, int score, int alpha) {
    if (k == 0) {
      if (score <= root_first_ - kFallingScore) root_fell_ = true;
      root_score_ = score;
    } else if (score > alpha) {
      root_changed_ = true;
      root_score_ = score;
    }
  }

  // The evaluation of a node inside the tree (reverse futility): exactly as a leaf is scored in
  // search(); where the leaf's scoring changes (lazy accumulators, a cache), this follows it.
  int static_eval(const Board& b, int ply) const {
    return nn_ ? learned_eval(b, ply) : evaluate_board<S>(b, w_);
  }

  // Whether the side not to move could capture if it were its turn.
  static bool threatened(const Board& b) {
    Board other = b;
    other.side = ~b.side;
    return capturing_pieces<S>(other) != 0;
  }

  bool is_killer(const Move& m, int ply) const {
    for (int k = 0; k < kKillersPerPly; ++k)
      if (s_.killers[ply][k] == m) return true;
    return false;
  }

  TTEntry* bucket_of(uint64_t key) { return tt_[key % tt_.size()].slot; }

  TTEntry* probe(uint64_t key) {
    TTEntry* bucket = bucket_of(key);
    for (size_t i = 0; i < kBucketSlots; ++i)
      if ((bucket[i].generation == generation_ || sw_.tt_keep) && bucket[i].bound != kBoundNone &&
          bucket[i].key == key)
        return &bucket[i];
    return nullptr;
  }

  void store(uint64_t key, int score, int depth, Bound bound, int move, int ply) {
    TTEntry* bucket = bucket_of(key);
    // Slot 0 keeps the deepest result of this search (replace by depth), slot 1 the newest.
    TTEntry* slot = &bucket[1];
    const bool slot0_stale = bucket[0].generation != generation_ || bucket[0].bound == kBoundNone;
    if (slot0_stale || bucket[0].key == key || depth >= bucket[0].depth) slot = &bucket[0];
    if (slot == &bucket[0] && !slot0_stale && bucket[0].key != key) bucket[1] = bucket[0];
    slot->key = key;
    slot->score = int16_t(score_to_tt(score, ply));
    slot->depth = uint8_t(depth);
    slot->bound = bound;
    slot->generation = generation_;
    slot->move = move < 0 ? kNoMove : uint8_t(move);
  }

  void check_clock() {
    if (can_stop_ && clock_.out_of_time(nodes_, root_changed_ || root_fell_)) stop_ = true;
  }

  bool repeated(int ply, int no_progress) const {
    // Only positions since the last capture or man move can recur; the same side is to move
    // every second ply. One earlier occurrence is scored as a draw: whoever could repeat it once
    // can repeat it again.
    const int at = root_index_ + ply;
    const uint64_t key = s_.keys[at];
    for (int i = at - 2; i >= 0 && i >= at - no_progress; i -= 2)
      if (s_.keys[i] == key) return true;
    return false;
  }

  int search(const Board& b, uint64_t hash, int no_progress, int depth, int alpha, int beta, int ply) {
    // A node above the horizon will probe the table: its bucket is fetched while the moves are
    // generated (about half the search's time was spent waiting for table entries).
    if (depth > 0) __builtin_prefetch(bucket_of(hash));
    s_.pv_len[ply] = ply;
    if (clock_.due(++nodes_)) check_clock();
    if (stop_) return 0;

    MoveList& moves = s_.lists[ply];
    generate_moves<S>(b, moves);
    if (moves.size == 0) return -(kMateScore - ply);  // no legal move: the side to move has lost
    if (ply > 0) {
      if (no_progress >= kMaxPliesWithoutProgress || repeated(ply, no_progress)) return 0;
      if (game_.max_plies() > 0 && root_ply_ + ply >= game_.max_plies()) return 0;
      if (db_) {
        // With distances, a win that converts sooner (a loss that holds out longer) scores better.
        const egdb::Probe p = db_->probe_distance(b);
        if (p.value == egdb::kDraw) return 0;
        const int far = ply + std::max(p.distance, 0);
        if (p.value != egdb::kUnknown) return p.value == egdb::kWin ? kDatabaseWin - far : far - kDatabaseWin;
      }
    }
    const bool capture = moves[0].is_capture();
    // Threat quiescence (switch): a quiet horizon node where the opponent threatens a capture is
    // not quiet; it is searched one ply more (its children sit below the horizon, never again).
    const bool threat = sw_.threat_quiescence && depth == 0 && !capture && threatened(b);
    // Quiescence: below the horizon keep going only while the mover must capture.
    if ((depth <= 0 && !capture && !threat) || ply >= kMaxSearchPly)
      return nn_ ? learned_eval(b, ply) : evaluate_board<S>(b, w_);
    depth = std::max(depth, 0);
    const bool pv_node = beta - alpha > 1;
    const int alpha_in = alpha;

    int tt_move = -1;
    if (const TTEntry* e = probe(hash)) {
      if (e->move < moves.size) tt_move = e->move;
      if (!pv_node && e->depth >= depth) {
        const int score = score_from_tt(e->score, ply);
        if (e->bound == kBoundExact || (e->bound == kBoundLower && score >= beta) ||
            (e->bound == kBoundUpper && score <= alpha))
          return score;
      }
    }
    // Reverse futility (switch): near the horizon, a quiet node (no capture for either side)
    // whose evaluation beats beta by a margin per ply left is taken to hold.
    if (sw_.margin_pruning && !pv_node && ply > 0 && depth > 0 && depth <= kMarginMaxDepth && !capture &&
        beta < kMateThreshold - kMaxSearchPly && beta > -(kMateThreshold - kMaxSearchPly) && !threatened(b) &&
        static_eval(b, ply) - kMarginPerPly * depth >= beta)
      return beta;

    // ProbCut (switch): a shallow search of this node far above beta stands for the deep one.
    // The shallow search regenerates this ply's move list (the same moves in the same order).
    if (sw_.probcut && !pv_node && ply > 0 && depth >= kProbCutMinDepth && !capture &&
        beta < kMateThreshold - kMaxSearchPly - kProbCutMargin && beta > -(kMateThreshold - kMaxSearchPly) &&
        popcount(b.occupied()) >= sw_.probcut_min_pieces && !threatened(b)) {
      const int raised = beta + kProbCutMargin;
      const int shallow = search(b, hash, no_progress, depth - kProbCutReduction, raised - 1, raised, ply);
      if (stop_) return 0;
      if (shallow >= raised) return beta;
      if (const TTEntry* e = probe(hash); e && e->move < moves.size) tt_move = e->move;
    }

    // Policy ordering (switch): the head's logits of this node's moves (all steps here).
    const bool by_policy = sw_.policy_order && !capture && depth >= kPolicyMinDepth;
    std::array<int32_t, kMaxMoves> logits;
    if (by_policy) {
      ready_accumulators(ply);
      std::array<int, kMaxMoves> actions;
      for (int i = 0; i < moves.size; ++i)
        actions[i] = action_of(S, b.side, moves[i].from, step_direction<S>(moves[i]));
      nn::policy(*nn_, s_.accs[ply], b.side, actions.data(), moves.size, logits.data());
    }
    std::array<int, kMaxMoves> order;
    for (int i = 0; i < moves.size; ++i)
      order[i] = order_key(b, moves[i], i == tt_move, ply, by_policy ? &logits[i] : nullptr);
    std::array<uint8_t, kMaxMoves> idx;
    for (int i = 0; i < moves.size; ++i) idx[i] = uint8_t(i);

    // A forced reply costs no choice: search it one ply deeper (not in quiescence).
    const int child_depth = (depth > 0 && moves.size == 1) ? depth : depth - 1;
    int best = -kInfinity, best_move = -1;
    for (int k = 0; k < moves.size; ++k) {
      // Selection sort step: bring the best remaining key to position k.
      int pick = k;
      for (int j = k + 1; j < moves.size; ++j)
        if (order[idx[j]] > order[idx[pick]]) pick = j;
      std::swap(idx[k], idx[pick]);
      const int i = idx[k];
      const Move& m = moves[i];

      Board child = b;
      apply_move<S>(child, m);
      if (nn_) {  // the child's accumulators wait until a node below is evaluated
        s_.boards[ply + 1] = child;
        s_.acc_ready[ply + 1] = false;
      }
      const uint64_t child_hash = hash ^ move_hash_delta<S>(b, m);
      const bool progress = m.is_capture() || !(b.kings & bit(m.from));
      const int child_progress = progress ? 0 : no_progress + 1;
      s_.keys[root_index_ + ply + 1] = child_hash;

      int score;
      if (k == 0) {
        score = -search(child, child_hash, child_progress, child_depth, -beta, -alpha, ply + 1);
      } else {
        // Late-move reduction (switch): a late quiet move of a non-PV node searched shallower
        // first, and at full depth only if it beats alpha.
        const bool reduce = sw_.lmr && !pv_node && !capture && depth >= kLmrMinDepth && k >= kLmrFromMove &&
                            i != tt_move && !crowns<S>(b, m) && !is_killer(m, ply);
        const int first_depth = reduce ? child_depth - kLmrReduction : child_depth;
        score = -search(child, child_hash, child_progress, first_depth, -alpha - 1, -alpha, ply + 1);
        if (reduce && score > alpha && !stop_)
          score = -search(child, child_hash, child_progress, child_depth, -alpha - 1, -alpha, ply + 1);
        if (score > alpha && score < beta && !stop_)
          score = -search(child, child_hash, child_progress, child_depth, -beta, -alpha, ply + 1);
      }
      if (stop_) return 0;
      if (ply == 0) note_root_move(k, score, alpha);
      if (score > best) {
        best = score;
        best_move = i;
        if (score > alpha) {
          alpha = score;
          s_.pv[ply][ply] = m;
          for (int p = ply + 1; p < s_.pv_len[ply + 1]; ++p) s_.pv[ply][p] = s_.pv[ply + 1][p];
          s_.pv_len[ply] = std::max(s_.pv_len[ply + 1], ply + 1);
          if (alpha >= beta) {
            if (!capture) reward_quiet(b, m, depth, ply);
            break;
          }
        }
      }
    }
    const Bound bound = best >= beta ? kBoundLower : (best > alpha_in ? kBoundExact : kBoundUpper);
    store(hash, best, depth, bound, best_move, ply);
    return best;
  }

  // The learned score of the node at `ply` of the current path (board b): from the cache, else
  // from its accumulators, updated move by move from the deepest ply whose are up to date.
  int learned_eval(const Board& b, int ply) const {
    const uint64_t key = s_.keys[root_index_ + ply] ^ nn_->fingerprint;
    uint64_t& slot = s_.evals[key & (kEvalCacheSlots - 1)];
    if ((slot ^ key) >> kEvalScoreBits == 0) return int16_t(uint16_t(slot));
    ready_accumulators(ply);
    const int score = nn::evaluate(*nn_, s_.accs[ply], b.side);
    slot = (key >> kEvalScoreBits << kEvalScoreBits) | uint16_t(score);
    return score;
  }

  // Brings the accumulators of the node at `ply` up to date, move by move from the deepest ply
  // whose are.
  void ready_accumulators(int ply) const {
    int p = ply;
    while (p > 0 && !s_.acc_ready[p]) --p;  // the root's are always ready
    for (; p < ply; ++p) {
      nn::update(*nn_, s_.accs[p], s_.boards[p], s_.boards[p + 1], s_.accs[p + 1]);
      s_.acc_ready[p + 1] = true;
    }
  }

  // `logit`: the move-ordering head's for m, which then orders quiet moves in place of history.
  int order_key(const Board& b, const Move& m, bool tt_move, int ply, const int32_t* logit) const {
    if (tt_move) return kOrderTTMove;
    if (m.is_capture())
      return kOrderCapture + kOrderPerCaptured * m.jumps +
             kOrderPerKingCaptured * popcount(m.captured & b.kings);
    if (crowns<S>(b, m)) return kOrderCrowning;
    for (int k = 0; k < kKillersPerPly; ++k)
      if (s_.killers[ply][k] == m) return kOrderKiller - k;
    if (logit) return kPolicyKeyRange + std::clamp(*logit, -kPolicyKeyRange, kPolicyKeyRange);
    return s_.history[index(b.side)][m.from][m.to];
  }

  void reward_quiet(const Board& b, const Move& m, int depth, int ply) {
    auto& killers = s_.killers[ply];
    if (!(killers[0] == m)) {
      for (int k = kKillersPerPly - 1; k > 0; --k) killers[k] = killers[k - 1];
      killers[0] = m;
    }
    int& h = s_.history[index(b.side)][m.from][m.to];
    h += depth * depth;
    if (h > kHistoryLimit)
      for (auto& side : s_.history)
        for (auto& from : side)
          for (int& v : from) v /= 2;
  }

  std::vector<TTBucket>& tt_;
  const uint8_t generation_;
  SearchScratch& s_;
  const EvalWeights& w_;
  const Game& game_;
  const SearchLimits limits_;
  const SearchSwitches sw_;
  const egdb::Database* db_;
  const nn::Weights* nn_;  // the learned evaluation, or null for the hand-written one
  int root_index_ = 0;
  int root_ply_ = 0;
  uint64_t nodes_ = 0;
  bool stop_ = false;
  bool can_stop_ = false;
  SearchClock clock_;
  // The running iteration's root, for the time manager: another move took over from the first,
  // the first fell (or the aspiration window failed low), the first's score at the previous
  // iteration, the score of the best move so far.
  bool root_changed_ = false, root_fell_ = false;
  int root_first_ = 0, root_score_ = 0;
};

}  // namespace

AlphaBeta::AlphaBeta(size_t tt_megabytes) : scratch_(std::make_unique<SearchScratch>()) {
  if (tt_megabytes == 0) throw std::invalid_argument("the transposition table needs at least 1 MB");
  tt_.assign(tt_megabytes * kBytesPerMegabyte / sizeof(TTBucket), TTBucket{});
}

AlphaBeta::~AlphaBeta() = default;

SearchResult AlphaBeta::search(const Game& game, const SearchLimits& limits, const EvalWeights& weights,
                               const egdb::Database* db, const nn::Weights* nn) {
  if (game.mid_jump()) throw std::invalid_argument("alpha-beta search in the middle of a multi-jump");
  if (limits.depth < 0 || limits.time_ms < 0)
    throw std::invalid_argument("search depth and time must be >= 0, got depth " +
                                std::to_string(limits.depth) + ", time_ms " + std::to_string(limits.time_ms));
  if (limits.max_ms < 0 || (limits.max_ms > 0 && (limits.time_ms == 0 || limits.max_ms < limits.time_ms)))
    throw std::invalid_argument("max_ms (time management) needs time_ms > 0 and max_ms >= time_ms, got time_ms " +
                                std::to_string(limits.time_ms) + ", max_ms " + std::to_string(limits.max_ms));
  if (limits.nodes_per_ms < 0)
    throw std::invalid_argument("nodes_per_ms must be >= 0 (0: the wall clock), got " +
                                std::to_string(limits.nodes_per_ms));
  if (limits.depth == 0 && limits.time_ms == 0)
    throw std::invalid_argument("alpha-beta search needs a depth or a time limit (both were 0)");
  check_weights(game.size(), weights);
  // A new generation makes every older entry read as empty; wrap-around clears the table so a
  // 256-searches-old entry can never pass for a current one.
  if (++generation_ == 0) {
    std::fill(tt_.begin(), tt_.end(), TTBucket{});
    generation_ = 1;
  }
  if (db && db->size() != game.size()) throw std::invalid_argument("endgame database of another board size");
  if (nn && nn->size != game.size())
    throw std::invalid_argument("learned evaluation for boards of side " + std::to_string(nn->size) +
                                ", the game is on side " + std::to_string(game.size()));
  if (limits.switches.policy_order && (!nn || nn->policy_outputs == 0))
    throw std::invalid_argument(
        "policy ordering needs a learned evaluation with a move-ordering head (pol_w, pol_b); " +
        std::string(nn ? "this one has none" : "the search has no learned evaluation"));
  if (game.size() == 8) return Searcher<8>(tt_, generation_, *scratch_, weights, game, limits, db, nn).run();
  return Searcher<6>(tt_, generation_, *scratch_, weights, game, limits, db, nn).run();
}

int evaluate(int size, const Board& board, const EvalWeights& weights) {
  if (size == 6 || size == 8) check_weights(size, weights);
  if (size == 8) return evaluate_board<8>(board, weights);
  if (size == 6) return evaluate_board<6>(board, weights);
  throw std::invalid_argument("board size must be 6 or 8, got " + std::to_string(size));
}

}  // namespace cz
