// Python bindings of the batched PUCT search (game/cpp/mcts.h).
#include <algorithm>
#include <string>
#include <utility>

#include "bind_common.h"
#include "egdb.h"
#include "mcts.h"

namespace nb = nanobind;
using namespace nb::literals;
using cz::Bitboard;
using cz::Board;
using cz::Color;
using cz::Game;
using cz::Move;
using cz::bind::make_board;
using cz::bind::move_text;

void cz::bind::bind_mcts(nb::module_& m) {
  nb::class_<cz::MctsConfig>(m, "MctsConfig", "Search parameters; see conf/mcts/default.yaml.")
      .def(nb::init<>())
      .def_rw("simulations", &cz::MctsConfig::simulations)
      .def_rw("leaves_per_game", &cz::MctsConfig::leaves_per_game)
      .def_rw("c_puct", &cz::MctsConfig::c_puct)
      .def_rw("c_puct_base", &cz::MctsConfig::c_puct_base)
      .def_rw("fpu_reduction", &cz::MctsConfig::fpu_reduction)
      .def_rw("fpu_reduction_root", &cz::MctsConfig::fpu_reduction_root)
      .def_rw("dirichlet_alpha", &cz::MctsConfig::dirichlet_alpha)
      .def_rw("dirichlet_epsilon", &cz::MctsConfig::dirichlet_epsilon)
      .def_rw("virtual_loss", &cz::MctsConfig::virtual_loss)
      .def_rw("collapse_forced", &cz::MctsConfig::collapse_forced)
      .def_rw("skip_forced_root", &cz::MctsConfig::skip_forced_root)
      .def_rw("forced_playouts_k", &cz::MctsConfig::forced_playouts_k)
      .def_rw("policy_temperature", &cz::MctsConfig::policy_temperature)
      .def_rw("seed", &cz::MctsConfig::seed)
      .def_rw("solver", &cz::MctsConfig::solver)
      .def_prop_rw(
          "root_policy", [](const cz::MctsConfig& c) { return std::string(c.gumbel ? "gumbel" : "puct"); },
          [](cz::MctsConfig& c, const std::string& v) {
            if (v != "puct" && v != "gumbel")
              throw nb::value_error(("root_policy must be puct or gumbel, got " + v).c_str());
            c.gumbel = v == "gumbel";
          },
          "puct (AlphaZero) or gumbel (sequential halving, completed-Q policy target)")
      .def_rw("gumbel_m", &cz::MctsConfig::gumbel_m)
      .def_rw("gumbel_c_visit", &cz::MctsConfig::gumbel_c_visit)
      .def_rw("gumbel_c_scale", &cz::MctsConfig::gumbel_c_scale);
  m.def("considered_visit", &cz::considered_visit, "m"_a, "n"_a, "index"_a,
        "Sequential halving over m actions and n simulations: the visits each survivor has when\n"
        "simulation `index` starts.");

  using cz::BatchedMcts;
  using F32Rows = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
  auto i32_out = [](size_t n) {
    auto* buf = new int32_t[n];
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<int32_t*>(p); });
    return std::make_pair(buf, owner);
  };
  auto f32_out = [](size_t n) {
    auto* buf = new float[n];
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<float*>(p); });
    return std::make_pair(buf, owner);
  };
  nb::class_<BatchedMcts>(
      m, "BatchedMCTS",
      "PUCT search over many games at once. Loop: gather() -> one forward pass -> expand().")
      .def(nb::init<int, int, const cz::MctsConfig&>(), "num_games"_a, "size"_a, "config"_a)
      .def_prop_ro("num_games", &BatchedMcts::num_games)
      .def_prop_ro("size", &BatchedMcts::size)
      .def_prop_ro("num_actions", &BatchedMcts::num_actions)
      .def_prop_ro("capacity", &BatchedMcts::capacity, "most leaves one gather() returns")
      .def_prop_rw("simulations", [](const BatchedMcts& s) { return s.config().simulations; },
                   &BatchedMcts::set_simulations)
      .def("set_search", &BatchedMcts::set_search, "game_index"_a, "simulations"_a, "full"_a,
           "Game game_index's search from now on: `simulations` visits below its root and a full\n"
           "search (root noise, forced playouts, as configured) or a fast one (neither).")
      .def("search_budget", &BatchedMcts::search_budget, "game_index"_a,
           "Simulations per decision of this game (the config's until set_search()).")
      .def("full_search", &BatchedMcts::full_search, "game_index"_a,
           "This game's search is a full one (true until set_search()).")
      .def("forcing", nb::overload_cast<int>(&BatchedMcts::forcing, nb::const_), "game_index"_a,
           "This game's root gets forced playouts (forced_playouts_k > 0, noise on, full search).")
      .def_prop_ro("collisions", &BatchedMcts::collisions)
      .def_prop_ro("terminal_hits", &BatchedMcts::terminal_hits)
      .def("reset", &BatchedMcts::reset, "game_index"_a, "game"_a,
           "Start game_index from a copy of `game` (its history included) with an empty tree.")
      .def("game", [](const BatchedMcts& s, int i) { return Game(s.game(i)); }, "game_index"_a,
           "A copy of the game at the root.")
      .def(
          "gather",
          [](BatchedMcts& s, int max_per_game, int total_cap) {
            int n;
            {
              nb::gil_scoped_release release;
              n = s.gather(max_per_game, total_cap);
            }
            // Views of the object's own buffers (no copy): valid until the next gather().
            // Writable, so torch.from_numpy takes them without a warning; writing only changes
            // this batch's input (the search keeps its own copy of the legal actions).
            nb::object owner = nb::find(&s);
            const size_t S = size_t(s.size()), L = size_t(n);
            auto planes = nb::ndarray<nb::numpy, float, nb::ndim<4>>(
                const_cast<float*>(s.planes()), {L, size_t(cz::kNumPlanes), S, S}, owner);
            auto masks = nb::ndarray<nb::numpy, bool, nb::ndim<2>>(
                reinterpret_cast<bool*>(const_cast<uint8_t*>(s.masks())), {L, size_t(s.num_actions())},
                owner);
            return nb::make_tuple(planes, masks);
          },
          "max_per_game"_a = 0, "total_cap"_a = 0,
          "Leaves of every tree that needs them: (planes float32 (L,15,S,S), masks bool (L,A)),\n"
          "views of internal buffers that the next gather() overwrites (copy to keep them).")
      .def(
          "gathered_packed",
          [](BatchedMcts& s) {
            nb::object owner = nb::find(&s);
            return nb::ndarray<nb::numpy, const uint32_t, nb::ndim<3>>(
                s.packed(), {size_t(s.pending_leaves()), size_t(cz::kHistory), size_t(cz::kPackedWords)},
                owner);
          },
          "Packed histories (L, HISTORY, PACKED_WORDS) of the leaves of the last gather().")
      .def(
          "expand",
          [](BatchedMcts& s, F32Rows priors, F32Rows wdl) {
            const size_t L = size_t(s.pending_leaves());
            if (priors.shape(0) != L || priors.shape(1) != size_t(s.num_actions()))
              throw nb::value_error(("priors must have shape (" + std::to_string(L) + ", " +
                                     std::to_string(s.num_actions()) + ")")
                                        .c_str());
            if (wdl.shape(0) != L || wdl.shape(1) != 3)
              throw nb::value_error(("wdl must have shape (" + std::to_string(L) + ", 3)").c_str());
            nb::gil_scoped_release release;
            s.expand(priors.data(), wdl.data(), int(L));
          },
          "priors"_a.noconvert(), "wdl"_a.noconvert(),
          "One evaluation per gathered leaf: priors float32 (L,A), wdl float32 (L,3) (mover's view).")
      .def("stop", &BatchedMcts::stop, "game_index"_a,
           "Stop searching this game (resigned, or no next game for the slot) until reset().")
      .def("done", &BatchedMcts::done, "game_index"_a, "The game is over (or stopped).")
      .def("search_done", &BatchedMcts::search_done, "game_index"_a)
      .def(
          "ready",
          [](const BatchedMcts& s) {
            std::vector<int> out;
            for (int i = 0; i < s.num_games(); ++i)
              if (s.search_done(i)) out.push_back(i);
            return out;
          },
          "Indices of the games whose search for the current decision is complete.")
      .def("result", [](const BatchedMcts& s, int i) { return int(s.game(i).result()); }, "game_index"_a)
      .def("end_reason", [](const BatchedMcts& s, int i) { return int(s.game(i).end_reason()); },
           "game_index"_a)
      .def("ply", [](const BatchedMcts& s, int i) { return int(s.game(i).state().ply); }, "game_index"_a)
      .def(
          "white_to_move",
          [](const BatchedMcts& s, int i) { return s.game(i).board().side == Color::White; },
          "game_index"_a)
      .def(
          "root_packed",
          [](const BatchedMcts& s, int i) {
            auto* buf = new uint32_t[cz::kPackedWords];
            cz::pack_state(s.game(i).state(), buf);
            nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<uint32_t*>(p); });
            return nb::ndarray<nb::numpy, uint32_t, nb::ndim<1>>(buf, {size_t(cz::kPackedWords)}, owner);
          },
          "game_index"_a, "The root state packed as (black, white, kings, meta).")
      .def("root_child_visits", &BatchedMcts::root_child_visits, "game_index"_a)
      .def(
          "root_visits",
          [i32_out](const BatchedMcts& s, int i) {
            auto [buf, owner] = i32_out(s.num_actions());
            s.root_visits(i, buf);
            return nb::ndarray<nb::numpy, int32_t, nb::ndim<1>>(buf, {size_t(s.num_actions())}, owner);
          },
          "game_index"_a, "Visit count of each action at the root, int32 (A,).")
      .def(
          "root_target",
          [i32_out](const BatchedMcts& s, int i) {
            auto [buf, owner] = i32_out(s.num_actions());
            s.root_target(i, buf);
            return nb::ndarray<nb::numpy, int32_t, nb::ndim<1>>(buf, {size_t(s.num_actions())}, owner);
          },
          "game_index"_a,
          "The policy target, int32 (A,): root_visits() less the forced visits that policy target\n"
          "pruning takes out when this root had forced playouts, else root_visits() itself. With\n"
          "the solver: only the proven wins' visits when one exists, else proven losses at 0 (see\n"
          "game/cpp/mcts.h).")
      .def(
          "root_policy",
          [f32_out](const BatchedMcts& s, int i) {
            auto [buf, owner] = f32_out(s.num_actions());
            s.root_policy(i, buf);
            return nb::ndarray<nb::numpy, float, nb::ndim<1>>(buf, {size_t(s.num_actions())}, owner);
          },
          "game_index"_a,
          "The policy target as probabilities, float32 (A,), all 0 before any child visit: the\n"
          "normalised root_target() under PUCT, softmax(logit + sigma(completed Q)) under Gumbel.")
      .def(
          "root_gumbel",
          [f32_out](const BatchedMcts& s, int i) {
            auto [g, go] = f32_out(s.num_actions());
            auto* c = new uint8_t[size_t(s.num_actions())];
            nb::capsule co(c, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
            s.root_gumbel(i, g, c);
            const size_t A = size_t(s.num_actions());
            return nb::make_tuple(nb::ndarray<nb::numpy, float, nb::ndim<1>>(g, {A}, go),
                                  nb::ndarray<nb::numpy, bool, nb::ndim<1>>(reinterpret_cast<bool*>(c), {A}, co));
          },
          "game_index"_a,
          "Gumbel: (g float32 (A,), considered bool (A,)): each root action's Gumbel draw (0 without\n"
          "noise, NaN where not legal) and whether sequential halving searches it.")
      .def(
          "root_priors",
          [f32_out](const BatchedMcts& s, int i) {
            auto [buf, owner] = f32_out(s.num_actions());
            s.root_priors(i, buf);
            return nb::ndarray<nb::numpy, float, nb::ndim<1>>(buf, {size_t(s.num_actions())}, owner);
          },
          "game_index"_a, "Priors at the root (with noise when it is on), float32 (A,).")
      .def(
          "root_q",
          [f32_out](const BatchedMcts& s, int i) {
            auto [buf, owner] = f32_out(s.num_actions());
            s.root_q(i, buf);
            return nb::ndarray<nb::numpy, float, nb::ndim<1>>(buf, {size_t(s.num_actions())}, owner);
          },
          "game_index"_a, "Mean value (win - loss) of each root action, root mover's view; NaN if unvisited.")
      .def(
          "root_wdl",
          [f32_out](const BatchedMcts& s, int i) {
            auto [buf, owner] = f32_out(3);
            s.root_wdl(i, buf);
            return nb::ndarray<nb::numpy, float, nb::ndim<1>>(buf, {size_t(3)}, owner);
          },
          "game_index"_a, "Root value (win, draw, loss) from the root mover's view; NaN before any visit.")
      .def(
          "node_stats",
          [f32_out, i32_out](const BatchedMcts& s, int i, const std::vector<int>& path) {
            auto [pri, po] = f32_out(s.num_actions());
            auto [vis, vo] = i32_out(s.num_actions());
            s.node_stats(i, path, pri, vis);
            const size_t A = size_t(s.num_actions());
            return nb::make_tuple(nb::ndarray<nb::numpy, float, nb::ndim<1>>(pri, {A}, po),
                                  nb::ndarray<nb::numpy, int32_t, nb::ndim<1>>(vis, {A}, vo));
          },
          "game_index"_a, "path"_a,
          "(priors, visits) of the children of the node reached from the root by `path` (actions).")
      .def("tree_size", &BatchedMcts::tree_size, "game_index"_a)
      .def("root_proof", &BatchedMcts::root_proof, "game_index"_a,
           "Solver: the root's proven result for its mover, 1 win, 2 loss, 3 draw; 0 not proven\n"
           "(always 0 with the solver off).")
      .def(
          "root_child_proofs",
          [](const BatchedMcts& s, int i) {
            auto* buf = new uint8_t[size_t(s.num_actions())];
            nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
            s.root_child_proofs(i, buf);
            return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(buf, {size_t(s.num_actions())}, owner);
          },
          "game_index"_a,
          "Solver: each root action's proven result from the root mover's view, uint8 (A,):\n"
          "1 win, 2 loss, 3 draw, 0 not proven (or not legal).")
      .def("choose", &BatchedMcts::choose, "game_index"_a, "temperature"_a,
           "An action sampled from visit counts ^ (1/temperature); temperature <= 0: the most visited.\n"
           "Gumbel: the search's choice among its last survivors, whatever the temperature.\n"
           "With the solver: a proven win when there is one, never a proven loss while another move\n"
           "is not proven lost.")
      .def("set_egdb", &BatchedMcts::set_egdb, "db"_a.none(), nb::keep_alive<1, 2>(),
           "Leaves in this EndgameDatabase take its exact value (None: off); the root is always searched.")
      .def_prop_ro("egdb_hits", &BatchedMcts::egdb_hits, "leaves scored by the endgame database")
      .def("advance", &BatchedMcts::advance, "game_index"_a, "action"_a,
           "Play `action` in the game and keep its subtree as the new root.");

  using F32Vec = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
  using I32Vec = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
  m.def(
      "prune_forced_visits",
      [i32_out](F32Vec prior, F32Vec q, I32Vec visits, int best, float k, float c_puct, float c_puct_base,
                float parent_visits) {
        const size_t n = visits.shape(0);
        if (prior.shape(0) != n || q.shape(0) != n)
          throw nb::value_error("prior, q and visits must have the same length");
        auto [buf, owner] = i32_out(n);
        std::copy(visits.data(), visits.data() + n, buf);
        cz::prune_forced_visits(int(n), prior.data(), q.data(), buf, best, k,
                                cz::explore_scale(c_puct, c_puct_base, parent_visits));
        return nb::ndarray<nb::numpy, int32_t, nb::ndim<1>>(buf, {n}, owner);
      },
      "prior"_a.noconvert(), "q"_a.noconvert(), "visits"_a.noconvert(), "best"_a, "k"_a, "c_puct"_a,
      "c_puct_base"_a, "parent_visits"_a,
      "Policy target pruning of one root's children (float32 priors, float32 Q from the root mover's\n"
      "view, int32 visits), as BatchedMCTS.root_target() does it: a copy of `visits` in which every\n"
      "child but `best` gave up its forced visits PUCT would not have spent.");

}
