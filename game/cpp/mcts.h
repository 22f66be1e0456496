// Batched PUCT search (AlphaZero) over many games at once.
//
// Where the parts live (one class, BatchedMcts, split by concern as KataGo splits its search):
//   mcts.cpp         the tree and the search loop: check_config(), the arena, PUCT selection
//                    (select_child, explore_scale), expansion, backup, the descent that gathers
//                    leaves (gather), expand(), advance(), node_stats()
//   mcts_root.cpp    the root: Dirichlet noise (add_noise, remove_noise), forced playouts'
//                    policy target pruning (prune_forced_visits), the policy target (root_target,
//                    root_policy), the root's statistics (root_visits, root_priors, root_q,
//                    root_wdl), the move choice with temperature (choose)
//   mcts_gumbel.cpp  Gumbel root search: sequential halving (considered_visit, gumbel_select_root),
//                    sigma(completed Q), the non-root selection, its choice and policy, root_gumbel
//   mcts_solver.cpp  MCTS-solver: proofs carried up the tree (proof_of, prove_path), the root moves
//                    that may be played (playable), root_child_proofs
//   mcts_internal.h  helpers those files share (a child's proof from its parent's view, ...)
//
// One BatchedMcts object holds G games, each with its own tree. The caller (Python) drives it:
//
//   n = gather()          descend every tree that still needs simulations, stop at unexpanded
//                         leaves (several per tree, kept apart by virtual loss), score terminal
//                         positions exactly by the rules on the spot, and write the other leaves'
//                         network input (planes + legal masks) into buffers owned by the object;
//   expand(priors, wdl)   one network evaluation per gathered leaf: create the leaf's children
//                         with the priors and back the WDL value up the path.
//
// The search never calls back into the caller, and no Python runs per node.
//
// Values. Every node keeps the sum of (win - loss) and the sum of draw probabilities from the
// point of view of the side to move *at that node*. A multi-jump continuation keeps the side, so
// a backed-up value flips sign only across edges where the side to move changes (flag kFlip on the
// child). Terminal nodes are scored by the rules with no network call: the side to move with no
// legal move has lost (value -1), repetition / forty-move rule / ply cap draw (value 0).
//
// Simulations. `simulations` (or game i's own budget, see set_search()) counts the visits below
// the root: after a search the root's child visit counts sum to exactly that when the root was
// new. The root's own network evaluation (one per new root) is extra and not counted. A subtree
// kept by advance() keeps its visits, so a reused root may start with more and then needs no new
// simulations.
//
// Not thread-safe: one thread drives one object (the bindings release the GIL in gather() and
// expand(), so other Python threads run meanwhile, but must not call into the same object).
//
// Forced moves. A node with a single legal action (a forced capture, most multi-jump
// continuations) is equivalent to its only child: with collapse_forced it is expanded at once
// with prior 1 and never sent to the network. With skip_forced_root a root with a single legal
// action needs no search at all.
//
// Per-game budgets (playout cap randomization, KataGo). set_search(i, simulations, full) gives
// game i its own simulation count in place of the config's, and says whether its search is a
// full one (Dirichlet noise and forced playouts at the root, as configured) or a fast one (no
// root noise, plain PUCT). It holds for game i until changed, resets and moves included; a
// switch on a root already searched puts the network's priors back or mixes noise in at once.
//
// Forced playouts and policy target pruning (KataGo). With forced_playouts_k = k > 0, at the
// root of a full search with noise a child c with fewer than sqrt(k * P(c) * N) visits (N: the
// root's child visits, leaves in flight included) is selected regardless of PUCT. root_target()
// then takes those visits back out of the policy target (prune_forced_visits below); the move is
// still chosen from the plain visit counts (choose()).
//
// MCTS-solver (config solver = true; off by default, and then nothing below applies). Exact
// results are proven and carried up the tree, in Node::proof, from the view of the side to move
// at the node: a terminal position (by the rules) and a leaf the endgame database knows are
// proven; a node is a proven win when some child is a proven win for the node's mover (a child
// with kFlip has the other side to move, so its win is the node's loss; a multi-jump continuation
// keeps the side, so its win is the node's win), a proven loss when every child is a proven win
// for the opponent, a proven draw when every child is proven and the best of them is a draw.
//   - A proven node below the root is not searched further: a descent that reaches it backs up
//     its exact value (+1, 0, -1) at once, as at a terminal, and selection reads its exact Q.
//   - Selection skips a child proven lost for the mover (it can never be worth a visit).
//   - A proven root needs no more search: search_done() then holds with fewer visits than the
//     budget, and the root's visit counts sum to less than `simulations`.
//   - choose() plays a proven win when the root has one (the most visited proven win, whatever
//     the temperature) and never a proven loss while some move is not proven lost.
//   - The policy target (root_target()) then holds the visits of the moves choose() may play:
//     only the proven wins' visits when there is one, else every move's visits but the proven
//     losses' (they are 0), unless every move is a proven loss (the raw visits). root_visits()
//     stays the raw visit counts.
// Proofs are exact for the path the tree took (repetitions and the forty-move count included),
// so a subtree kept by advance() keeps its proofs.
//
// Gumbel root search (config gumbel = true; Danihelka et al., "Policy improvement by planning
// with Gumbel", ICLR 2022). Off by default, and then nothing below applies.
//   - Values are read in [0, 1] ((Q + 1) / 2), and sigma(q) = (gumbel_c_visit + max_b N(b)) *
//     gumbel_c_scale * q, N(b) the visits of the node's children. A child's completed Q is its
//     own mean value when it has visits, else the node's mixed value: (v + N * sum_visited p Q /
//     sum_visited p) / (N + 1), v the node's own network value, N its children's visits.
//   - The root's noise is Gumbel(0, 1) draws g(a), one per legal action, in place of Dirichlet
//     noise (same switch: dirichlet_epsilon > 0 and a full search; without noise g = 0). The
//     m = min(gumbel_m, legal) actions of highest g + logit (logit: the log prior) are
//     considered; sequential halving spreads the decision's new simulations over them in
//     ceil(log2 m) phases, each giving its survivors equal visits and keeping the better half
//     by g + logit + sigma(completed Q). Leaves in flight count as visits, so the leaves of one
//     batch go to different survivors. Visits a kept subtree brings along do not count in the
//     schedule; a schedule the budget outgrew (search_until) visits the least visited
//     considered action next.
//   - choose() plays argmax g + logit + sigma(completed Q) over the considered actions with the
//     most new visits, whatever the temperature (the Gumbel draws are the exploration).
//   - The policy target root_policy() is softmax(logit + sigma(completed Q)) over the legal
//     actions; root_target() gives it in integer units, 65535 for its largest entry.
//   - Below the root a child is selected by argmax pi'(a) - N(a) / (1 + sum_b N(b)), pi' =
//     softmax(logit + sigma(completed Q)) at that node (leaves in flight counted as visits that
//     lost, as virtual loss). No PUCT, FPU or forced playouts anywhere.
//   - With the solver, proven losses are never selected nor played, and a proven win at the
//     root is played (and is the policy target) as under PUCT.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "game.h"

