// Endgame database: index, files, retrograde solver and verifier. See egdb.h.
#include "egdb.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace cz::egdb {

namespace {

constexpr char kMagic[8] = {'C', 'Z', 'E', 'G', 'D', 'B', '\x1a', '\n'};
constexpr int kMaxSquares = 32;
// Bit 2 of a value byte while solving: some move reaches a drawn position outside the pair.
constexpr uint8_t kDrawSeen = 4;

struct Binomials {
  uint64_t c[kMaxSquares + 1][kMaxSquares + 1] = {};
  constexpr Binomials() {
    for (int n = 0; n <= kMaxSquares; ++n) {
      c[n][0] = 1;
      for (int k = 1; k <= n; ++k) c[n][k] = c[n - 1][k - 1] + (k <= n - 1 ? c[n - 1][k] : 0);
    }
  }
};
constexpr Binomials kBinom;
inline uint64_t choose(int n, int k) {
  return (n < 0 || k < 0 || k > n) ? 0 : kBinom.c[n][k];
}

// Squares of a board side: all, Black's back row (white men never stand there), the middle
// rows (either side's men), the squares white men may use.
struct Layout {
  int n, h, mid;
  Bitboard all, back, middle, white_men;
  explicit Layout(int size) {
    if (size != 6 && size != 8)
      throw std::invalid_argument("board size must be 6 or 8, got " + std::to_string(size));
    n = size * size / 2;
    h = size / 2;
    mid = n - 2 * h;
    all = n == 32 ? 0xFFFFFFFFu : (bit(n) - 1);
    back = bit(h) - 1;
    white_men = all & ~back;
    middle = white_men & (all >> h);  // rows 1 .. side-2
  }
};

// Colex rank of the squares of x among the squares of `allowed` (x a subset of allowed).
inline uint64_t rank(Bitboard x, Bitboard allowed) {
  uint64_t r = 0;
  int i = 1;
  while (x) {
    const int s = pop_lsb(x);
    r += choose(popcount(allowed & (bit(s) - 1)), i++);
  }
  return r;
}

inline int select_bit(Bitboard a, int c) {
  while (c-- > 0) a &= a - 1;
  return lsb(a);
}

// The k squares of `allowed` whose colex rank is r.
inline Bitboard unrank(uint64_t r, int k, Bitboard allowed) {
  Bitboard out = 0;
  int hi = popcount(allowed);
  for (int i = k; i >= 1; --i) {
    int c = hi - 1;
    while (choose(c, i) > r) --c;
    r -= choose(c, i);
    out |= bit(select_bit(allowed, c));
    hi = c;
  }
  return out;
}

// Sizes of the mixed-radix digits of a signature for k black men on the back row.
struct Radix {
  uint64_t back, mid, wm, bk, wk;
  uint64_t total() const { return back * mid * wm * bk * wk; }
};
inline Radix radix(const Layout& L, const Signature& s, int k) {
  const int mid_men = s.bm - k;
  return {choose(L.h, k), choose(L.mid, mid_men), choose(L.n - L.h - mid_men, s.wm),
          choose(L.n - s.bm - s.wm, s.bk), choose(L.n - s.bm - s.wm - s.bk, s.wk)};
}

inline uint32_t reverse_bits(uint32_t x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  x = ((x >> 8) & 0x00FF00FFu) | ((x & 0x00FF00FFu) << 8);
  return (x >> 16) | (x << 16);
}

struct CrcTable {
  uint32_t t[256] = {};
  constexpr CrcTable() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
  }
};
constexpr CrcTable kCrc;

template <typename T>
void store_le(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

uint64_t payload_bytes(uint64_t count) {
  return (count + kPositionsPerByte - 1) / kPositionsPerByte;
}

void fill_header(uint8_t* h, int size, const Signature& s, uint64_t count, uint32_t payload_crc) {
  std::memset(h, 0, kHeaderBytes);
  std::memcpy(h, kMagic, sizeof(kMagic));
  store_le<uint32_t>(h + 8, kFormatVersion);
  store_le<uint32_t>(h + 12, uint32_t(size));
  h[16] = uint8_t(s.bm);
  h[17] = uint8_t(s.bk);
  h[18] = uint8_t(s.wm);
  h[19] = uint8_t(s.wk);
  store_le<uint32_t>(h + 20, payload_crc);
  store_le<uint64_t>(h + 24, count);
  store_le<uint64_t>(h + 32, payload_bytes(count));
  store_le<uint32_t>(h + 40, crc32(h, 40));
}

}  // namespace

