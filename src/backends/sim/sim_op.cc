// Names of the simulated primitives, for messages and test output.

#include "absl/strings/string_view.h"
#include "gpupool/sim_backend.h"

namespace gpupool {

absl::string_view SimOpName(SimOp op) {
  switch (op) {
    case SimOp::kDeviceCount:
      return "DeviceCount";
    case SimOp::kGetCurrentDevice:
      return "GetCurrentDevice";
    case SimOp::kSetCurrentDevice:
      return "SetCurrentDevice";
    case SimOp::kStreamCreate:
      return "CreateStream";
    case SimOp::kStreamDestroy:
      return "DestroyStream";
    case SimOp::kStreamQuery:
      return "QueryStream";
    case SimOp::kStreamSynchronize:
      return "SynchronizeStream";
    case SimOp::kCaptureStatus:
      return "GetCaptureStatus";
    case SimOp::kEndCapture:
      return "EndCapture";
    case SimOp::kResetAttributes:
      return "ResetStreamAttributes";
    case SimOp::kStreamWaitEvent:
      return "StreamWaitEvent";
    case SimOp::kEventCreate:
      return "CreateEvent";
    case SimOp::kEventDestroy:
      return "DestroyEvent";
    case SimOp::kEventRecord:
      return "RecordEvent";
    case SimOp::kEventQuery:
      return "QueryEvent";
    case SimOp::kEventSynchronize:
      return "SynchronizeEvent";
    case SimOp::kAllocate:
      return "Allocate";
    case SimOp::kFree:
      return "Free";
    case SimOp::kMemoryInfo:
      return "GetMemoryInfo";
    case SimOp::kIpcGetHandle:
      return "GetIpcHandle";
    case SimOp::kIpcOpenHandle:
      return "OpenIpcHandle";
    case SimOp::kIpcCloseHandle:
      return "CloseIpcHandle";
    case SimOp::kUserObjectCreate:
      return "CreateUserObject";
    case SimOp::kUserObjectRetain:
      return "RetainUserObjectByGraph";
    case SimOp::kUserObjectRelease:
      return "ReleaseUserObject";
  }
  return "UnknownSimOp";
}

}  // namespace gpupool
