// Boards, moves and legal move generation (copy-make, generation into caller-owned arrays).
//
// A move is the whole turn: a step, or a complete capture sequence with every landing square.
// Captures are compulsory (any capture, not the longest), a capturing piece continues while it
// can, a man crowned by a jump stops there, kings step and jump in all four directions, and
// there are no flying kings. Two capture sequences over the same pieces that visit different
// squares are different moves, as in the published perft counts.
#pragma once

#include <array>
#include <cstdint>

#include "bitboard.h"

namespace cz {

struct Board {
  std::array<Bitboard, 2> pieces{};  // indexed by Color
  Bitboard kings = 0;
  Color side = Color::Black;

  Bitboard occupied() const { return pieces[0] | pieces[1]; }
  bool operator==(const Board&) const = default;
};

// Longest capture chain that can fit: every opposing man taken in one move.
constexpr int kMaxJumps = 12;
// Generous bound on legal moves in any reachable position (the worst known is far below).
constexpr int kMaxMoves = 256;

// Trivially constructible so that a MoveList costs nothing to declare; create moves with
// `Move m{}` (zeroed) where fields are filled in piecemeal.
struct Move {
  uint8_t from;
  uint8_t to;
  uint8_t jumps;  // 0 for a step, else the number of captured pieces
  Bitboard captured;
  std::array<uint8_t, kMaxJumps> path;  // landing square of each jump; path[jumps-1] == to

  bool is_capture() const { return jumps > 0; }
  bool operator==(const Move& o) const {
    if (from != o.from || to != o.to || jumps != o.jumps || captured != o.captured) return false;
    for (int i = 0; i < jumps; ++i)
      if (path[i] != o.path[i]) return false;
    return true;
  }
};

struct MoveList {
  std::array<Move, kMaxMoves> moves;  // left uninitialised: only [0, size) is ever read
  int size = 0;
  const Move* begin() const { return moves.data(); }
  const Move* end() const { return moves.data() + size; }
  const Move& operator[](int i) const { return moves[i]; }
  void push(const Move& m) {
    if (size < kMaxMoves) moves[size++] = m;
  }
};

template <int S>
Board start_board() {
  using G = Geometry<S>;
  Board b;
  b.pieces[index(Color::Black)] = G::kBlackStart;
  b.pieces[index(Color::White)] = G::kWhiteStart;
  return b;
}

namespace detail {

template <int S, Color Us>
struct Gen {
  using G = Geometry<S>;
  static constexpr Bitboard kPromotion = G::promotion_row(Us);

  // Pieces of ours that can jump in direction d right now.
  template <int D>
  static Bitboard jumpers(Bitboard movers, Bitboard them, Bitboard empty) {
    constexpr int B = opposite(D);
    return G::template shift<B>(G::template shift<B>(empty) & them) & movers;
  }

  static Bitboard all_jumpers(const Board& b, Bitboard empty) {
    const Bitboard us = b.pieces[index(Us)], them = b.pieces[index(~Us)];
    const Bitboard kings = us & b.kings;
    auto movers = [&](int d) { return is_forward(Us, d) ? us : kings; };
    return jumpers<DownLeft>(movers(DownLeft), them, empty) |
           jumpers<DownRight>(movers(DownRight), them, empty) |
           jumpers<UpLeft>(movers(UpLeft), them, empty) | jumpers<UpRight>(movers(UpRight), them, empty);
  }

  // Depth-first walk of every capture sequence from `sq`. `them` shrinks as pieces are taken;
  // `empty` keeps the origin vacated. Captured pieces stay off `empty`, which is exact here:
  // a jumping piece only ever lands on squares of the other diagonal parity from the pieces
  // it jumps, so it could never land where a captured piece stood anyway.
  template <typename Emit>
  static void walk(int sq, bool king, Bitboard them, Bitboard empty, Move& m, Emit& emit) {
    bool extended = false;
    for (int d = 0; d < kDirections; ++d) {
      if (!king && !is_forward(Us, d)) continue;
      const Bitboard over = G::shift(bit(sq), d) & them;
      if (!over) continue;
      const Bitboard land = G::shift(over, d) & empty;
      if (!land) continue;
      const int to = lsb(land);
      m.path[m.jumps++] = uint8_t(to);
      m.captured |= over;
      if (!king && (land & kPromotion)) {
        m.to = uint8_t(to);
        emit(m);  // crowning ends the move
      } else {
        walk(to, king, them & ~over, empty, m, emit);
      }
      m.captured &= ~over;
      --m.jumps;
      extended = true;
    }
    if (!extended && m.jumps > 0) {
      m.to = m.path[m.jumps - 1];
      emit(m);
    }
  }