std::string Signature::name() const {
  return std::to_string(bm) + "-" + std::to_string(bk) + "-" + std::to_string(wm) + "-" + std::to_string(wk);
}

std::string file_name(int size, const Signature& s) {
  return std::to_string(size) + "x" + std::to_string(size) + "_" + s.name() + ".egdb";
}

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = kCrc.t[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

bool valid_signature(int size, const Signature& s) {
  const Layout L(size);
  if (s.bm < 0 || s.bk < 0 || s.wm < 0 || s.wk < 0 || s.pieces() == 0) return false;
  if (s.bm > L.n - L.h || s.wm > L.n - L.h || s.pieces() > L.n) return false;
  return std::max({s.bm, s.bk, s.wm, s.wk}) < 16 && index_size(size, s) > 0;
}

uint64_t index_size(int size, const Signature& s) {
  const Layout L(size);
  uint64_t n = 0;
  for (int k = 0; k <= std::min(s.bm, L.h); ++k) n += radix(L, s, k).total();
  return n;
}

std::vector<Signature> signatures(int size, int max_pieces) {
  std::vector<Signature> out;
  for (int p = 1; p <= max_pieces; ++p)
    for (int bm = 0; bm <= p; ++bm)
      for (int bk = 0; bm + bk <= p; ++bk)
        for (int wm = 0; bm + bk + wm <= p; ++wm) {
          const Signature s{bm, bk, wm, p - bm - bk - wm};
          if (valid_signature(size, s)) out.push_back(s);
        }
  std::stable_sort(out.begin(), out.end(), [](const Signature& a, const Signature& b) {
    return a.pieces() != b.pieces() ? a.pieces() < b.pieces() : a.men() < b.men();
  });
  return out;
}

std::vector<Signature> dependencies(int size, const Signature& s) {
  std::vector<Signature> out;
  auto add = [&](const Signature& t) {
    if (t == s || t == s.swapped() || !valid_signature(size, t)) return;
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  };
  for (const Signature& a : {s, s.swapped()}) {
    // Black (to move in a) moves; the child is looked up with the colours swapped.
    for (int crown = 0; crown <= (a.bm > 0 ? 1 : 0); ++crown) {
      const int bm = a.bm - crown, bk = a.bk + crown;
      for (int j = 0; j <= a.wm; ++j)
        for (int i = 0; i <= a.wk; ++i) {
          if (i + j == 0 && !crown) continue;  // a quiet move stays in the pair
          add(Signature{a.wm - j, a.wk - i, bm, bk});
        }
    }
  }
  return out;
}

Signature signature_of(const Board& b) {
  const Bitboard bl = b.pieces[0], wh = b.pieces[1];
  return {popcount(bl & ~b.kings), popcount(bl & b.kings), popcount(wh & ~b.kings), popcount(wh & b.kings)};
}

uint64_t index_of(int size, const Board& b) {
  const Layout L(size);
  const Signature s = signature_of(b);
  const Bitboard bmen = b.pieces[0] & ~b.kings, wmen = b.pieces[1] & ~b.kings;
  const Bitboard bkings = b.pieces[0] & b.kings, wkings = b.pieces[1] & b.kings;
  const int k = popcount(bmen & L.back);
  uint64_t offset = 0;
  for (int j = 0; j < k; ++j) offset += radix(L, s, j).total();
  const Radix R = radix(L, s, k);
  const Bitboard men = bmen | wmen;
  uint64_t x = rank(bmen & L.back, L.back);
  x = x * R.mid + rank(bmen & L.middle, L.middle);
  x = x * R.wm + rank(wmen, L.white_men & ~bmen);
  x = x * R.bk + rank(bkings, L.all & ~men);
  x = x * R.wk + rank(wkings, L.all & ~men & ~bkings);
  return offset + x;
}

Board board_at(int size, const Signature& s, uint64_t index) {
  const Layout L(size);
  int k = 0;
  Radix R = radix(L, s, 0);
  while (index >= R.total()) {
    index -= R.total();
    R = radix(L, s, ++k);
  }
  const uint64_t r_wk = index % R.wk;
  index /= R.wk;
  const uint64_t r_bk = index % R.bk;
  index /= R.bk;
  const uint64_t r_wm = index % R.wm;
  index /= R.wm;
  const uint64_t r_mid = index % R.mid;
  const uint64_t r_back = index / R.mid;
  const Bitboard bmen = unrank(r_back, k, L.back) | unrank(r_mid, s.bm - k, L.middle);
  const Bitboard wmen = unrank(r_wm, s.wm, L.white_men & ~bmen);
  const Bitboard men = bmen | wmen;
  const Bitboard bkings = unrank(r_bk, s.bk, L.all & ~men);
  const Bitboard wkings = unrank(r_wk, s.wk, L.all & ~men & ~bkings);
  Board b;
  b.pieces[0] = bmen | bkings;
  b.pieces[1] = wmen | wkings;
  b.kings = bkings | wkings;
  b.side = Color::Black;
  return b;
}

Board flip(int size, const Board& b) {
  const int shift = 32 - size * size / 2;
  Board f;
  f.pieces[0] = reverse_bits(b.pieces[1]) >> shift;
  f.pieces[1] = reverse_bits(b.pieces[0]) >> shift;
  f.kings = reverse_bits(b.kings) >> shift;
  f.side = ~b.side;
  return f;
}

// --- files ---------------------------------------------------------------------------------

std::unique_ptr<Table> Table::open(const std::string& path, int size, const Signature& s) {
  auto fail = [&](const std::string& what) {
    return std::runtime_error("endgame database file " + path + ": " + what);
  };
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw fail(std::string("cannot open (") + std::strerror(errno) + ")");
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    throw fail("cannot stat");
  }
  const uint64_t bytes = uint64_t(st.st_size);
  if (bytes < kHeaderBytes) {
    ::close(fd);
    throw fail("truncated: " + std::to_string(bytes) + " bytes, shorter than the 64-byte header");
  }
  void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw fail("cannot map");
  std::unique_ptr<Table> t(new Table());
  t->map_ = map;
  t->map_bytes_ = bytes;
  const auto* h = static_cast<const uint8_t*>(map);
  if (std::memcmp(h, kMagic, sizeof(kMagic)) != 0) throw fail("not an endgame database file (bad magic)");
  if (load_le<uint32_t>(h + 40) != crc32(h, 40)) throw fail("damaged header (checksum mismatch)");
  const uint32_t version = load_le<uint32_t>(h + 8);
  if (version != kFormatVersion)
    throw fail("format version " + std::to_string(version) + ", this program reads version " +
               std::to_string(kFormatVersion));
  const uint32_t file_size = load_le<uint32_t>(h + 12);
  if (file_size != uint32_t(size))
    throw fail("built for the " + std::to_string(file_size) + "x" + std::to_string(file_size) +
               " board, not " + std::to_string(size) + "x" + std::to_string(size));
  const Signature fs{h[16], h[17], h[18], h[19]};
  if (!(fs == s)) throw fail("holds signature " + fs.name() + ", expected " + s.name());
  const uint64_t count = load_le<uint64_t>(h + 24), payload = load_le<uint64_t>(h + 32);
  if (count != index_size(size, s) || payload != payload_bytes(count))
    throw fail("header counts " + std::to_string(count) + " positions, the index has " +
               std::to_string(index_size(size, s)));
  if (bytes != kHeaderBytes + payload)
    throw fail((bytes < kHeaderBytes + payload ? "truncated: " : "trailing bytes: ") + std::to_string(bytes) +
               " bytes, expected " + std::to_string(kHeaderBytes + payload));
  if (crc32(h + kHeaderBytes, payload) != load_le<uint32_t>(h + 20))
    throw fail("damaged values (checksum mismatch)");
  t->data_ = h + kHeaderBytes;
  t->count_ = count;
  t->sig_ = s;
  return t;
}

