// The HIP error table: how each hipError_t is reported (fault class and
// status code), and its name and description. Pure lookups that need no GPU,
// so tests can check every row on any machine. See docs/backends.md.

#ifndef GPUPOOL_SRC_BACKENDS_HIP_HIP_ERRORS_H_
#define GPUPOOL_SRC_BACKENDS_HIP_HIP_ERRORS_H_

#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "src/backends/runtime/error_class.h"

namespace gpupool {
namespace hip_internal {

// How hipError_t `code`, returned by a call of `kind`, is reported.
//
// hipErrorUnknown rule: HIP reports some GPU faults (a kernel that faulted
// or was aborted, a lost queue) only as hipErrorUnknown from the calls that
// wait for device work. Returned by a query or synchronize
// (CallKind::kCompletion) it is therefore kDevice; from any other call it is
// kResource, since poisoning a device on an ambiguous create/destroy error
// would be worse than dropping one handle. Codes not in the table are
// kResource.
runtime_internal::ErrorClass HipErrorClass(
    int code,
    runtime_internal::CallKind kind = runtime_internal::CallKind::kOther);

// The fault class alone: HipErrorClass(code, kind).fault.
Fault ClassifyHipError(int code, runtime_internal::CallKind kind =
                                     runtime_internal::CallKind::kOther);

// hipGetErrorName / hipGetErrorString; safe without a device. (HIP's
// "string" is often the name again.)
absl::string_view HipErrorName(int code);
absl::string_view HipErrorDescription(int code);

}  // namespace hip_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_HIP_HIP_ERRORS_H_
