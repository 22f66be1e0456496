#include "game.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace cz {

namespace {

// Zobrist keys from a fixed splitmix64 stream, so hashes are stable across runs and builds.
struct Zobrist {
  uint64_t piece[2][2][32];  // [color][king][square]
  uint64_t white_to_move;
  Zobrist() {
    uint64_t x = 0x9E3779B97F4A7C15ull;
    auto next = [&x] {
      uint64_t z = (x += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return z ^ (z >> 31);
    };
    for (auto& c : piece)
      for (auto& k : c)
        for (auto& s : k) s = next();
    white_to_move = next();
  }
};
const Zobrist kZobrist;

inline uint64_t key(int color, bool king, int sq) { return kZobrist.piece[color][king][sq]; }

// A 16-bit counter plus one, stuck at kMaxCounter rather than wrapping to 0 (a game from a
// position set up near the limit must not restart its ply count or its forty-move clock).
inline uint16_t saturating_next(uint16_t c) { return uint16_t(c + (c < kMaxCounter ? 1 : 0)); }

template <int S>
struct Rules {
  using G = Geometry<S>;

  // Jump targets of the single piece on `sq` (directions it can capture in), as a bitmask.
  static int jump_dirs(const Board& b, int sq) {
    const Color us = b.side;
    const bool king = b.kings & bit(sq);
    const Bitboard them = b.pieces[index(~us)];
    const Bitboard empty = G::kAll & ~b.occupied();
    int dirs = 0;
    for (int d = 0; d < kDirections; ++d) {
      if (!king && !is_forward(us, d)) continue;
      const Bitboard over = G::shift(bit(sq), d) & them;
      if (over && (G::shift(over, d) & empty)) dirs |= 1 << d;
    }
    return dirs;
  }

  static int step_dirs(const Board& b, int sq) {
    const bool king = b.kings & bit(sq);
    const Bitboard empty = G::kAll & ~b.occupied();
    int dirs = 0;
    for (int d = 0; d < kDirections; ++d) {
      if (!king && !is_forward(b.side, d)) continue;
      if (G::shift(bit(sq), d) & empty) dirs |= 1 << d;
    }
    return dirs;
  }

  // Legal (square, direction) pairs of the side to move; `jumps` tells whether they are jumps.
  template <typename Emit>
  static void for_each_action(const State& s, Emit&& emit) {
    const Board& b = s.board;
    if (s.jumping >= 0) {
      int dirs = jump_dirs(b, s.jumping);
      for (int d = 0; d < kDirections; ++d)
        if (dirs & (1 << d)) emit(int(s.jumping), d);
      return;
    }
    Bitboard jumpers = capturing_pieces<S>(b);
    const bool capture = jumpers != 0;
    Bitboard movers = capture ? jumpers : b.pieces[index(b.side)];
    while (movers) {
      const int sq = pop_lsb(movers);
      const int dirs = capture ? jump_dirs(b, sq) : step_dirs(b, sq);
      for (int d = 0; d < kDirections; ++d)
        if (dirs & (1 << d)) emit(sq, d);
    }
  }

  static bool capture_mode(const State& s) { return s.jumping >= 0 || capturing_pieces<S>(s.board) != 0; }

  // One action: a step, or a single jump that may leave the same side to move mid-jump.
  static void step(State& s, int sq, int d) {
    Board& b = s.board;
    const int us = index(b.side), them = us ^ 1;
    const bool king = b.kings & bit(sq);
    const bool capture = capture_mode(s);
    const Bitboard from = bit(sq);
    const Bitboard over = capture ? G::shift(from, d) : 0;
    const Bitboard to = capture ? G::shift(over, d) : G::shift(from, d);
    const int to_sq = lsb(to);
    b.pieces[us] ^= from | to;
    s.hash ^= key(us, king, sq) ^ key(us, king, to_sq);
    if (king) b.kings ^= from | to;
    if (over) {
      const int over_sq = lsb(over);
      s.hash ^= key(them, (b.kings & over) != 0, over_sq);
      b.pieces[them] &= ~over;
      b.kings &= ~over;
    }
    const bool crowned = !king && (to & G::promotion_row(b.side));
    if (crowned) {
      b.kings |= to;
      s.hash ^= key(us, false, to_sq) ^ key(us, true, to_sq);
    }
    if (capture && !crowned && jump_dirs(b, to_sq)) {
      s.jumping = int8_t(to_sq);  // the same player continues the jump
      return;
    }
    s.jumping = -1;
    s.no_progress = (capture || !king) ? 0 : saturating_next(s.no_progress);
    s.ply = saturating_next(s.ply);
    b.side = ~b.side;
    s.hash ^= kZobrist.white_to_move;
  }

