// Bitboards and board geometry for English checkers on 8x8 and on a 6x6 training board.
//
// Playable (dark) squares are numbered from Black's back rank, 0-based here (1-based in
// notation): row r holds squares r*H .. r*H+H-1 with H = side/2. Even rows sit one column to
// the right (column 2k+1), odd rows on the left edge (column 2k), so square 0 is Black's
// double corner neighbour and square N-1 White's. Black's men move "down" (towards higher
// rows), White's "up". Both boards come from the same template, so rules cannot drift apart.
#pragma once

#include <bit>
#include <cstdint>

namespace cz {

using Bitboard = uint32_t;

enum class Color : uint8_t { Black = 0, White = 1 };
constexpr Color operator~(Color c) { return Color(uint8_t(c) ^ 1); }
constexpr int index(Color c) { return int(c); }

// Absolute diagonal directions on the board as drawn with Black at the top.
enum Direction : int { DownLeft = 0, DownRight = 1, UpLeft = 2, UpRight = 3 };
constexpr int kDirections = 4;
constexpr int opposite(int d) { return 3 - d; }  // DownLeft<->UpRight, DownRight<->UpLeft

constexpr Bitboard bit(int sq) { return Bitboard(1) << sq; }
inline int lsb(Bitboard b) { return std::countr_zero(b); }
inline int popcount(Bitboard b) { return std::popcount(b); }
inline int pop_lsb(Bitboard& b) {
  int s = lsb(b);
  b &= b - 1;
  return s;
}

template <int S>
struct Geometry {
  static_assert(S == 6 || S == 8, "boards of side 6 and 8 are supported");
  static constexpr int kSide = S;
  static constexpr int kPerRow = S / 2;
  static constexpr int kSquares = S * S / 2;
  static constexpr int kActions = kSquares * kDirections;
  static constexpr int kMenPerSide = kPerRow * (S / 2 - 1);  // 12 on 8x8, 6 on 6x6
  static constexpr Bitboard kAll = kSquares == 32 ? 0xFFFFFFFFu : (bit(kSquares) - 1);

  static constexpr Bitboard row(int r) { return (bit(kPerRow) - 1) << (r * kPerRow); }
  static constexpr Bitboard rows_of_parity(int parity) {
    Bitboard b = 0;
    for (int r = parity; r < S; r += 2) b |= row(r);
    return b;
  }
  static constexpr Bitboard kEvenRows = rows_of_parity(0);
  static constexpr Bitboard kOddRows = rows_of_parity(1);
  // Edge squares from which a diagonal step would leave the board sideways.
  static constexpr Bitboard left_edge() {
    Bitboard b = 0;
    for (int r = 1; r < S; r += 2) b |= bit(r * kPerRow);
    return b;
  }
  static constexpr Bitboard right_edge() {
    Bitboard b = 0;
    for (int r = 0; r < S; r += 2) b |= bit(r * kPerRow + kPerRow - 1);
    return b;
  }
  static constexpr Bitboard kLeftEdge = left_edge();
  static constexpr Bitboard kRightEdge = right_edge();
  static constexpr Bitboard kBlackStart = row(0) | row(1) | (S == 8 ? row(2) : 0);
  static constexpr Bitboard kWhiteStart = row(S - 1) | row(S - 2) | (S == 8 ? row(S - 3) : 0);

  // The row where a man of colour c is crowned.
  static constexpr Bitboard promotion_row(Color c) { return c == Color::Black ? row(S - 1) : row(0); }

  template <int D>
  static constexpr Bitboard shift(Bitboard b) {
    constexpr int H = kPerRow;
    if constexpr (D == DownLeft)
      return (((b & kEvenRows) << H) | ((b & kOddRows & ~kLeftEdge) << (H - 1))) & kAll;
    else if constexpr (D == DownRight)
      return (((b & kEvenRows & ~kRightEdge) << (H + 1)) | ((b & kOddRows) << H)) & kAll;
    else if constexpr (D == UpLeft)
      return ((b & kEvenRows) >> H) | ((b & kOddRows & ~kLeftEdge) >> (H + 1));
    else
      return ((b & kEvenRows & ~kRightEdge) >> (H - 1)) | ((b & kOddRows) >> H);
  }
  static constexpr Bitboard shift(Bitboard b, int d) {
    switch (d) {
      case DownLeft: return shift<DownLeft>(b);
      case DownRight: return shift<DownRight>(b);
      case UpLeft: return shift<UpLeft>(b);
      default: return shift<UpRight>(b);
    }
  }

  static constexpr int row_of(int sq) { return sq / kPerRow; }
  static constexpr int col_of(int sq) { return 2 * (sq % kPerRow) + (row_of(sq) % 2 == 0 ? 1 : 0); }
  // The square at (row, col), or -1 for a light square or one off the board.
  static constexpr int square_at(int r, int c) {
    if (r < 0 || r >= S || c < 0 || c >= S || (r + c) % 2 == 0) return -1;
    return r * kPerRow + c / 2;
  }
};

// Directions a man of colour c moves in: Black down the board, White up it.
constexpr bool is_forward(Color c, int d) { return (c == Color::Black) == (d == DownLeft || d == DownRight); }

}  // namespace cz
