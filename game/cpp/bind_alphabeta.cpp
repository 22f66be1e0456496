// Python bindings of the alpha-beta baseline (game/cpp/alphabeta.h).
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "alphabeta.h"
#include "bind_common.h"
#include "egdb.h"
#include "nneval.h"

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

// A searcher a Python object owns (a player that keeps its table between moves), used by one
// search at a time.
struct OwnedSearcher {
  explicit OwnedSearcher(size_t tt_mb) : searcher(tt_mb), tt_mb(int(tt_mb)) {}
  cz::AlphaBeta searcher;
  std::mutex busy;
  int tt_mb;
};

// SearchSwitches::probcut_min_pieces as given, or ValueError naming it.
int checked_min_pieces(int pieces) {
  if (pieces < 0)
    throw nb::value_error(("probcut_min_pieces must be >= 0, got " + std::to_string(pieces)).c_str());
  return pieces;
}

const char* stop_name(cz::SearchStop s) {
  switch (s) {
    case cz::SearchStop::kGameOver: return "game-over";
    case cz::SearchStop::kDepth: return "depth";
    case cz::SearchStop::kResult: return "result";
    case cz::SearchStop::kOnlyMove: return "only-move";
    case cz::SearchStop::kLimit: return "limit";
    case cz::SearchStop::kSettled: return "settled";
    case cz::SearchStop::kTarget: return "target";
    case cz::SearchStop::kExtended: return "extended";
  }
  return "?";
}

template <typename T>
using Array = nb::ndarray<const T, nb::c_contig, nb::device::cpu>;

template <typename T, typename Out>
std::vector<Out> flat(const char* name, const Array<T>& a, size_t ndim) {
  if (a.ndim() != ndim)
    throw nb::value_error(("learned evaluation: " + std::string(name) + " must have " + std::to_string(ndim) +
                           " dimension(s), got " + std::to_string(a.ndim()))
                              .c_str());
  return std::vector<Out>(a.data(), a.data() + a.size());
}

nb::ndarray<nb::numpy, int16_t, nb::ndim<2>> accumulator_array(const cz::nn::Weights& w,
                                                               const cz::nn::Accumulator& a) {
  const size_t h = size_t(w.hidden);
  auto* out = new int16_t[2 * h];
  for (size_t c = 0; c < 2; ++c)
    for (size_t j = 0; j < h; ++j) out[c * h + j] = a.v[c][j];
  nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<int16_t*>(p); });
  return nb::ndarray<nb::numpy, int16_t, nb::ndim<2>>(out, {2, h}, owner);
}