namespace cz {

namespace egdb {
class Database;
}

// Each field is a search parameter declared in game/search_parameters.py (its default, the range
// a user may ask for, its doc line); tests/test_search_parameters.py holds these defaults to it.
struct MctsConfig {
  int simulations = 100;           // visits below the root per decision
  int leaves_per_game = 8;         // most leaves gathered from one tree per gather()
  float c_puct = 1.25f;            // exploration constant (AlphaZero's c_init)
  float c_puct_base = 19652.0f;    // AlphaZero's c_base: c grows as log((1+N+base)/base); 0: constant
  float fpu_reduction = 0.25f;     // unvisited child's Q = parent Q minus this (inside the tree)
  float fpu_reduction_root = 0.0f; // the same at the root (noise already spreads visits there)
  float dirichlet_alpha = 0.3f;    // root noise concentration
  float dirichlet_epsilon = 0.25f; // share of noise in the root priors; 0 disables noise
  float virtual_loss = 1.0f;       // visits (each a loss) a leaf in flight adds to its path
  bool collapse_forced = true;     // expand single-action nodes without a network call
  bool skip_forced_root = true;    // a root with one legal action needs no search
  float forced_playouts_k = 0.0f;  // KataGo's k: forced root visits sqrt(k P N) with noise; 0: off
  float policy_temperature = 1.0f; // priors raised to 1/T and renormalised (lc0's policy softmax
                                   // temperature): T > 1 flattens them; 1: as the network gives
  uint64_t seed = 0;               // RNG seed (noise, move sampling): same seed, same games
  bool solver = false;             // MCTS-solver: prove wins/losses/draws up the tree (see above)
  bool gumbel = false;             // Gumbel root search and deterministic non-root selection
  int gumbel_m = 16;               // actions sampled at the root (Gumbel-top-k)
  float gumbel_c_visit = 50.0f;    // sigma's visit offset c_visit
  float gumbel_c_scale = 1.0f;     // sigma's scale c_scale (values read in [0, 1])
};

// The visit count every survivor of sequential halving has when the search starts its
// `index`-th simulation of `n`, over `m` considered actions (mctx's table of considered visits).
int considered_visit(int m, int n, int index);

// Throws std::invalid_argument naming the first field out of range (non-finite values included):
// the core's floor, below the declared ranges (every value they allow passes).
void check_config(const MctsConfig& config);

// PUCT's exploration scale at a node with n_parent visits: c(N) * sqrt(max(N, 1)), where
// c(N) = c_puct + log((1 + N + c_puct_base) / c_puct_base) (c_puct alone when c_puct_base is 0).
// A child's PUCT value is Q + scale * P / (1 + visits).
float explore_scale(float c_puct, float c_puct_base, float n_parent);

// Policy target pruning (KataGo, "Accelerating Self-Play Learning in Go", 2019) over the n
// children of a root, in place on `visits`. `best` is the most visited child and stays as it is.
// Every other child c gives up visits one at a time, at most ceil(sqrt(k * P(c) * N)) of them
// (its forced share; N is the children's visit total), while its PUCT value with the reduced
// count, its Q unchanged, stays below the best child's; a child left with one visit is dropped
// (0). `q` is each child's mean value from the root mover's view (ignored where visits are 0),
// `scale` the root's explore_scale().
void prune_forced_visits(int n, const float* prior, const float* q, int32_t* visits, int best, float k,
                         float scale);

// One tree node, in an arena per game, addressed by uint32 index. Children of a node are
// contiguous: [first_child, first_child + num_children). Index 0 is always the root, so
// first_child == 0 means "no children".
struct Node {
  uint32_t first_child = 0;
  uint32_t visits = 0;
  float q_sum = 0.0f;  // sum of (win - loss) from the view of the side to move here
  float d_sum = 0.0f;  // sum of draw probabilities
  float prior = 0.0f;  // policy prior of the edge into this node
  // Selection terms cached by refresh() whenever visits, pending, q_sum or prior change (only
  // along one path per simulation), so choosing among the children needs no division:
  float q_eff = 0.0f;    // mean (win - loss) from the parent mover's view, virtual losses included
  float u_scale = 0.0f;  // prior / (1 + visits + virtual visits)
  uint16_t pending = 0;  // leaves in flight below this node (virtual loss)
  uint8_t action = 0;    // mover-relative action of the edge into this node
  uint8_t num_children = 0;
  uint8_t flags = 0;
  uint8_t proof = 0;  // Proof (solver only) from the view of the side to move here
};

// A node's proven result for the side to move there (the same numbers as egdb::Value).
enum Proof : uint8_t { kUnproven = 0, kProvenWin = 1, kProvenLoss = 2, kProvenDraw = 3 };

enum NodeFlags : uint8_t {
  kExpanded = 1,      // children exist
  kTerminal = 2,      // game over here; value exact
  kTerminalDraw = 4,  // with kTerminal: a draw (else the side to move here lost)
  kFlip = 8,          // the side to move here differs from the parent's
  kEntered = 16,      // kFlip is known (the node was stepped into once)
  kInFlight = 32,     // sent to the network in the current batch, not yet expanded
  kEvaluated = 64,    // got its own network value (counts one of its visits)
  kTerminalWin = 128, // with kTerminal: the side to move here wins (endgame database)
};

class BatchedMcts {
 public:
  BatchedMcts(int num_games, int size, const MctsConfig& config);