  static void make(State& s, const Move& m) {
    Board& b = s.board;
    const bool man_moved = !(b.kings & bit(m.from));
    apply_move<S>(b, m);
    s.hash = zobrist_hash(b);
    s.no_progress = (m.is_capture() || man_moved) ? 0 : saturating_next(s.no_progress);
    s.ply = saturating_next(s.ply);
    s.jumping = -1;
  }

  static int direction_between(int from, int to, bool jump) {
    for (int d = 0; d < kDirections; ++d) {
      Bitboard t = G::shift(bit(from), d);
      if (jump) t = G::shift(t, d);
      if (t == bit(to)) return d;
    }
    return -1;
  }
};

template <typename F>
decltype(auto) dispatch(int size, F&& f) {
  if (size == 8) return f(std::integral_constant<int, 8>{});
  if (size == 6) return f(std::integral_constant<int, 6>{});
  throw std::invalid_argument("board size must be 6 or 8, got " + std::to_string(size));
}

}  // namespace

uint64_t zobrist_hash(const Board& b) {
  uint64_t h = b.side == Color::White ? kZobrist.white_to_move : 0;
  for (int c = 0; c < 2; ++c) {
    Bitboard p = b.pieces[c];
    while (p) {
      const int sq = pop_lsb(p);
      h ^= key(c, (b.kings & bit(sq)) != 0, sq);
    }
  }
  return h;
}

namespace {

std::string square_list(Bitboard b) {  // "square 5" or "squares 5, 9, 12" (1-based)
  std::string out = popcount(b) == 1 ? "square " : "squares ";
  while (b) {
    const int sq = pop_lsb(b);
    out += std::to_string(sq + 1) + (b ? ", " : "");
  }
  return out;
}

// The meta word's fields (see pack_meta()); every other bit must be clear.
constexpr uint32_t kMetaSide = 1u;
constexpr uint32_t kMetaJumping = 0x3Fu << 1;
constexpr uint32_t kMetaProgress = 0xFFu << 8;
constexpr uint32_t kMetaPresent = 1u << 16;
constexpr uint32_t kMetaKnown = kMetaSide | kMetaJumping | kMetaProgress | kMetaPresent;

}  // namespace

std::string board_error(int size, const Board& b) {
  return dispatch(size, [&](auto sz) -> std::string {
    using G = Geometry<decltype(sz)::value>;
    const Bitboard black = b.pieces[index(Color::Black)], white = b.pieces[index(Color::White)];
    // The common case first, with no strings built: this runs for every packed state handed in.
    const Bitboard men = (black | white) & ~b.kings;
    if (!((black | white | b.kings) & ~G::kAll) && !(black & white) && !(b.kings & ~(black | white)) &&
        !(men & black & G::promotion_row(Color::Black)) && !(men & white & G::promotion_row(Color::White)) &&
        popcount(black) <= G::kMenPerSide && popcount(white) <= G::kMenPerSide)
      return {};
    const std::string board = std::to_string(G::kSide) + "x" + std::to_string(G::kSide) + " board";
    if (const Bitboard off = (black | white | b.kings) & ~G::kAll) {
      std::string bits = popcount(off) == 1 ? "bit " : "bits ";
      for (Bitboard x = off; x;) {
        const int sq = pop_lsb(x);
        bits += std::to_string(sq) + (x ? ", " : "");
      }
      return "pieces off the " + board + " (" + bits + ")";
    }
    if (const Bitboard both = black & white) return square_list(both) + ": both a black and a white piece";
    if (const Bitboard lone = b.kings & ~(black | white))
      return "kings on empty squares (" + square_list(lone) + ")";
    if (const Bitboard m = black & ~b.kings & G::promotion_row(Color::Black))
      return "black men on White's back rank (" + square_list(m) + ") would have been crowned";
    if (const Bitboard m = white & ~b.kings & G::promotion_row(Color::White))
      return "white men on Black's back rank (" + square_list(m) + ") would have been crowned";
    for (const Color c : {Color::Black, Color::White})
      if (popcount(b.pieces[index(c)]) > G::kMenPerSide)
        return std::to_string(popcount(b.pieces[index(c)])) + (c == Color::Black ? " black" : " white") +
               " pieces: at most " + std::to_string(G::kMenPerSide) + " a side on the " + board;
    return {};
  });
}

uint32_t pack_meta(const State& s) {
  return uint32_t(s.board.side == Color::White) | (uint32_t(s.jumping + 1) << 1) |
         (uint32_t(std::min<int>(s.no_progress, 255)) << 8) | (1u << 16);
}

void pack_state(const State& s, uint32_t* out) {
  out[0] = s.board.pieces[0];
  out[1] = s.board.pieces[1];
  out[2] = s.board.kings;
  out[3] = pack_meta(s);
}

State unpack_state(const uint32_t* in) {
  State s;
  s.board.pieces[0] = in[0];
  s.board.pieces[1] = in[1];
  s.board.kings = in[2];
  s.board.side = (in[3] & 1) ? Color::White : Color::Black;
  s.jumping = int8_t(int((in[3] >> 1) & 0x3F) - 1);
  s.no_progress = uint16_t((in[3] >> 8) & 0xFF);
  s.hash = zobrist_hash(s.board);
  return s;
}

Game::Game(int size, int max_plies) : size_(size), max_plies_(max_plies) {
  if (max_plies < 0 || max_plies > kMaxCounter)
    throw std::invalid_argument("max_plies must be in [0, " + std::to_string(kMaxCounter) + "], got " +
                                std::to_string(max_plies));
  st_.board = dispatch(size, [](auto s) { return start_board<decltype(s)::value>(); });
  st_.hash = zobrist_hash(st_.board);
}

Game Game::from_board(int size, const Board& board, int max_plies, int no_progress, int ply, int jumping) {
  Game g(size, max_plies);
  if (const std::string why = board_error(size, board); !why.empty())
    throw std::invalid_argument("not a position: " + why);
  if (no_progress < 0 || no_progress > kMaxPliesWithoutProgress)
    throw std::invalid_argument("no_progress must be in [0, " + std::to_string(kMaxPliesWithoutProgress) +
                                "] (plies), got " + std::to_string(no_progress));
  if (ply < 0 || ply > kMaxCounter)
    throw std::invalid_argument("ply must be in [0, " + std::to_string(kMaxCounter) + "], got " +
                                std::to_string(ply));
  if (jumping != -1) {
    const std::string where = "jumping square " + std::to_string(jumping + 1);
    if (jumping < 0 || jumping >= g.num_squares())
      throw std::invalid_argument(where + " is off the board (1.." + std::to_string(g.num_squares()) + ")");
    if (!(board.pieces[index(board.side)] & bit(jumping)))
      throw std::invalid_argument(where + " holds no piece of the side to move");
    const int dirs =
        dispatch(size, [&](auto s) { return Rules<decltype(s)::value>::jump_dirs(board, jumping); });
    if (!dirs) throw std::invalid_argument(where + ": its piece has no capture to go on with");
  }
  g.st_.board = board;
  g.st_.hash = zobrist_hash(board);
  g.st_.no_progress = uint16_t(no_progress);
  g.st_.ply = uint16_t(ply);
  g.st_.jumping = int8_t(jumping);
  return g;
}

void Game::legal_moves(MoveList& out) const {
  if (mid_jump()) throw std::logic_error("legal_moves() in the middle of a multi-jump");
  dispatch(size_, [&](auto s) { generate_moves<decltype(s)::value>(st_.board, out); });
}

bool Game::is_legal_move(const Move& m) const {
  if (mid_jump()) return false;
  if (!m.is_capture()) {  // a step, checked directly (most moves; cheaper than generating them all)
    return dispatch(size_, [&](auto sz) {
      constexpr int S = decltype(sz)::value;
      using G = Geometry<S>;
      const Board& b = st_.board;
      if (m.captured || m.from >= G::kSquares || m.to >= G::kSquares) return false;
      const Bitboard from = bit(m.from), to = bit(m.to);
      if (!(b.pieces[index(b.side)] & from) || (b.occupied() & to)) return false;
      if (capturing_pieces<S>(b)) return false;  // a capture is compulsory
      const bool king = b.kings & from;
      for (int d = 0; d < kDirections; ++d)
        if ((king || is_forward(b.side, d)) && G::shift(from, d) == to) return true;
      return false;
    });
  }
  MoveList moves;
  legal_moves(moves);
  for (const Move& legal : moves)
    if (legal == m) return true;
  return false;
}

void Game::make(const Move& m) {
  if (mid_jump()) throw std::logic_error("make() in the middle of a multi-jump");
  stack_.push_back(st_);
  dispatch(size_, [&](auto s) { Rules<decltype(s)::value>::make(st_, m); });
}

void Game::undo() {
  if (stack_.empty()) throw std::logic_error("nothing to undo");
  st_ = stack_.back();
  stack_.pop_back();
}

int Game::repetitions() const {
  if (mid_jump()) return 1;
  int n = 1;
  // Only positions since the last capture or man move can repeat; each earlier turn boundary
  // of the same side to move is two plies back.
  int plies_back = st_.no_progress;
  for (auto it = stack_.rbegin(); it != stack_.rend() && plies_back > 0; ++it) {
    if (it->jumping >= 0) continue;
    --plies_back;
    if (it->hash == st_.hash && it->board == st_.board) ++n;
  }
  return n;
}

EndReason Game::end_reason() const {
  if (mid_jump()) return EndReason::None;
  const uint64_t n = dispatch(size_, [&](auto s) { return count_moves<decltype(s)::value>(st_.board); });
  if (n == 0) return EndReason::NoMoves;
  if (repetitions() >= kRepetitionsForDraw) return EndReason::Repetition;
  if (st_.no_progress >= kMaxPliesWithoutProgress) return EndReason::NoProgress;
  if (max_plies_ > 0 && st_.ply >= max_plies_) return EndReason::PlyCap;
  return EndReason::None;
}

Result Game::result() const {
  switch (end_reason()) {
    case EndReason::None: return Result::Ongoing;
    case EndReason::NoMoves: return st_.board.side == Color::Black ? Result::WhiteWin : Result::BlackWin;
    default: return Result::Draw;
  }
}

int action_of(int size, Color side, int square, int direction) {
  const int n = size * size / 2;
  if (side == Color::Black) return square * kDirections + direction;
  return (n - 1 - square) * kDirections + (3 - direction);
}

void decode_action(int size, Color side, int action, int& square, int& direction) {
  const int n = size * size / 2;
  square = action / kDirections;
  direction = action % kDirections;
  if (side == Color::White) {
    square = n - 1 - square;
    direction = 3 - direction;
  }
}

int Game::legal_actions(int* out) const {
  int k = 0;
  dispatch(size_, [&](auto s) {
    Rules<decltype(s)::value>::for_each_action(st_, [&](int sq, int d) {
      out[k++] = action_of(size_, st_.board.side, sq, d);
    });
  });
  return k;
}

void Game::legal_action_mask(uint8_t* mask) const {
  std::memset(mask, 0, num_actions());
  dispatch(size_, [&](auto s) {
    Rules<decltype(s)::value>::for_each_action(
        st_, [&](int sq, int d) { mask[action_of(size_, st_.board.side, sq, d)] = 1; });
  });
}

bool Game::is_legal_action(int action) const {
  if (action < 0 || action >= num_actions()) return false;
  bool found = false;  // no allocation: this checks every action a user or PDN hands in
  dispatch(size_, [&](auto s) {
    Rules<decltype(s)::value>::for_each_action(
        st_, [&](int sq, int d) { found |= action_of(size_, st_.board.side, sq, d) == action; });
  });
  return found;
}

void Game::step(int action) {
  int sq, d;
  decode_action(size_, st_.board.side, action, sq, d);
  stack_.push_back(st_);
  dispatch(size_, [&](auto s) { Rules<decltype(s)::value>::step(st_, sq, d); });
}

std::vector<int> Game::actions_of(const Move& m) const {
  return dispatch(size_, [&](auto s) {
    using R = Rules<decltype(s)::value>;
    std::vector<int> actions;
    const Color side = st_.board.side;
    if (!m.is_capture()) {
      actions.push_back(action_of(size_, side, m.from, R::direction_between(m.from, m.to, false)));
      return actions;
    }
    int at = m.from;
    for (int i = 0; i < m.jumps; ++i) {
      actions.push_back(action_of(size_, side, at, R::direction_between(at, m.path[i], true)));
      at = m.path[i];
    }
    return actions;
  });
}

Move Game::move_of(const std::vector<int>& actions) const {
  if (mid_jump()) throw std::logic_error("move_of() in the middle of a multi-jump");
  if (actions.empty()) throw std::invalid_argument("empty action sequence");
  Game scratch = *this;
  Move m{};
  const Color side = st_.board.side;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (i > 0 && !scratch.mid_jump())
      throw std::invalid_argument("action " + std::to_string(actions[i]) + " at index " +
                                  std::to_string(i) + " follows a completed move");
    if (!scratch.is_legal_action(actions[i]))
      throw std::invalid_argument("illegal action " + std::to_string(actions[i]) + " at index " +
                                  std::to_string(i));
    int sq, d;
    decode_action(size_, side, actions[i], sq, d);
    const Board before = scratch.board();
    const bool capture = dispatch(size_, [&](auto s) {
      return Rules<decltype(s)::value>::capture_mode(scratch.state());
    });
    scratch.step(actions[i]);
    if (i == 0) m.from = uint8_t(sq);
    const Bitboard moved = before.pieces[index(side)] & ~scratch.board().pieces[index(side)];
    const Bitboard arrived = scratch.board().pieces[index(side)] & ~before.pieces[index(side)];
    (void)moved;
    m.to = uint8_t(lsb(arrived));
    if (capture) {
      m.path[m.jumps++] = m.to;
      m.captured |= before.pieces[index(~side)] & ~scratch.board().pieces[index(~side)];
    }
  }
  if (scratch.mid_jump()) throw std::invalid_argument("action sequence stops in the middle of a multi-jump");
  return m;
}

