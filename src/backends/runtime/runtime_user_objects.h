// RuntimeUserObjects<Api>: the graph user-object calls (cudaUserObjectCreate,
// cudaGraphRetainUserObject, cudaUserObjectRelease; HIP 6's hip* of the same
// shape) that RuntimeBackend<Api>'s user-object overrides make once they have
// checked the device.
//
// The Api traits struct must also provide:
//   UserObject (cudaUserObject_t / hipUserObject_t), Graph,
//   kUserObjectNoDestructorSync (cudaUserObjectNoDestructorSync: the only
//   flag CUDA defines, and required), kGraphUserObjectMove
//   (cudaGraphUserObjectMove: the graph takes the caller's reference instead
//   of a new one),
//   UserObjectCreate(UserObject*, void* data, void (*destroy)(void*),
//                    unsigned initial_refcount, unsigned flags),
//   GraphRetainUserObject(Graph, UserObject, unsigned count, unsigned flags),
//   UserObjectRelease(UserObject, unsigned count).
// They are an optional feature (runtime_features.h, Feature::kUserObjects):
// CUDA has them from 11.4, HIP from 6.0 (gpupool is compiled against HIP 5.2,
// whose headers lack them: the HIP traits spell their types out). On a
// runtime without them each call is Unimplemented naming what is missing,
// and graph pools fall back to an explicit Release.
//
// The destructor runs on a runtime-owned thread where no runtime call is
// allowed; the callers' destructors only flip an atomic. Each call runs on
// the pool's device (the context the graph and its object live in) and in
// Relaxed capture mode, like every other call the template makes outside a
// stream: the runtimes do not document them as safe during another
// thread's global-mode capture.
//
// Thread safety: stateless.

#ifndef GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_USER_OBJECTS_H_
#define GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_USER_OBJECTS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "src/backends/runtime/runtime_features.h"
#include "src/backends/runtime/runtime_guards.h"
#include "src/backends/runtime/runtime_status.h"

namespace gpupool {
namespace runtime_internal {

template <typename Api>
struct RuntimeUserObjects {
  // Backend::CreateUserObject on `device` (already range-checked): one
  // reference, the caller's.
  static absl::StatusOr<NativeUserObject> Create(int device,
                                                 UserObjectDestructor destroy,
                                                 void* data) {
    if (absl::Status has = RequireFeature<Api>(Feature::kUserObjects,
                                               "UserObjectCreate", device);
        !has.ok()) {
      return has;
    }
    if (destroy == nullptr) {
      return FaultError(
          Fault::kCaller, absl::StatusCode::kInvalidArgument,
          absl::StrCat(Api::kCallPrefix, "UserObjectCreate on device ", device,
                       ": null destructor"));
    }
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    typename Api::UserObject object = nullptr;
    absl::Status status = RuntimeStatus<Api>::ToStatus(
        Api::UserObjectCreate(&object, data, destroy, /*initial_refcount=*/1,
                              Api::kUserObjectNoDestructorSync),
        "UserObjectCreate", device);
    if (!status.ok()) return status;
    return static_cast<NativeUserObject>(object);
  }

  // Backend::RetainUserObjectByGraph on `device` (already range-checked):
  // moves the caller's reference into `graph`; on failure it stays the
  // caller's (the runtime moves nothing when it refuses).
  static absl::Status RetainByGraph(int device, NativeGraph graph,
                                    NativeUserObject object) {
    if (absl::Status has = RequireFeature<Api>(Feature::kUserObjects,
                                               "GraphRetainUserObject", device);
        !has.ok()) {
      return has;
    }
    if (graph == nullptr || object == nullptr) {
      return NullHandle("GraphRetainUserObject", device);
    }
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    return RuntimeStatus<Api>::ToStatus(
        Api::GraphRetainUserObject(
            static_cast<typename Api::Graph>(graph),
            static_cast<typename Api::UserObject>(object),
            /*count=*/1, Api::kGraphUserObjectMove),
        "GraphRetainUserObject", device);
  }

  // Backend::ReleaseUserObject on `device` (already range-checked).
  static absl::Status Release(int device, NativeUserObject object) {
    if (absl::Status has = RequireFeature<Api>(Feature::kUserObjects,
                                               "UserObjectRelease", device);
        !has.ok()) {
      return has;
    }
    if (object == nullptr) return NullHandle("UserObjectRelease", device);
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    return RuntimeStatus<Api>::ToStatus(
        Api::UserObjectRelease(static_cast<typename Api::UserObject>(object),
                               /*count=*/1),
        "UserObjectRelease", device);
  }

 private:
  static absl::Status NullHandle(absl::string_view call, int device) {
    return FaultError(Fault::kCaller, absl::StatusCode::kInvalidArgument,
                      absl::StrCat(Api::kCallPrefix, call, " on device ",
                                   device, ": null handle"));
  }
};

}  // namespace runtime_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_USER_OBJECTS_H_
