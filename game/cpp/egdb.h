// Endgame database: win/draw/loss for the side to move in every position of few pieces.
//
// Positions are grouped by material signature (black men, black kings, white men, white kings).
// Only positions with Black to move are stored: a position with White to move is the same
// position seen from the other side (the board turned 180 degrees, colours swapped), so it is
// looked up as Black to move under the swapped signature. The rules are the core's own move
// generation (movegen.h): compulsory captures, multi-jumps, crowning ends the move; no 40-move
// or repetition rule (as in the published databases).
//
// Index. Each signature has a perfect index: every index names one legal placement and every
// placement one index (men never stand on their own crowning row; pieces never share a square).
// A placement is ranked as a mixed-radix number over combinatorial (colex) ranks of each group of
// pieces among the squares still free for it; black men are split by how many stand on Black's
// back row (the only row where white men cannot be), which makes the white men's free squares
// exact. The sizes summed over signatures are OEIS A055213.
//
// Solving. Signatures pair with their colour swaps: a quiet move (no capture, no crowning) from
// a position in signature A leads to the swapped signature, anything else to a signature with
// fewer pieces or fewer men, solved earlier. A pair is solved by retrograde analysis: one forward
// pass looks up every move leaving the pair and counts the moves inside it, a second records the
// reverse edges, then wins and losses propagate back through those edges; what never resolves
// is a draw.
//
// Distances. Beside its value, each won or lost position gets its distance to conversion (DTC):
// plies until the game leaves the slice pair by a capture or a crowning (or ends), with the
// winner converting as soon as it can and the loser holding out as long as it can: a win in d
// plies has a move to a loss in d - 1 (or a winning capture or crowning, d = 1); a loss in d
// plies has every move to a win in at most d - 1. Each conversion lands in a slice with fewer
// pieces or fewer men, so playing the smallest distance always wins; and since a crowning or a
// capture resets the 40-move count, a win whose distances stay under 80 plies is won within it.
// The retrograde pass computes them by propagating in order of distance (a FIFO queue seeded in
// order of distance). Draws store 0.
//
// Files. One file per signature: a 64-byte header (magic, format version, board side,
// signature, position count, payload length, CRC-32 of the payload, CRC-32 of the header) and
// the values at 2 bits a position. Files are memory-mapped read-only; a file with a wrong magic,
// version, board, signature, length or checksum is refused with an error naming the file.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "movegen.h"

namespace cz::egdb {

// Value of a position for the side to move. Stored as 2 bits; 0 never appears in a finished file.
enum Value : uint8_t { kUnknown = 0, kWin = 1, kLoss = 2, kDraw = 3 };

constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 64;
constexpr int kPositionsPerByte = 4;  // 2 bits each

struct Signature {
  int bm = 0, bk = 0, wm = 0, wk = 0;  // black men, black kings, white men, white kings
  int pieces() const { return bm + bk + wm + wk; }
  int men() const { return bm + wm; }
  Signature swapped() const { return {wm, wk, bm, bk}; }
  bool operator==(const Signature&) const = default;
  std::string name() const;  // "1-2-0-1"
};

// Whether the signature can occur on a board of side `size` (men fit on their squares).
bool valid_signature(int size, const Signature& s);
// Every valid signature with 1..max_pieces pieces, in an order in which every signature comes
// after all those a move from it can reach (fewer pieces first, then fewer men).
std::vector<Signature> signatures(int size, int max_pieces);
// Signatures other than s and s.swapped() that a move from s or s.swapped() can lead to.
std::vector<Signature> dependencies(int size, const Signature& s);

uint64_t index_size(int size, const Signature& s);
Signature signature_of(const Board& b);  // the board's material, Black's pieces first
// Index of a Black-to-move board under its own signature.
uint64_t index_of(int size, const Board& b);
// The Black-to-move board at `index` under signature s.
Board board_at(int size, const Signature& s, uint64_t index);
// The same position seen from the other side: turned 180 degrees, colours swapped.
Board flip(int size, const Board& b);

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);  // zlib's CRC-32

std::string file_name(int size, const Signature& s);  // "8x8_1-2-0-1.egdb"
std::string distance_file_name(int size, const Signature& s);  // "8x8_1-2-0-1.dtc"
constexpr uint32_t kDistanceFormatVersion = 1;

// One signature's values, memory-mapped from its file (or, while building, held in memory).
class Table {
 public:
  // Maps and checks the file: magic, version, board side, signature, length, checksums.
  // Throws std::runtime_error naming the file and what is wrong.
  static std::unique_ptr<Table> open(const std::string& path, int size, const Signature& s);
  ~Table();
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  Value get(uint64_t index) const { return Value((data_[index >> 2] >> ((index & 3) * 2)) & 3); }
  uint64_t count() const { return count_; }
  const Signature& signature() const { return sig_; }
  uint64_t file_bytes() const { return map_bytes_; }

