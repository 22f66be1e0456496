// Python bindings of the endgame database (game/cpp/egdb.h): building, checking and probing.
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "bind_common.h"
#include "egdb.h"

namespace nb = nanobind;
using namespace nb::literals;
using cz::Bitboard;
using cz::Board;
using cz::Color;
using cz::Game;
using cz::Move;
using cz::bind::make_board;
using cz::bind::move_text;

namespace {

using cz::egdb::Signature;
using SigTuple = std::tuple<int, int, int, int>;

Signature to_sig(const SigTuple& t) {
  return {std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t)};
}
SigTuple from_sig(const Signature& s) { return {s.bm, s.bk, s.wm, s.wk}; }
std::vector<SigTuple> sig_list(const std::vector<Signature>& v) {
  std::vector<SigTuple> out;
  for (const auto& s : v) out.push_back(from_sig(s));
  return out;
}
Signature checked_sig(int size, const SigTuple& t) {
  const Signature s = to_sig(t);
  if (!cz::egdb::valid_signature(size, s))
    throw nb::value_error(("not a signature of the " + std::to_string(size) + "x" + std::to_string(size) +
                           " board: " + s.name())
                              .c_str());
  return s;
}

using StatesArray = nb::ndarray<const uint32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

}  // namespace

void cz::bind::bind_egdb(nb::module_& m) {
  namespace eg = cz::egdb;
  m.attr("EGDB_FORMAT_VERSION") = eg::kFormatVersion;
  m.attr("EGDB_DISTANCE_FORMAT_VERSION") = eg::kDistanceFormatVersion;
  m.def(
      "egdb_signatures", [](int size, int max_pieces) { return sig_list(eg::signatures(size, max_pieces)); },
      "size"_a, "max_pieces"_a,
      "Material signatures (black men, black kings, white men, white kings) of 1..max_pieces pieces, "
      "each after every signature a move from it reaches.");
  m.def(
      "egdb_dependencies",
      [](int size, const SigTuple& s) { return sig_list(eg::dependencies(size, checked_sig(size, s))); },
      "size"_a, "signature"_a, "Signatures (other than its own pair) a move from the pair reaches.");
  m.def(
      "egdb_index_size",
      [](int size, const SigTuple& s) { return eg::index_size(size, checked_sig(size, s)); },
      "size"_a, "signature"_a, "Positions in the signature's index.");
  m.def(
      "egdb_file_name", [](int size, const SigTuple& s) { return eg::file_name(size, checked_sig(size, s)); },
      "size"_a, "signature"_a);
  m.def(
      "egdb_distance_file_name",
      [](int size, const SigTuple& s) { return eg::distance_file_name(size, checked_sig(size, s)); },
      "size"_a, "signature"_a);
  m.def(
      "egdb_check_distance_file",
      [](const std::string& path, int size, const SigTuple& s) {
        auto t = eg::DistanceTable::open(path, size, checked_sig(size, s));
        return t->count();
      },
      "path"_a, "size"_a, "signature"_a,
      "Maps and checks one distance file (size, header, checksum); returns its count or raises naming it.");
  m.def(
      "egdb_index_of",
      [](int size, uint32_t black, uint32_t white, uint32_t kings) {
        const Board b = make_board(black, white, kings, false);
        const uint32_t all = size == 8 ? 0xFFFFFFFFu : (1u << (size * size / 2)) - 1;
        const uint32_t back = (1u << (size / 2)) - 1, crown = all & ~(all >> (size / 2));
        if ((black & white) || ((black | white | kings) & ~all) || (kings & ~(black | white)) ||
            (black & ~kings & crown) || (white & ~kings & back))
          throw nb::value_error("not a legal placement of men and kings");
        return std::make_tuple(from_sig(eg::signature_of(b)), eg::index_of(size, b));
      },
      "size"_a, "black"_a, "white"_a, "kings"_a, "(signature, index) of a placement with Black to move.");
  m.def(
      "egdb_board_at",
      [](int size, const SigTuple& s, uint64_t index) {
        const Signature sig = checked_sig(size, s);
        if (index >= eg::index_size(size, sig)) throw nb::index_error("index out of range");
        const Board b = eg::board_at(size, sig, index);
        return std::make_tuple(b.pieces[0], b.pieces[1], b.kings);
      },
      "size"_a, "signature"_a, "index"_a, "(black, white, kings) bitboards at an index.");
  m.def(
      "egdb_check_file",
      [](const std::string& path, int size, const SigTuple& s) {
        auto t = eg::Table::open(path, size, checked_sig(size, s));
        return t->count();
      },
      "path"_a, "size"_a, "signature"_a,
      "Maps and checks one file (header, length, checksum); returns its position count or raises naming it.");
  m.def(
      "egdb_solve_pair",
      [](const std::string& dir, int size, const SigTuple& s) {
        const Signature sig = checked_sig(size, s);
        eg::SolveStats st;
        {
          nb::gil_scoped_release release;
          st = eg::solve_pair(dir, size, sig);
        }
        nb::dict d;
        d["positions"] = st.positions;
        d["wins"] = st.wins;
        d["losses"] = st.losses;
        d["draws"] = st.draws;
        d["longest_win"] = st.longest_win;
        d["longest_loss"] = st.longest_loss;
        return d;
      },
      "dir"_a, "size"_a, "signature"_a,
      "Solves a signature and its colour swap into dir (dependencies must be there); returns counts.");

  nb::class_<eg::Database>(m, "EndgameDatabase",
                           "Every signature file of up to max_pieces pieces, mapped and checked on open.")
      .def(
          "__init__",
          [](eg::Database* self, const std::string& dir, int size, int max_pieces, bool distances) {
            new (self) eg::Database(dir, size, max_pieces, distances);
          },
          "dir"_a, "size"_a, "max_pieces"_a, "distances"_a = false,
          "With distances, every signature's distance-to-conversion file is mapped and checked too.")
      .def_prop_ro("distances", &eg::Database::distances, "whether the distance files are loaded")
      .def_prop_ro("size", &eg::Database::size)
      .def_prop_ro("max_pieces", &eg::Database::max_pieces)
      .def_prop_ro("bytes", &eg::Database::bytes, "bytes of all mapped files")
      .def(
          "probe",
          [](const eg::Database& db, uint32_t black, uint32_t white, uint32_t kings, bool white_to_move) {
            return int(db.probe(make_board(black, white, kings, white_to_move)));
          },
          "black"_a, "white"_a, "kings"_a, "white_to_move"_a,
          "1 win, 2 loss, 3 draw for the side to move; 0 when the position is not in the database.")
      .def(
          "probe_game",
          [](const eg::Database& db, const Game& g) { return g.mid_jump() ? 0 : int(db.probe(g.board())); },
          "game"_a, "probe() of a game's current position (0 in the middle of a multi-jump).")
      .def(
          "probe_distance_game",
          [](const eg::Database& db, const Game& g) {
            if (g.mid_jump()) return std::make_tuple(0, -1);
            const eg::Probe p = db.probe_distance(g.board());
            return std::make_tuple(int(p.value), p.distance);
          },
          "game"_a,
          "(value, plies to conversion) of a game's position; distance -1 when the database has none.")
      .def(
          "probe_states",
          [](const eg::Database& db, StatesArray states) {
            if (states.shape(1) != size_t(cz::kPackedWords))
              throw nb::value_error("states must have shape (n, PACKED_WORDS): black, white, kings, meta");
            const size_t n = states.shape(0);
            auto* out = new uint8_t[std::max<size_t>(1, n)];
            nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
            {
              nb::gil_scoped_release release;
              const uint32_t* s = states.data();
              const uint32_t all = db.size() == 8 ? 0xFFFFFFFFu : (1u << (db.size() * db.size() / 2)) - 1;
              for (size_t i = 0; i < n; ++i, s += cz::kPackedWords) {
                const bool ok = !(s[0] & s[1]) && !((s[0] | s[1]) & ~all) && !(s[2] & ~(s[0] | s[1]));
                out[i] = ok ? uint8_t(db.probe(make_board(s[0], s[1], s[2], s[3] & 1))) : 0;
              }
            }
            return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(out, {n}, owner);
          },
          "states"_a,
          "probe() of n packed states (black, white, kings, meta; meta bit 0: White to move) -> (n,) uint8.")
      .def(
          "verify",
          [](const eg::Database& db, const SigTuple& s) {
            const Signature sig = checked_sig(db.size(), s);
            nb::gil_scoped_release release;
            return eg::verify_signature(db, sig);
          },
          "signature"_a,
          "Positions of the signature whose value is not the best over its moves (0 when correct).");
}