void Game::pack_history(uint32_t* out) const {
  pack_state(st_, out);
  const int n = int(stack_.size());
  for (int k = 1; k < kHistory; ++k) {
    uint32_t* slot = out + k * kPackedWords;
    if (n - k >= 0)
      pack_state(stack_[n - k], slot);
    else
      std::memset(slot, 0, kPackedWords * sizeof(uint32_t));
  }
}

uint64_t perft(int size, const Board& b, int depth) {
  if (depth < 0 || depth > kMaxPerftDepth)
    throw std::invalid_argument("perft depth must be in [0, " + std::to_string(kMaxPerftDepth) + "], got " +
                                std::to_string(depth));
  return dispatch(size, [&](auto s) { return perft<decltype(s)::value>(b, depth); });
}

namespace {

// Why the packed state `w`, whose meta word marks a position, is not one ("" when it is): unknown
// meta bits, board_error(), a no-progress count above the rule's, a mid-jump square off the board
// or holding no piece of the side to move.
std::string present_state_error(int size, const uint32_t* w) {
  const uint32_t meta = w[3];
  if (meta & ~kMetaKnown)
    return "unknown bits set in the meta word (" + std::to_string(meta & ~kMetaKnown) + ")";
  Board b;
  b.pieces[0] = w[0];
  b.pieces[1] = w[1];
  b.kings = w[2];
  b.side = (meta & kMetaSide) ? Color::White : Color::Black;
  if (std::string why = board_error(size, b); !why.empty()) return why;
  const int squares = dispatch(size, [](auto sz) { return Geometry<decltype(sz)::value>::kSquares; });
  const int jumping = int((meta & kMetaJumping) >> 1) - 1;
  const int no_progress = int((meta >> 8) & 0xFF);
  if (no_progress > kMaxPliesWithoutProgress)
    return "a no-progress count of " + std::to_string(no_progress) + " plies, above " +
           std::to_string(kMaxPliesWithoutProgress);
  if (jumping >= squares) return "mid-jump square " + std::to_string(jumping + 1) + " is off the board";
  if (jumping >= 0 && !(b.pieces[index(b.side)] & bit(jumping)))
    return "mid-jump square " + std::to_string(jumping + 1) + " holds no piece of the side to move";
  return {};
}

}  // namespace