Table::~Table() {
  if (map_) munmap(map_, map_bytes_);
}

void write_file_atomically(const std::string& path, const std::vector<uint8_t>& out) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    throw std::runtime_error("endgame database: cannot write " + tmp + " (" + std::strerror(errno) + ")");
  const bool ok =
      std::fwrite(out.data(), 1, out.size(), f) == out.size() && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    throw std::runtime_error("endgame database: failed writing " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("endgame database: cannot rename " + tmp + " to " + path);
  }
}

void write_table(const std::string& path, int size, const Signature& s, const std::vector<uint8_t>& values) {
  std::vector<uint8_t> out(kHeaderBytes + payload_bytes(values.size()), 0);
  uint8_t* payload = out.data() + kHeaderBytes;
  for (size_t i = 0; i < values.size(); ++i) payload[i >> 2] |= uint8_t((values[i] & 3) << ((i & 3) * 2));
  fill_header(out.data(), size, s, values.size(), crc32(payload, out.size() - kHeaderBytes));
  write_file_atomically(path, out);
}

// --- the database --------------------------------------------------------------------------

Database::Database(const std::string& dir, int size)
    : dir_(dir), size_(size), tables_(16 * 16 * 16 * 16), dist_(16 * 16 * 16 * 16) {
  Layout L(size);  // validates the size
}