  int num_games() const { return int(trees_.size()); }
  int size() const { return size_; }
  int num_actions() const { return num_actions_; }
  int capacity() const { return capacity_; }  // most leaves one gather() can return
  const MctsConfig& config() const { return config_; }
  void set_simulations(int n);
  // Game i's search from now on: `simulations` visits below its root (>= 0, in place of the
  // config's) and a full search (noise, forced playouts) or a fast one (neither). Throws
  // std::logic_error with leaves of game i in flight.
  void set_search(int i, int simulations, bool full);
  int search_budget(int i) const;  // game i's simulations (the config's until set_search())
  bool full_search(int i) const;   // game i's search is a full one (true until set_search())
  // Whether the root of game i gets forced playouts (forced_playouts_k > 0, noise on, full).
  bool forcing(int i) const { return forcing(tree(i)); }

  // Replaces game i (its position and history) and clears its tree.
  void reset(int game, const Game& g);
  const Game& game(int i) const { return tree(i).game; }
  // Stops searching game i (a resignation, or a slot with no next game) until the next reset().
  void stop(int i);

  // Gathers up to max_per_game leaves per tree (<= 0: config) and at most total_cap in all
  // (<= 0: capacity). Returns the number of leaves L; their inputs are in planes(), masks().
  int gather(int max_per_game = 0, int total_cap = 0);
  const float* planes() const { return planes_.data(); }  // (L, kNumPlanes, S, S)
  const uint8_t* masks() const { return masks_.data(); }  // (L, A)
  const uint32_t* packed() const { return packed_.data(); }  // (L, kHistory, kPackedWords)
  int pending_leaves() const { return int(leaves_.size()); }
  // priors: (L, A) row-major, any non-negative weights (renormalised over the legal actions);
  // wdl: (L, 3) win/draw/loss probabilities from the view of the side to move at the leaf.
  // A NaN, infinite or negative prior of a legal action or wdl value throws
  // std::invalid_argument before anything changes (the entries of illegal actions are ignored).
  void expand(const float* priors, const float* wdl, int n);

