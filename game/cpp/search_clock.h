// The clock of a timed alpha-beta search and its time management (SearchLimits::max_ms).
//
// The clock is the machine's steady clock, or a node count (SearchLimits::nodes_per_ms nodes make
// a millisecond) so that tests see the same "times" on every machine. The manager reads the root
// after every iteration and, inside an iteration, whenever its allowance runs out:
//   settled    the best move held for kSettledIterations iterations with a steady score: stop at
//              kSettledShare of the target;
//   unsettled  the best move changed or the score fell by kFallingScore, between iterations or
//              within the running one: run on to the hard limit;
//   otherwise  stop at the target.
// The player above spreads what a move saves over later moves (evaluation/ab_clock.py), so the
// average a move spends over a game comes close to the budget.
#pragma once

#include <chrono>
#include <cstdint>

#include "alphabeta.h"

namespace cz {

// Reading the wall clock costs 20-50 ns; every 256 nodes (0.04% of the time at 2 M nodes/s)
// keeps the overshoot of a limit near 0.1 ms, and near a millisecond where a loaded machine
// runs the search ten times slower (every 1024 nodes overshot by up to 5 ms there). The node
// clock is read at every node (a division), so it stops exactly.
constexpr uint64_t kNodesPerClockCheck = 256;
// Unmanaged: an iteration costs about as much again as all earlier ones together (the tree grows
// by a factor of ~2-3 per ply here), so one is started only if less than half the time is spent.
constexpr int kNextIterationCost = 2;
// Managed: a best move that has held this many iterations with the score moving less than
// kSteadyScore centi-men is settled; a score that fell by kFallingScore or more is unsettled.
// Iterations below kManagedFromDepth are too shallow to read either way.
constexpr int kSettledIterations = 4;
constexpr int kSteadyScore = 15;
constexpr int kFallingScore = 30;
constexpr double kSettledShare = 0.5;
constexpr int kManagedFromDepth = 5;

class SearchClock {
 public:
  using Clock = std::chrono::steady_clock;

  explicit SearchClock(const SearchLimits& limits)
      : start_(Clock::now()),
        nodes_per_ms_(limits.nodes_per_ms),
        managed_(limits.time_ms > 0 && limits.max_ms > 0),
        target_ms_(limits.time_ms),
        hard_ms_(managed_ ? limits.max_ms : limits.time_ms),
        allowance_ms_(limits.time_ms) {}

  bool timed() const { return target_ms_ > 0; }
  bool managed() const { return managed_; }
  double elapsed_ms(uint64_t nodes) const {
    if (nodes_per_ms_ > 0) return double(nodes) / nodes_per_ms_;
    return std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
  }
  double wall_seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  bool due(uint64_t nodes) const { return nodes_per_ms_ > 0 || (nodes & (kNodesPerClockCheck - 1)) == 0; }

  // Inside an iteration: whether to stop now. `root_unsettled`: the running iteration already
  // changed its best root move or saw the old one fall.
  bool out_of_time(uint64_t nodes, bool root_unsettled) {
    const double now = elapsed_ms(nodes);
    if (now >= hard_ms_) return stop(managed_ ? reason_at_hard() : SearchStop::kLimit);
    if (!managed_ || now < allowance_ms_) return false;
    if (root_unsettled) {  // run on: the allowance becomes the hard limit
      unsettle();
      return false;
    }
    return stop(reason());
  }

  // After a completed iteration: whether to start the next one. `same_best` and `swing` compare
  // it with the one before, `held` counts iterations in a row with the same best move.
  bool next_iteration(uint64_t nodes, int depth, bool same_best, int swing, int held) {
    const double now = elapsed_ms(nodes);
    if (!managed_) {
      if (now >= hard_ms_ || now * kNextIterationCost > hard_ms_) return !stop(SearchStop::kLimit);
      return true;
    }
    if (depth >= kManagedFromDepth) {
      if (!same_best || swing <= -kFallingScore) {
        unsettle();
      } else if (held >= kSettledIterations && swing < kSteadyScore && swing > -kSteadyScore) {
        kind_ = Kind::kSettled;
        allowance_ms_ = kSettledShare * target_ms_;
      } else {
        kind_ = Kind::kTarget;
        allowance_ms_ = target_ms_;
      }
    }
    if (now >= hard_ms_) return !stop(reason_at_hard());
    if (now >= allowance_ms_) return !stop(reason());
    return true;
  }

  SearchStop stopped() const { return stopped_; }

 private:
  enum class Kind : uint8_t { kTarget, kSettled, kUnsettled };

  void unsettle() {
    kind_ = Kind::kUnsettled;
    allowance_ms_ = hard_ms_;
  }
  SearchStop reason() const {
    if (kind_ == Kind::kSettled) return SearchStop::kSettled;
    return kind_ == Kind::kUnsettled ? SearchStop::kExtended : SearchStop::kTarget;
  }
  SearchStop reason_at_hard() const {
    return hard_ms_ > target_ms_ ? SearchStop::kExtended : SearchStop::kTarget;
  }
  bool stop(SearchStop why) {
    stopped_ = why;
    return true;
  }

  Clock::time_point start_;
  int nodes_per_ms_;
  bool managed_;
  double target_ms_, hard_ms_, allowance_ms_;
  Kind kind_ = Kind::kTarget;
  SearchStop stopped_ = SearchStop::kDepth;
};

}  // namespace cz
