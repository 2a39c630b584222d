// The vocabulary a runtime backend's error table speaks: for each native
// error code, the fault class the pools react to and the absl::StatusCode the
// caller sees. Generic over runtimes (no vendor header); the CUDA and HIP
// tables in src/backends/{cuda,hip}/ fill it in.

#ifndef GPUPOOL_SRC_BACKENDS_RUNTIME_ERROR_CLASS_H_
#define GPUPOOL_SRC_BACKENDS_RUNTIME_ERROR_CLASS_H_

#include "absl/status/status.h"
#include "gpupool/backend.h"

namespace gpupool {
namespace runtime_internal {

// Which kind of call returned an error. Some runtimes report a GPU fault with
// a generic code only when the call waits for device work (HIP returns
// hipErrorUnknown from a query or synchronize after a kernel faulted), so the
// tables may classify the same code differently by call kind.
enum class CallKind {
  kOther,       // create, destroy, record, allocate, ...
  kCompletion,  // query or synchronize: reports the outcome of device work
};

// How one native error code is reported.
struct ErrorClass {
  Fault fault;
  absl::StatusCode code;

  friend bool operator==(const ErrorClass& a, const ErrorClass& b) {
    return a.fault == b.fault && a.code == b.code;
  }
};

}  // namespace runtime_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_RUNTIME_ERROR_CLASS_H_