Database::Database(const std::string& dir, int size, int max_pieces, bool distances) : Database(dir, size) {
  if (max_pieces < 1) throw std::invalid_argument("endgame database: max_pieces must be at least 1");
  for (const Signature& s : signatures(size, max_pieces)) {
    load(s);
    if (distances) load_distances(s);
  }
  max_pieces_ = max_pieces;
  distances_ = distances;
}

void Database::load_distances(const Signature& s) {
  if (dist_[slot(s)]) return;
  dist_[slot(s)] = DistanceTable::open(dir_ + "/" + distance_file_name(size_, s), size_, s);
}

void Database::load(const Signature& s) {
  if (tables_[slot(s)]) return;
  tables_[slot(s)] = Table::open(dir_ + "/" + file_name(size_, s), size_, s);
}

bool Database::has(const Signature& s) const {
  return tables_[slot(s)] != nullptr;
}

uint64_t Database::bytes() const {
  uint64_t n = 0;
  for (const auto& t : tables_)
    if (t) n += t->file_bytes();
  for (const auto& t : dist_)
    if (t) n += t->file_bytes();
  return n;
}

Value Database::probe_black(const Board& b) const {
  return tables_[slot(signature_of(b))]->get(index_of(size_, b));
}

Value Database::probe(const Board& b) const {
  const int n = popcount(b.occupied());
  if (n == 0 || (max_pieces_ > 0 && n > max_pieces_)) return kUnknown;
  const Board f = b.side == Color::Black ? b : flip(size_, b);
  const Signature s = signature_of(f);
  if (std::max({s.bm, s.bk, s.wm, s.wk}) >= 16) return kUnknown;
  const Table* t = tables_[slot(s)].get();
  return t ? t->get(index_of(size_, f)) : kUnknown;
}

Probe Database::probe_distance(const Board& b) const {
  const int n = popcount(b.occupied());
  if (n == 0 || (max_pieces_ > 0 && n > max_pieces_)) return {};
  const Board f = b.side == Color::Black ? b : flip(size_, b);
  const Signature s = signature_of(f);
  if (std::max({s.bm, s.bk, s.wm, s.wk}) >= 16) return {};
  const Table* t = tables_[slot(s)].get();
  if (!t) return {};
  const uint64_t i = index_of(size_, f);
  const DistanceTable* d = dist_[slot(s)].get();
  return {t->get(i), d ? d->get(i) : -1};
}

// --- solving -------------------------------------------------------------------------------