// The learned evaluation's quantised weights, its scoring and its incremental tracker
// (game/cpp/nneval.h); game/nneval.py reads and checks the file and builds the weights.
void bind_nneval(nb::module_& m) {
  namespace nn = cz::nn;
  m.attr("NNEVAL_ACTIVATION_ONE") = nn::kActivationOne;
  m.attr("NNEVAL_WEIGHT_SHIFT") = nn::kWeightShift;
  m.attr("NNEVAL_SCORE_LIMIT") = nn::kScoreLimit;
  m.attr("NNEVAL_MAX_HIDDEN") = nn::kMaxHidden;
  m.attr("NNEVAL_MAX_DENSE") = nn::kMaxDense;
  m.attr("NNEVAL_MAX_OUTPUT_SCALE") = nn::kMaxOutputScale;
  nb::class_<nn::Weights>(m, "NNEvalWeights",
                          "Quantised weights of the learned alpha-beta evaluation (checked when built).")
      .def(
          "__init__",
          [](nn::Weights* self, int size, int output_scale, const Array<int16_t>& ft_w,
             const Array<int16_t>& ft_b, const Array<int8_t>& l1_w, const Array<int32_t>& l1_b,
             const Array<int8_t>& l2_w, const Array<int32_t>& l2_b, const Array<int16_t>& out_w,
             int32_t out_b, std::optional<Array<int8_t>> pol_w, std::optional<Array<int32_t>> pol_b) {
            nn::Weights w;
            w.size = size;
            w.squares = size * size / 2;
            w.inputs = nn::kFeatureKinds * w.squares;
            w.output_scale = output_scale;
            w.ft_w = flat<int16_t, int16_t>("ft_w", ft_w, 2);
            w.ft_b = flat<int16_t, int16_t>("ft_b", ft_b, 1);
            w.l1_w = flat<int8_t, int16_t>("l1_w", l1_w, 2);
            w.l1_b = flat<int32_t, int32_t>("l1_b", l1_b, 1);
            w.l2_w = flat<int8_t, int16_t>("l2_w", l2_w, 2);
            w.l2_b = flat<int32_t, int32_t>("l2_b", l2_b, 1);
            w.out_w = flat<int16_t, int16_t>("out_w", out_w, 1);
            w.out_b = out_b;
            w.hidden = int(w.ft_b.size());
            w.dense1 = int(w.l1_b.size());
            w.dense2 = int(w.l2_b.size());
            if (pol_w.has_value() != pol_b.has_value())
              throw nb::value_error("learned evaluation: the move-ordering head needs both pol_w and pol_b");
            if (pol_w) {
              if (pol_w->ndim() != 2 || pol_w->shape(1) != 2 * ft_b.shape(0))
                throw nb::value_error(("learned evaluation: pol_w must have shape (actions, " +
                                       std::to_string(2 * ft_b.shape(0)) + ")")
                                          .c_str());
              w.pol_w = flat<int8_t, int16_t>("pol_w", *pol_w, 2);
              w.pol_b = flat<int32_t, int32_t>("pol_b", *pol_b, 1);
              w.policy_outputs = int(pol_w->shape(0));
            }
            if (ft_w.shape(0) != size_t(w.inputs) || l1_w.shape(1) != 2 * ft_b.shape(0) ||
                l2_w.shape(1) != l1_b.shape(0))
              throw nb::value_error(
                  ("learned evaluation: layer shapes do not chain: ft_w (" + std::to_string(ft_w.shape(0)) +
                   ", " + std::to_string(ft_w.shape(1)) + "), l1_w (" + std::to_string(l1_w.shape(0)) + ", " +
                   std::to_string(l1_w.shape(1)) + "), l2_w (" + std::to_string(l2_w.shape(0)) + ", " +
                   std::to_string(l2_w.shape(1)) + ") on a board of side " + std::to_string(size))
                      .c_str());
            try {
              nn::prepare(w);
            } catch (const std::invalid_argument& e) {
              throw nb::value_error(e.what());
            }
            new (self) nn::Weights(std::move(w));
          },
          "size"_a, "output_scale"_a, "ft_w"_a, "ft_b"_a, "l1_w"_a, "l1_b"_a, "l2_w"_a, "l2_b"_a, "out_w"_a,
          "out_b"_a, "pol_w"_a = nb::none(), "pol_b"_a = nb::none())
      .def_ro("size", &nn::Weights::size)
      .def_ro("hidden", &nn::Weights::hidden)
      .def_ro("dense1", &nn::Weights::dense1)
      .def_ro("dense2", &nn::Weights::dense2)
      .def_ro("output_scale", &nn::Weights::output_scale)
      .def_prop_ro(
          "has_policy", [](const nn::Weights& w) { return w.policy_outputs > 0; },
          "True when the weights carry a move-ordering head (the `policy` search switch needs one).")
      .def_prop_rw(
          "simd", [](const nn::Weights& w) { return w.kernels == nn::Kernels::Avx2; },
          [](nn::Weights& w, bool on) {
            try {
              nn::set_kernels(w, on ? nn::Kernels::Avx2 : nn::Kernels::Scalar);
            } catch (const std::invalid_argument& e) {
              throw nb::value_error(e.what());
            }
          },
          "True when the AVX2 kernels run (the default where the CPU has AVX2), False for the plain "
          "ones; both compute the same integers. Setting True raises ValueError where they cannot run.")
      .def_prop_ro(
          "simd_unusable", [](const nn::Weights& w) { return nn::avx2_unusable(w); },
          "Why the AVX2 kernels cannot run these weights here, or '' when they can.")
      .def("__repr__", [](const nn::Weights& w) {
        return "NNEvalWeights(size=" + std::to_string(w.size) + ", hidden=" + std::to_string(w.hidden) +
               ", dense1=" + std::to_string(w.dense1) + ", dense2=" + std::to_string(w.dense2) + ")";
      });

  auto check_size = [](const nn::Weights& w, const Game& g) {
    if (w.size != g.size())
      throw nb::value_error(("learned evaluation for boards of side " + std::to_string(w.size) +
                             ", the game is on side " + std::to_string(g.size()))
                                .c_str());
  };
  m.def(
      "nneval_evaluate",
      [check_size](const nn::Weights& w, const Game& g) {
        check_size(w, g);
        return nn::evaluate_board(w, g.board());
      },
      "weights"_a, "game"_a,
      "Learned evaluation of the game's board (centi-men, mover's view), from scratch.");
  m.def(
      "nneval_accumulator",
      [check_size](const nn::Weights& w, const Game& g) {
        check_size(w, g);
        nn::Accumulator a;
        nn::refresh(w, g.board(), a);
        return accumulator_array(w, a);
      },
      "weights"_a, "game"_a, "First-layer accumulators (2, hidden) of the board, Black's view first.");

  m.def(
      "nneval_policy",
      [check_size](const nn::Weights& w, const Game& g) {
        check_size(w, g);
        if (w.policy_outputs == 0) throw nb::value_error("learned evaluation: no move-ordering head");
        nn::Accumulator a;
        nn::refresh(w, g.board(), a);
        std::vector<int> actions(size_t(w.policy_outputs));
        for (int i = 0; i < w.policy_outputs; ++i) actions[size_t(i)] = i;
        auto* out = new int32_t[size_t(w.policy_outputs)];
        nn::policy(w, a, g.board().side, actions.data(), w.policy_outputs, out);
        nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<int32_t*>(p); });
        return nb::ndarray<nb::numpy, int32_t, nb::ndim<1>>(out, {size_t(w.policy_outputs)}, owner);
      },
      "weights"_a, "game"_a,
      "The move-ordering head's logits of the game's board, one per action (square * 4 + direction in\n"
      "the mover's frame, as the MCTS network's policy), from scratch.");

  nb::class_<nn::Tracker>(m, "NNEvalTracker",
                          "Accumulators along a line of play, updated move by move as the search does.")
      .def(
          "__init__",
          [check_size](nn::Tracker* self, const nn::Weights& w, const Game& g) {
            check_size(w, g);
            new (self) nn::Tracker(w, g.board());
          },
          "weights"_a, "game"_a)
      .def(
          "push", [](nn::Tracker& t, const Game& g) { t.push(g.board()); }, "game"_a,
          "Update to the game's board, one move after the current one.")
      .def(
          "pop",
          [](nn::Tracker& t) {
            try {
              t.pop();
            } catch (const std::invalid_argument& e) {
              throw nb::value_error(e.what());
            }
          },
          "Take back the latest push.")
      .def("evaluate", &nn::Tracker::evaluate, "Score of the current board from its accumulators.")
      .def_prop_ro("depth", &nn::Tracker::depth)
      .def(
          "accumulator",
          [](const nn::Tracker& t, const nn::Weights& w) { return accumulator_array(w, t.top()); },
          "weights"_a, "Current accumulators (2, hidden).");
}

}  // namespace

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
      .def_ro("clock_ms", &cz::SearchResult::clock_ms,
              "milliseconds on the search's clock (nodes / nodes_per_ms on the node clock)")
      .def_prop_ro("stop", [](const cz::SearchResult& r) { return stop_name(r.stop); },
                   "why it ended: depth, result, only-move, limit, settled, target, extended, game-over")
      .def("__repr__", [](const cz::SearchResult& r) {
        std::string pv;
        for (const Move& mv : r.pv) pv += (pv.empty() ? "" : " ") + move_text(mv);
        return "SearchResult(move=" + (r.has_move ? "'" + move_text(r.best) + "'" : std::string("None")) +
               ", score=" + std::to_string(r.score) + ", depth=" + std::to_string(r.depth) +
               ", nodes=" + std::to_string(r.nodes) + ", pv='" + pv + "')";
      });

  bind_nneval(m);

  using cz::SearchSwitches;
  nb::class_<SearchSwitches>(m, "SearchSwitches",
                             "Optional search techniques (alphabeta.h), all off by default.")
      .def(
          "__init__",
          [](SearchSwitches* s, bool quiescence, bool aspiration, bool pruning, bool lmr, bool tt_keep,
             bool probcut, bool policy, int probcut_min_pieces) {
            new (s) SearchSwitches{quiescence, aspiration, pruning, lmr, tt_keep, probcut,
                                   checked_min_pieces(probcut_min_pieces), policy};
          },
          "quiescence"_a = false, "aspiration"_a = false, "pruning"_a = false, "lmr"_a = false,
          "tt_keep"_a = false, "probcut"_a = false, "policy"_a = false, "probcut_min_pieces"_a = 0)
      .def_rw("quiescence", &SearchSwitches::threat_quiescence)
      .def_rw("aspiration", &SearchSwitches::aspiration)
      .def_rw("pruning", &SearchSwitches::margin_pruning)
      .def_rw("lmr", &SearchSwitches::lmr)
      .def_rw("tt_keep", &SearchSwitches::tt_keep)
      .def_rw("probcut", &SearchSwitches::probcut)
      .def_prop_rw(
          "probcut_min_pieces", [](const SearchSwitches& s) { return s.probcut_min_pieces; },
          [](SearchSwitches& s, int pieces) { s.probcut_min_pieces = checked_min_pieces(pieces); },
          "ProbCut only at nodes with at least this many pieces on the board (0: at every node)")
      .def_rw("policy", &SearchSwitches::policy_order)
      .def("__repr__", [](const SearchSwitches& s) {
        auto b = [](bool v) { return std::string(v ? "True" : "False"); };
        return "SearchSwitches(quiescence=" + b(s.threat_quiescence) + ", aspiration=" + b(s.aspiration) +
               ", pruning=" + b(s.margin_pruning) + ", lmr=" + b(s.lmr) + ", tt_keep=" + b(s.tt_keep) +
               ", probcut=" + b(s.probcut) + ", probcut_min_pieces=" + std::to_string(s.probcut_min_pieces) +
               ", policy=" + b(s.policy_order) + ")";
      });

  nb::class_<OwnedSearcher>(m, "AlphaBetaSearcher",
                            "A searcher with its own transposition table, for a player that keeps it "
                            "between moves (one search at a time).")
      .def(
          "__init__",
          [](OwnedSearcher* self, int tt_mb) {
            if (tt_mb < 1)
              throw nb::value_error(("tt_mb must be >= 1, got " + std::to_string(tt_mb)).c_str());
            new (self) OwnedSearcher(size_t(tt_mb));
          },
          "tt_mb"_a = 16)
      .def_ro("tt_mb", &OwnedSearcher::tt_mb)
      .def_prop_ro("tt_entries", [](const OwnedSearcher& s) { return s.searcher.tt_entries(); });

  m.def(
      "alphabeta_search",
      [](const Game& g, int depth, int time_ms, std::optional<EvalWeights> weights, int tt_mb,
         const cz::egdb::Database* egdb, const cz::nn::Weights* nneval, int max_ms, int nodes_per_ms,
         std::optional<cz::SearchSwitches> switches, OwnedSearcher* owned) {
        if (tt_mb < 1) throw nb::value_error(("tt_mb must be >= 1, got " + std::to_string(tt_mb)).c_str());
        const EvalWeights w = weights.value_or(EvalWeights{});
        cz::SearchLimits limits;
        limits.depth = depth;
        limits.time_ms = time_ms;
        limits.max_ms = max_ms;
        limits.nodes_per_ms = nodes_per_ms;
        limits.switches = switches.value_or(cz::SearchSwitches{});
        // One searcher per thread, kept between calls so that a player does not allocate its
        // transposition table on every move; each search still starts from an empty table.
        thread_local std::unique_ptr<cz::AlphaBeta> searcher;
        thread_local int searcher_mb = 0;
        try {
          nb::gil_scoped_release release;
          if (owned) {
            std::unique_lock<std::mutex> lock(owned->busy, std::try_to_lock);
            if (!lock.owns_lock())
              throw std::invalid_argument("this AlphaBetaSearcher is searching in another thread");
            return owned->searcher.search(g, limits, w, egdb, nneval);
          }
          if (!searcher || searcher_mb != tt_mb) {
            searcher.reset();
            searcher = std::make_unique<cz::AlphaBeta>(size_t(tt_mb));
            searcher_mb = tt_mb;
          }
          return searcher->search(g, limits, w, egdb, nneval);
        } catch (const std::invalid_argument& e) {
          throw nb::value_error(e.what());
        }
      },
      "game"_a, "depth"_a = 0, "time_ms"_a = 0, "weights"_a = nb::none(), "tt_mb"_a = 16,
      "egdb"_a = nb::none(), "nneval"_a = nb::none(), "max_ms"_a = 0, "nodes_per_ms"_a = 0,
      "switches"_a = nb::none(), "searcher"_a = nb::none(),
      "Iterative-deepening alpha-beta from the game's position, limited by depth and/or time (ms);\n"
      "with `nneval` (NNEvalWeights) the learned evaluation scores its leaves. `max_ms` > 0 manages\n"
      "the time: `time_ms` is the target (a settled root stops at half of it) and `max_ms` the hard\n"
      "limit an unsettled root may run to. `nodes_per_ms` > 0 counts that many nodes as a millisecond\n"
      "instead of reading the clock (deterministic). `switches` (SearchSwitches) turns on optional\n"
      "techniques; `searcher` (AlphaBetaSearcher) searches with that object's own table (tt_mb unused).");

  m.def(
      "evaluate",
      [](const Game& g, std::optional<EvalWeights> weights) {
        return cz::evaluate(g.size(), g.board(), weights.value_or(EvalWeights{}));
      },
      "game"_a, "weights"_a = nb::none(), "Static evaluation (centi-men, mover's view), no search.");
}