  // Per-game state.
  bool done(int i) const;          // the game is over
  bool search_done(int i) const;   // not over and the search for this decision is complete
  int root_child_visits(int i) const;  // sum of the root's child visits
  void root_visits(int i, int32_t* out) const;  // (A,) visit count per action
  // (A,) the policy target: root_visits() less the forced visits PUCT would not have spent
  // (prune_forced_visits) when this root had forced playouts, else root_visits() itself.
  // Gumbel: the completed-Q policy (root_policy()) scaled to 65535 for its largest entry.
  void root_target(int i, int32_t* out) const;
  // (A,) the policy target as probabilities (0 on illegal actions, all 0 before any child
  // visit): root_target() normalised under PUCT, softmax(logit + sigma(completed Q)) under Gumbel.
  void root_policy(int i, float* out) const;
  // Gumbel: (A,) each root action's Gumbel draw (0 without noise, NaN where not legal) and
  // whether it is considered (1) by sequential halving.
  void root_gumbel(int i, float* g, uint8_t* considered) const;
  void root_priors(int i, float* out) const;    // (A,) priors at the root (after noise)
  void root_q(int i, float* out) const;         // (A,) child Q from the root mover's view, NaN if unvisited
  void root_wdl(int i, float* out) const;       // (3,) root value estimate, root mover's view
  // Node reached from the root by `path` (actions); its children's priors and visits (A,).
  void node_stats(int i, const std::vector<int>& path, float* priors, int32_t* visits) const;
  int tree_size(int i) const { return int(tree(i).nodes.size()); }
  // Solver: the root's Proof for its mover (kUnproven when not proven or the solver is off), and
  // each root action's Proof from the root mover's view (A,), kUnproven where none.
  int root_proof(int i) const { return tree(i).nodes[0].proof; }
  void root_child_proofs(int i, uint8_t* out) const;
  // Visit-count sampling with temperature (<= 0: argmax, ties to the higher prior).
  int choose(int i, float temperature);
  // Plays an action in game i and keeps the subtree below it (noise goes on the new root).
  void advance(int i, int action);
  uint64_t collisions() const { return collisions_; }
  uint64_t terminal_hits() const { return terminal_hits_; }
  // Leaves in the endgame database take its exact value (win/draw/loss) with no network call;
  // the root is always searched. nullptr (the default) turns it off. Not owned: the caller keeps
  // the database alive while the search uses it.
  void set_egdb(const egdb::Database* db) { egdb_ = db; }
  uint64_t egdb_hits() const { return egdb_hits_; }

