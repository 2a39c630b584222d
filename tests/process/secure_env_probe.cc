// The program secure_env_test.cc runs, plainly and as a setuid binary: it
// prints whether the kernel started it in secure-execution mode and what
// the library made of the GPUPOOL_* variables it was given.
//
//   secure=N                 getauxval(AT_SECURE)
//   cuda=CODE MESSAGE        MakeBackend("cuda") (reads GPUPOOL_CUDA_RUNTIME)
//   pools=CODE MESSAGE|NAME  ProcessPools() (GPUPOOL_CONF, _STATS, _BACKEND):
//                            its error, or its backend's name

#include <sys/auxv.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "gpupool/pools.h"

int main() {
  std::printf("secure=%lu\n", getauxval(AT_SECURE));
  absl::StatusOr<std::unique_ptr<gpupool::Backend>> cuda =
      gpupool::MakeBackend("cuda");
  std::printf("cuda=%d %s\n", cuda.status().raw_code(),
              std::string(cuda.status().message()).c_str());
  absl::StatusOr<gpupool::Pools*> pools = gpupool::ProcessPools();
  std::printf("pools=%d %s\n", pools.status().raw_code(),
              pools.ok() ? std::string((*pools)->backend().name()).c_str()
                         : std::string(pools.status().message()).c_str());
  return 0;
}