  template <typename Emit>
  static void captures_from(const Board& b, int sq, Emit& emit) {
    const Bitboard empty = G::kAll & ~b.occupied();
    Move m{};
    m.from = uint8_t(sq);
    walk(sq, (b.kings & bit(sq)) != 0, b.pieces[index(~Us)], empty | bit(sq), m, emit);
  }

  static void generate(const Board& b, MoveList& out) {
    out.size = 0;
    const Bitboard empty = G::kAll & ~b.occupied();
    Bitboard jumpers_bb = all_jumpers(b, empty);
    if (jumpers_bb) {
      auto emit = [&](const Move& m) { out.push(m); };
      while (jumpers_bb) captures_from(b, pop_lsb(jumpers_bb), emit);
      return;
    }
    const Bitboard us = b.pieces[index(Us)];
    const Bitboard kings = us & b.kings;
    for (int d = 0; d < kDirections; ++d) {
      Bitboard targets = G::shift(is_forward(Us, d) ? us : kings, d) & empty;
      while (targets) {
        const int to = pop_lsb(targets);
        Move m{};
        m.to = uint8_t(to);
        m.from = uint8_t(lsb(G::shift(bit(to), opposite(d))));
        out.push(m);
      }
    }
  }

  // Number of legal moves, without building them where a popcount suffices (perft leaves).
  static uint64_t count(const Board& b) {
    const Bitboard empty = G::kAll & ~b.occupied();
    Bitboard jumpers_bb = all_jumpers(b, empty);
    if (jumpers_bb) {
      uint64_t n = 0;
      auto emit = [&](const Move&) { ++n; };
      while (jumpers_bb) captures_from(b, pop_lsb(jumpers_bb), emit);
      return n;
    }
    const Bitboard us = b.pieces[index(Us)];
    const Bitboard kings = us & b.kings;
    return popcount(G::template shift<DownLeft>(is_forward(Us, DownLeft) ? us : kings) & empty) +
           popcount(G::template shift<DownRight>(is_forward(Us, DownRight) ? us : kings) & empty) +
           popcount(G::template shift<UpLeft>(is_forward(Us, UpLeft) ? us : kings) & empty) +
           popcount(G::template shift<UpRight>(is_forward(Us, UpRight) ? us : kings) & empty);
  }
};

}  // namespace detail

template <int S>
void generate_moves(const Board& b, MoveList& out) {
  if (b.side == Color::Black)
    detail::Gen<S, Color::Black>::generate(b, out);
  else
    detail::Gen<S, Color::White>::generate(b, out);
}

template <int S>
uint64_t count_moves(const Board& b) {
  return b.side == Color::Black ? detail::Gen<S, Color::Black>::count(b)
                                : detail::Gen<S, Color::White>::count(b);
}

// Squares holding a piece of the side to move that can capture (empty: no capture exists).
template <int S>
Bitboard capturing_pieces(const Board& b) {
  const Bitboard empty = Geometry<S>::kAll & ~b.occupied();
  return b.side == Color::Black ? detail::Gen<S, Color::Black>::all_jumpers(b, empty)
                                : detail::Gen<S, Color::White>::all_jumpers(b, empty);
}

// Whether the move crowns a man (it ends on the far row and the piece was not a king).
template <int S>
bool crowns(const Board& b, const Move& m) {
  return !(b.kings & bit(m.from)) && (bit(m.to) & Geometry<S>::promotion_row(b.side));
}

// Applies a legal move to the board (no validation) and passes the turn.
template <int S>
void apply_move(Board& b, const Move& m) {
  const int us = index(b.side), them = us ^ 1;
  const Bitboard from = bit(m.from), to = bit(m.to);
  const bool king = b.kings & from;
  const bool crowned = !king && (to & Geometry<S>::promotion_row(b.side));
  // XOR with from ^ to (not from | to): a king's capture loop may end on its own square.
  b.pieces[us] ^= from ^ to;
  b.pieces[them] &= ~m.captured;
  b.kings &= ~m.captured;
  if (king)
    b.kings ^= from ^ to;
  else if (crowned)
    b.kings |= to;
  b.side = ~b.side;
}

template <int S>
uint64_t perft(const Board& b, int depth) {
  if (depth <= 0) return 1;
  if (depth == 1) return count_moves<S>(b);
  MoveList moves;
  generate_moves<S>(b, moves);
  uint64_t n = 0;
  for (const Move& m : moves) {
    Board child = b;
    apply_move<S>(child, m);
    n += perft<S>(child, depth - 1);
  }
  return n;
}

}  // namespace cz