 private:
  Table() = default;
  const uint8_t* data_ = nullptr;
  void* map_ = nullptr;
  uint64_t map_bytes_ = 0;
  uint64_t count_ = 0;
  Signature sig_;
};

// Packs values (one byte each, 1..3) at 2 bits and writes the file under a temporary name, then
// renames it into place (a killed build never leaves a partial file under the final name).
void write_table(const std::string& path, int size, const Signature& s, const std::vector<uint8_t>& values);
// Writes `out` to `path` whole or not at all: a temporary file in the same folder, flushed to
// disk, renamed over `path`. Throws std::runtime_error naming the file on any fault.
void write_file_atomically(const std::string& path, const std::vector<uint8_t>& out);

// One signature's distances to conversion (see the top of this file), memory-mapped.
class DistanceTable {
 public:
  // Maps and checks the file as Table::open does, under the distance file's own magic and version.
  static std::unique_ptr<DistanceTable> open(const std::string& path, int size, const Signature& s);
  ~DistanceTable();
  DistanceTable(const DistanceTable&) = delete;
  DistanceTable& operator=(const DistanceTable&) = delete;

  int get(uint64_t index) const {
    return width_ == 1 ? data_[index] : int(data_[2 * index]) | (int(data_[2 * index + 1]) << 8);
  }
  uint64_t count() const { return count_; }
  int width() const { return width_; }  // bytes an entry
  uint64_t file_bytes() const { return map_bytes_; }

 private:
  DistanceTable() = default;
  const uint8_t* data_ = nullptr;
  void* map_ = nullptr;
  uint64_t map_bytes_ = 0;
  uint64_t count_ = 0;
  int width_ = 1;
};

// Writes the distances (0..65535) at 1 byte each when they fit, else 2; temporary name, renamed.
void write_distances(const std::string& path, int size, const Signature& s,
                     const std::vector<uint16_t>& dist);

// The value of a position and its distance to conversion in plies (-1 when the database holds no
// distances for it; 0 for a draw or a position with no move).
struct Probe {
  Value value = kUnknown;
  int distance = -1;
};

// The database of one board side: every signature file of up to max_pieces pieces in a folder.
class Database {
 public:
  // Opens and checks every file up front; throws naming the first missing or bad file.
  Database(const std::string& dir, int size, int max_pieces, bool distances = false);
  // Opens whatever signature files are present (used while building: dependencies only).
  Database(const std::string& dir, int size);
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  int size() const { return size_; }
  int max_pieces() const { return max_pieces_; }
  uint64_t bytes() const;
  // Value for the side to move, or kUnknown when the position has more pieces than the
  // database (or its signature file is absent).
  Value probe(const Board& b) const;
  // The value of a Black-to-move board that is in the database (no checks).
  Value probe_black(const Board& b) const;
  // probe() with the distance to conversion, when the distance files are loaded.
  Probe probe_distance(const Board& b) const;
  bool has(const Signature& s) const;
  void load(const Signature& s);  // maps the signature's file; throws if missing or bad
  void load_distances(const Signature& s);  // maps its distance file; throws if missing or bad
  bool distances() const { return distances_; }  // every signature's distances are loaded

 private:
  static int slot(const Signature& s) { return ((s.bm * 16 + s.bk) * 16 + s.wm) * 16 + s.wk; }
  std::string dir_;
  int size_;
  int max_pieces_ = 0;
  std::vector<std::unique_ptr<Table>> tables_;  // by slot()
  std::vector<std::unique_ptr<DistanceTable>> dist_;  // by slot()
  bool distances_ = false;
};

struct SolveStats {
  uint64_t positions = 0;  // in the pair (both signatures)
  uint64_t wins = 0, losses = 0, draws = 0;
  int longest_win = 0, longest_loss = 0;  // largest distances to conversion, in plies
};

// Solves signature s and its swap (a value file and a distance file each, once if s is its own
// swap) into dir, reading the dependencies' value files from dir. Returns counts of the results.
SolveStats solve_pair(const std::string& dir, int size, const Signature& s);

// Checks every stored position of signature s against its successors by a plain minimax step
// over the core's moves and the database's values (and, when loaded, distances); returns the
// number of positions that disagree (0 for a correct database).
uint64_t verify_signature(const Database& db, const Signature& s);

}  // namespace cz::egdb
