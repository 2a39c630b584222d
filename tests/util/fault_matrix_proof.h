// Fault-free proofs of the fault matrix's scenarios: each scenario also runs
// once without a fault, and its step must call the cell's op, take the path
// it is named for (the case's proof), leak nothing and misuse nothing.

#ifndef GPUPOOL_TESTS_UTIL_FAULT_MATRIX_PROOF_H_
#define GPUPOOL_TESTS_UTIL_FAULT_MATRIX_PROOF_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpupool/allocation_cache.h"
#include "tests/util/fault_matrix.h"

namespace gpupool::fault_matrix {

// What a run of the step without a fault must show besides calling the op:
// `before` is the target device's cache stats before the step, `calls` the
// step's calls of the cell's op.
using ProofFn = std::function<void(Harness&, const AllocationCacheStats& before,
                                   int64_t calls)>;

struct ProvenCase {
  Scenario scenario;
  ProofFn proof;
  // Run before the step of the fault-free run only.
  std::function<void(Harness&)> prepare = [](Harness&) {};
};

inline void Want(Harness& h, int64_t got, int64_t want, const char* what) {
  if (got != want) {
    h.Error(absl::StrCat(what, ": got ", got, ", want ", want));
  }
}

// The fault-free run of one case: the step succeeds, calls the op and takes
// its path; nothing leaks and nothing is misused.
inline std::vector<std::string> RunWithoutFault(const ProvenCase& c) {
  Harness h;
  h.BuildPools(c.scenario);
  c.scenario.setup(h);
  if (!h.errors.empty()) return h.errors;
  c.prepare(h);
  const AllocationCacheStats before = h.cache->GetStats(kTarget);
  const int64_t setup_calls = h.sim.calls(c.scenario.op);
  const absl::Status status = c.scenario.step(h);
  if (!status.ok()) h.Error(absl::StrCat("step: ", status.ToString()));
  const int64_t calls = h.sim.calls(c.scenario.op) - setup_calls;
  if (calls == 0) {
    h.Error(absl::StrCat("the step never called ", SimOpName(c.scenario.op)));
  }
  c.proof(h, before, calls);
  h.sim.CompleteAllWork();
  h.ReleaseHeld();
  h.cache.reset();
  h.events.reset();
  h.streams.reset();
  if (absl::Status leaks = h.sim.CheckNoLeaks(); !leaks.ok()) {
    h.Error(absl::StrCat("CheckNoLeaks: ", leaks.ToString()));
  }
  for (std::string& violation : h.backend.violations()) {
    h.Error(std::move(violation));
  }
  if (h.sim.misuse_count() != 0) {
    h.Error(absl::StrCat("sim misuse: ",
                         absl::StrJoin(h.sim.misuse_messages(), "; ")));
  }
  return h.errors;
}

}  // namespace gpupool::fault_matrix

#endif  // GPUPOOL_TESTS_UTIL_FAULT_MATRIX_PROOF_H_
