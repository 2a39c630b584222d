// The optional features of a CUDA-like runtime. Pooling (streams, events,
// memory) needs only the runtime's required entry points: a runtime lacking
// one of those is refused when its table is resolved. Each feature below
// needs entry points of its own, which a runtime may lack (an older or
// stripped build, a HIP-compatible layer, a test stand-in); such a runtime
// is still pooled, and loses that feature alone: the Backend primitives that
// need it answer Unimplemented (fault kCaller) naming the runtime and the
// missing entry points, and nothing else changes.
//
// The Api traits struct provides
//   MissingEntryPoints(Feature) -> std::string: the entry points the feature
//     needs that the loaded runtime lacks, ", "-separated; empty when it has
//     them all (the common case, which allocates nothing);
//   RuntimeSource() -> const std::string&: the runtime's library, for
//     messages ("the CUDA runtime /usr/lib/libcudart.so.13").
//
// Thread safety: stateless.
#ifndef GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_FEATURES_H_
#define GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_FEATURES_H_

#include <string>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"

namespace gpupool {
namespace runtime_internal {

enum class Feature {
  kIpc,                 // GetIpcHandle, OpenIpcHandle, CloseIpcHandle
  kCaptureInfo,         // GetCaptureInfo (the capture's id: graph pools)
  kAccessPolicyWindow,  // ResetStreamAttributes (CUDA's L2 window)
  kCuMask,              // CreateStream with a cu_mask (a HIP extension)
  kUserObjects,         // CreateUserObject, RetainUserObjectByGraph,
                        // ReleaseUserObject (graph-retained release)
};

inline absl::string_view FeatureName(Feature feature) {
  switch (feature) {
    case Feature::kIpc:
      return "interprocess memory";
    case Feature::kCaptureInfo:
      return "the capture-id query";
    case Feature::kAccessPolicyWindow:
      return "the L2 access-policy window reset";
    case Feature::kCuMask:
      return "compute-unit masking";
    case Feature::kUserObjects:
      return "graph user objects (graph pools fall back to explicit release)";
  }
  return "this feature";
}

// Appends `name` to a ", "-separated list (the traits' MissingEntryPoints).
inline void AppendMissing(std::string* missing, absl::string_view name) {
  absl::StrAppend(missing, missing->empty() ? "" : ", ", name);
}

// OK when the runtime has every entry point `feature` needs; otherwise
// Unimplemented, fault kCaller, naming the call, the device, the runtime and
// the entry points it lacks.
template <typename Api>
absl::Status RequireFeature(Feature feature, absl::string_view call,
                            int device) {
  const std::string missing = Api::MissingEntryPoints(feature);
  if (ABSL_PREDICT_TRUE(missing.empty())) return absl::OkStatus();
  return FaultError(
      Fault::kCaller, absl::StatusCode::kUnimplemented,
      absl::StrCat(Api::kCallPrefix, call, " on device ", device, ": ",
                   Api::RuntimeSource(), " lacks ", missing, ", so ",
                   FeatureName(feature),
                   " is unavailable (streams, events and memory are not "
                   "affected)"));
}

}  // namespace runtime_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_FEATURES_H_