void check_packed(int size, const uint32_t* packed, size_t n, int stride_slots, int check_slots,
                  bool require_first) {
  for (size_t i = 0; i < n; ++i) {
    for (int k = 0; k < check_slots; ++k) {
      const uint32_t* w = packed + (i * size_t(stride_slots) + size_t(k)) * kPackedWords;
      const uint32_t meta = w[3];
      std::string why;
      if (!(meta & kMetaPresent)) {
        if (k == 0 && require_first)
          why = "the newest slot holds no position (meta bit 16 clear)";
        else if (w[0] | w[1] | w[2] | meta)
          why = "a slot without a position (meta bit 16 clear) must be all zeros";
      } else {
        why = present_state_error(size, w);
      }
      if (!why.empty())
        throw std::invalid_argument("packed state " + std::to_string(i) + ", slot " + std::to_string(k) +
                                    ": " + why);
    }
  }
}

Game Game::from_packed(int size, const uint32_t* words, int max_plies, int ply) {
  if (!(words[3] & kMetaPresent))
    throw std::invalid_argument("the packed state holds no position (meta bit 16 clear)");
  if (const std::string why = present_state_error(size, words); !why.empty())
    throw std::invalid_argument("not a position: " + why);
  const State s = unpack_state(words);
  return from_board(size, s.board, max_plies, s.no_progress, ply, s.jumping);  // + can it jump on
}

