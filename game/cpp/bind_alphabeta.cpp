// Python bindings of the alpha-beta baseline (game/cpp/alphabeta.h).
#include <memory>
#include <optional>
#include <string>

#include "alphabeta.h"
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

void cz::bind::bind_alphabeta(nb::module_& m) {
  using cz::EvalWeights;
  m.attr("MATE_SCORE") = cz::kMateScore;
  m.attr("MATE_THRESHOLD") = cz::kMateThreshold;
  m.attr("DATABASE_WIN") = cz::kDatabaseWin;
  const EvalWeights defaults;
  nb::class_<EvalWeights>(m, "EvalWeights",
                          "Alpha-beta evaluation weights in centi-men per unit of each feature.")
      .def(
          "__init__",
          [](EvalWeights* w, int man, int king, int advancement, int back_rank, int centre, int mobility,
             int runaway, int king_centre) {
            new (w) EvalWeights{man, king, advancement, back_rank, centre, mobility, runaway, king_centre};
          },
          "man"_a = defaults.man, "king"_a = defaults.king, "advancement"_a = defaults.advancement,
          "back_rank"_a = defaults.back_rank, "centre"_a = defaults.centre,
          "mobility"_a = defaults.mobility,
          "runaway"_a = defaults.runaway, "king_centre"_a = defaults.king_centre)
      .def_rw("man", &EvalWeights::man)
      .def_rw("king", &EvalWeights::king)
      .def_rw("advancement", &EvalWeights::advancement)
      .def_rw("back_rank", &EvalWeights::back_rank)
      .def_rw("centre", &EvalWeights::centre)
      .def_rw("mobility", &EvalWeights::mobility)
      .def_rw("runaway", &EvalWeights::runaway)
      .def_rw("king_centre", &EvalWeights::king_centre)
      .def("__repr__", [](const EvalWeights& w) {
        return "EvalWeights(man=" + std::to_string(w.man) + ", king=" + std::to_string(w.king) +
               ", advancement=" + std::to_string(w.advancement) +
               ", back_rank=" + std::to_string(w.back_rank) +
               ", centre=" + std::to_string(w.centre) + ", mobility=" + std::to_string(w.mobility) +
               ", runaway=" + std::to_string(w.runaway) + ", king_centre=" + std::to_string(w.king_centre) +
               ")";
      });

  nb::class_<cz::SearchResult>(m, "SearchResult", "Outcome of alphabeta_search().")
      .def_prop_ro("move",
                   [](const cz::SearchResult& r) -> std::optional<Move> {
                     if (!r.has_move) return std::nullopt;
                     return r.best;
                   },
                   "best move, None when the game is already over")
      .def_ro("score", &cz::SearchResult::score,
              "centi-men from the mover's view; +-(MATE_SCORE - plies) for a forced result")
      .def_ro("depth", &cz::SearchResult::depth, "deepest completed iteration")
      .def_ro("nodes", &cz::SearchResult::nodes)
      .def_ro("pv", &cz::SearchResult::pv, "principal variation, best move first")
      .def_ro("seconds", &cz::SearchResult::seconds)
      .def("__repr__", [](const cz::SearchResult& r) {
        std::string pv;
        for (const Move& mv : r.pv) pv += (pv.empty() ? "" : " ") + move_text(mv);
        return "SearchResult(move=" + (r.has_move ? "'" + move_text(r.best) + "'" : std::string("None")) +
               ", score=" + std::to_string(r.score) + ", depth=" + std::to_string(r.depth) +
               ", nodes=" + std::to_string(r.nodes) + ", pv='" + pv + "')";
      });

  m.def(
      "alphabeta_search",
      [](const Game& g, int depth, int time_ms, std::optional<EvalWeights> weights, int tt_mb,
         const cz::egdb::Database* egdb) {
        if (tt_mb < 1) throw nb::value_error(("tt_mb must be >= 1, got " + std::to_string(tt_mb)).c_str());
        const EvalWeights w = weights.value_or(EvalWeights{});
        cz::SearchLimits limits;
        limits.depth = depth;
        limits.time_ms = time_ms;
        // One searcher per thread, kept between calls so that a player does not allocate its
        // transposition table on every move; each search still starts from an empty table.
        thread_local std::unique_ptr<cz::AlphaBeta> searcher;
        thread_local int searcher_mb = 0;
        try {
          nb::gil_scoped_release release;
          if (!searcher || searcher_mb != tt_mb) {
            searcher.reset();
            searcher = std::make_unique<cz::AlphaBeta>(size_t(tt_mb));
            searcher_mb = tt_mb;
          }
          return searcher->search(g, limits, w, egdb);
        } catch (const std::invalid_argument& e) {
          throw nb::value_error(e.what());
        }
      },
      "game"_a, "depth"_a = 0, "time_ms"_a = 0, "weights"_a = nb::none(), "tt_mb"_a = 16,
      "egdb"_a = nb::none(),
      "Iterative-deepening alpha-beta from the game's position, limited by depth and/or time (ms).");

  m.def(
      "evaluate",
      [](const Game& g, std::optional<EvalWeights> weights) {
        return cz::evaluate(g.size(), g.board(), weights.value_or(EvalWeights{}));
      },
      "game"_a, "weights"_a = nb::none(), "Static evaluation (centi-men, mover's view), no search.");
}