 private:
  struct Tree {
    Game game;
    std::vector<Node> nodes;
    std::vector<Node> spare;  // compaction target for advance(); swapped in, keeps capacity
    int inflight = 0;         // leaves of this tree in the current batch
    int root_legal = 0;       // legal actions at the root
    bool noised = false;      // Dirichlet noise already mixed into the root's children
    bool over = false;        // the game at the root has ended
    int simulations = -1;     // this game's budget per decision; < 0: the config's
    bool full = true;         // full search (noise, forced playouts) or fast (neither)
    bool mixed = false;       // noise is in the root's priors now; `clean` holds them without
    std::vector<float> clean; // the root children's priors before noise, to undo it
    // Gumbel root state, one entry per root child (empty until the root is set up):
    std::vector<float> gumbel;         // g(a); 0 without noise
    std::vector<uint32_t> base;        // visits the child had when this decision began
    std::vector<uint8_t> considered;   // among the m actions sequential halving searches
    int num_considered = 0;
  };
  struct Leaf {
    int game;
    uint32_t node;
    uint32_t path_begin, path_end;  // into paths_
    uint32_t actions_begin;         // into leaf_actions_
    int num_actions;
  };
  enum class Descent { Leaf, Terminal, Collision };

  Tree& tree(int i);
  const Tree& tree(int i) const;
  void clear_tree(Tree& t);
  Descent descend(int gi);
  uint32_t select_child(const Tree& t, uint32_t node) const;
  void expand_node(Tree& t, uint32_t node, const uint8_t* actions, int n, const float* priors);
  void backup(Tree& t, const uint32_t* path, int len, float q, float d, bool release);
  void refresh(Node& n) const;
  uint8_t proof_of(const Tree& t, const Node& n) const;  // from its children, kUnproven if open
  void prove_path(Tree& t);                               // carry a proof at path_'s end upwards
  // Which root children choose() and root_target() may take, in ok[k] (set only when not 0):
  // 2: only the proven wins; 1: every child but the proven losses; 0: every child (the solver is
  // off, nothing at the root is proven, or every child is a proven loss).
  int playable(const Tree& t, bool* ok) const;
  void add_noise(Tree& t);
  void remove_noise(Tree& t);
  // Gumbel helpers.
  void gumbel_setup(Tree& t, bool noise);  // draws g, samples the considered set, sets base
  bool gumbel_ready(const Tree& t) const;
  // Each child's sigma(completed Q) at `node` (virtual: leaves in flight count as lost visits).
  void gumbel_sigma(const Tree& t, uint32_t node, bool virtual_loss, float* sigma) const;
  uint32_t gumbel_select_root(const Tree& t) const;
  uint32_t gumbel_select_inner(const Tree& t, uint32_t node) const;
  int gumbel_choice(const Tree& t, const bool* ok, int only) const;  // root child index
  // The completed-Q policy over the root children (probabilities, order of the children).
  void gumbel_policy(const Tree& t, float* pi) const;
  bool needs_search(const Tree& t) const;
  bool forcing(const Tree& t) const;
  int budget(const Tree& t) const { return t.simulations >= 0 ? t.simulations : config_.simulations; }

  int size_;
  int num_actions_;
  MctsConfig config_;
  int capacity_;
  std::vector<Tree> trees_;
  std::mt19937_64 rng_;
  int next_start_ = 0;  // round-robin start so that a total cap does not starve later games

  // Batch state, reused across calls (no allocation once warm).
  std::vector<Leaf> leaves_;
  std::vector<uint32_t> paths_;
  std::vector<uint8_t> leaf_actions_;
  std::vector<uint32_t> packed_;
  std::vector<float> planes_;
  std::vector<uint8_t> masks_;
  std::vector<uint32_t> path_;  // current descent
  std::vector<float> weights_;  // scratch for noise and sampling
  uint64_t collisions_ = 0;
  uint64_t terminal_hits_ = 0;
  const egdb::Database* egdb_ = nullptr;
  uint64_t egdb_hits_ = 0;
};

}  // namespace cz