namespace {

// The value of a position from its successors' values (each from the successor's mover's view).
struct Best {
  bool win = false, draw = false;
  void see(Value child) {
    win |= child == kLoss;
    draw |= child == kDraw;
  }
  Value value() const { return win ? kWin : draw ? kDraw : kLoss; }
};

template <int S>
SolveStats solve_pair_impl(const std::string& dir, const Signature& a) {
  const Signature b = a.swapped();
  const bool self = a == b;
  Database db(dir, S);
  for (const Signature& d : dependencies(S, a)) db.load(d);

  const Signature sig[2] = {a, b};
  const uint64_t n0 = index_size(S, a), n1 = self ? 0 : index_size(S, b);
  const uint64_t total = n0 + n1;
  if (total >= (uint64_t(1) << 32))
    throw std::runtime_error("endgame database: signature " + a.name() + " is too large");
  // Global id: table 0 first, then table 1; a quiet move from table t lands in table 1 - t.
  auto base = [&](int t) { return t == 0 ? uint64_t(0) : n0; };
  auto table_of = [&](uint64_t id) { return (self || id < n0) ? 0 : 1; };
  auto partner = [&](int t) { return self ? 0 : 1 - t; };

  std::vector<uint8_t> val(total, kUnknown);
  std::vector<uint16_t> dist(total, 0);  // distance to conversion of wins and losses (egdb.h)
  std::vector<uint8_t> pending(total, 0);  // quiet moves inside the pair not yet known to lose
  std::vector<uint32_t> off(total, 0);     // in-degree, then the end of each reverse edge list

  // Pass 1: moves leaving the pair are looked up; moves inside it are counted.
  uint64_t edges = 0;
  for (uint64_t id = 0; id < total; ++id) {
    const int t = table_of(id);
    const Board pos = board_at(S, sig[t], id - base(t));
    MoveList moves;
    generate_moves<S>(pos, moves);
    Best best;
    uint32_t kids[kMaxMoves];
    int n_in = 0;
    for (const Move& m : moves) {
      Board child = pos;
      apply_move<S>(child, m);
      const Board f = flip(S, child);
      if (!m.is_capture() && !crowns<S>(pos, m)) {
        kids[n_in++] = uint32_t(base(partner(t)) + index_of(S, f));
      } else {
        best.see(db.probe_black(f));
        if (best.win) break;
      }
    }
    if (best.win || n_in == 0) {
      val[id] = best.value();  // no moves at all: a loss
      dist[id] = moves.size == 0 ? 0 : 1;  // over now, or a capture or crowning next
      continue;
    }
    if (best.draw) val[id] = kDrawSeen;
    pending[id] = uint8_t(n_in);
    for (int i = 0; i < n_in; ++i) ++off[kids[i]];
    edges += n_in;
  }
  if (edges >= (uint64_t(1) << 32))
    throw std::runtime_error("endgame database: signature " + a.name() + " has too many moves");
  for (uint64_t id = 1; id < total; ++id) off[id] += off[id - 1];

  // Pass 2: the reverse edges of positions still open.
  std::vector<uint32_t> parents(edges);
  for (uint64_t id = 0; id < total; ++id) {
    if (pending[id] == 0) continue;
    const int t = table_of(id);
    const Board pos = board_at(S, sig[t], id - base(t));
    MoveList moves;
    generate_moves<S>(pos, moves);
    for (const Move& m : moves) {
      if (m.is_capture() || crowns<S>(pos, m)) continue;
      Board child = pos;
      apply_move<S>(child, m);
      const uint64_t kid = base(partner(t)) + index_of(S, flip(S, child));
      parents[--off[kid]] = uint32_t(id);
    }
  }

  // Propagation: a child lost for its mover wins the parent; a parent all of whose moves win
  // for the opponent is lost (or drawn, if a move outside the pair draws).
  // The queue runs in order of distance (seeds at 0, then 1; each pushes one more than the
  // position it came from), so a win takes its shortest line and a loss its longest.
  std::vector<uint32_t> queue;
  for (uint16_t d : {0, 1})
    for (uint64_t id = 0; id < total; ++id)
      if ((val[id] == kWin || val[id] == kLoss) && dist[id] == d) queue.push_back(uint32_t(id));
  constexpr uint16_t kLongest = 0xFFFF;
  for (size_t qi = 0; qi < queue.size(); ++qi) {
    const uint32_t c = queue[qi];
    const uint8_t v = val[c];
    if (dist[c] == kLongest)
      throw std::runtime_error("endgame database: distances past 65535 plies in " + a.name());
    const uint64_t end = c + 1 < total ? off[c + 1] : edges;
    for (uint64_t e = off[c]; e < end; ++e) {
      const uint32_t p = parents[e];
      if ((val[p] & 3) != kUnknown) continue;
      if (v == kLoss) {
        val[p] = kWin;
        dist[p] = uint16_t(dist[c] + 1);
        queue.push_back(p);
      } else if (--pending[p] == 0) {
        if (val[p] & kDrawSeen) {
          val[p] = kDraw;
        } else {
          val[p] = kLoss;
          dist[p] = uint16_t(dist[c] + 1);
          queue.push_back(p);
        }
      }
    }
  }

  SolveStats stats;
  stats.positions = total;
  for (uint64_t id = 0; id < total; ++id) {
    uint8_t& v = val[id];
    if ((v & 3) == kUnknown) v = kDraw;  // neither side can force a result
    v &= 3;
    if (v == kDraw) dist[id] = 0;
    stats.wins += v == kWin;
    stats.losses += v == kLoss;
    stats.draws += v == kDraw;
    if (v == kWin) stats.longest_win = std::max<int>(stats.longest_win, dist[id]);
    if (v == kLoss) stats.longest_loss = std::max<int>(stats.longest_loss, dist[id]);
  }
  // Distances first: a value file present means its pair is complete (a build skips it).
  std::vector<uint16_t> dpart(dist.begin(), dist.begin() + n0);
  write_distances(dir + "/" + distance_file_name(S, a), S, a, dpart);
  if (!self) {
    dpart.assign(dist.begin() + n0, dist.end());
    write_distances(dir + "/" + distance_file_name(S, b), S, b, dpart);
  }
  std::vector<uint8_t> part(val.begin(), val.begin() + n0);
  write_table(dir + "/" + file_name(S, a), S, a, part);
  if (!self) {
    part.assign(val.begin() + n0, val.end());
    write_table(dir + "/" + file_name(S, b), S, b, part);
  }
  return stats;
}

template <int S>
uint64_t verify_impl(const Database& db, const Signature& s) {
  uint64_t bad = 0;
  const uint64_t n = index_size(S, s);
  for (uint64_t i = 0; i < n; ++i) {
    const Board pos = board_at(S, s, i);
    MoveList moves;
    generate_moves<S>(pos, moves);
    Best best;
    // With distances: a win's is its shortest winning move's, a loss's its longest move's; a
    // capture or crowning converts (1 ply), a quiet move is one ply more than its position's.
    int shortest_win = 1 << 20, longest = 0;
    for (const Move& m : moves) {
      Board child = pos;
      apply_move<S>(child, m);
      const Probe c = db.probe_distance(child);
      best.see(c.value);
      const int d = m.is_capture() || crowns<S>(pos, m) ? 1 : c.distance + 1;
      if (c.value == kLoss) shortest_win = std::min(shortest_win, d);
      longest = std::max(longest, d);
    }
    const Probe here = db.probe_distance(pos);
    const int want = here.value == kWin ? shortest_win : here.value == kLoss ? longest : 0;
    bad += here.value != best.value() || (db.distances() && here.distance != want);
  }
  return bad;
}

}  // namespace

SolveStats solve_pair(const std::string& dir, int size, const Signature& s) {
  if (!valid_signature(size, s))
    throw std::invalid_argument("endgame database: invalid signature " + s.name());
  return size == 8 ? solve_pair_impl<8>(dir, s) : solve_pair_impl<6>(dir, s);
}

uint64_t verify_signature(const Database& db, const Signature& s) {
  if (!valid_signature(db.size(), s))
    throw std::invalid_argument("endgame database: invalid signature " + s.name());
  return db.size() == 8 ? verify_impl<8>(db, s) : verify_impl<6>(db, s);
}

}  // namespace cz::egdb