void encode_packed(int size, const uint32_t* packed, int n, float* out) {
  dispatch(size, [&](auto s) {
    using G = Geometry<decltype(s)::value>;
    constexpr int S = G::kSide, N = G::kSquares, kArea = S * S;
    static_assert(kNumPlanes == 15, "update the plane documentation in game/encoding.py");
    std::memset(out, 0, sizeof(float) * size_t(n) * kNumPlanes * kArea);
    for (int i = 0; i < n; ++i) {
      const uint32_t* sample = packed + size_t(i) * kHistory * kPackedWords;
      float* planes = out + size_t(i) * kNumPlanes * kArea;
      const uint32_t meta = sample[3];
      const bool white = meta & 1;
      const int us = white ? 1 : 0;
      // Mover's view: White sees the board rotated by 180 degrees.
      auto cell = [&](int sq) {
        const int rel = white ? N - 1 - sq : sq;
        return G::row_of(rel) * S + G::col_of(rel);
      };
      for (int k = 0; k < kHistory; ++k) {
        const uint32_t* slot = sample + k * kPackedWords;
        if (!(slot[3] & (1u << 16))) continue;  // before the game's first position
        float* base = planes + k * kPlanesPerSlot * kArea;
        const Bitboard kings = slot[2];
        for (int c = 0; c < 2; ++c) {
          Bitboard p = slot[c];
          const int offset = (c == us ? 0 : 2);
          while (p) {
            const int sq = pop_lsb(p);
            base[(offset + ((kings & bit(sq)) ? 1 : 0)) * kArea + cell(sq)] = 1.0f;
          }
        }
      }
      const float progress = float((meta >> 8) & 0xFF) / float(kMaxPliesWithoutProgress);
      float* p_progress = planes + (kPlanesPerSlot * kHistory) * kArea;
      float* p_jump = p_progress + kArea;
      float* p_ones = p_jump + kArea;
      for (int j = 0; j < kArea; ++j) {
        p_progress[j] = progress;
        p_ones[j] = 1.0f;
      }
      const int jumping = int((meta >> 1) & 0x3F) - 1;
      if (jumping >= 0) p_jump[cell(jumping)] = 1.0f;
    }
  });
}

void legal_mask_packed(int size, const uint32_t* packed, int n, int stride_words, uint8_t* out) {
  const int actions = size * size / 2 * kDirections;
  for (int i = 0; i < n; ++i) {
    const State s = unpack_state(packed + size_t(i) * stride_words);
    uint8_t* mask = out + size_t(i) * actions;
    std::memset(mask, 0, actions);
    dispatch(size, [&](auto sz) {
      Rules<decltype(sz)::value>::for_each_action(
          s, [&](int sq, int d) { mask[action_of(size, s.board.side, sq, d)] = 1; });
    });
  }
}

}  // namespace cz
