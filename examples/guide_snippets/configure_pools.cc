// docs/guide.md, "Configuration": the GPUPOOL_CONF grammar from code, for a
// private bundle (ProcessPools() applies GPUPOOL_CONF by itself).

#include <cstdio>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/config.h"
#include "gpupool/gpupool.h"

absl::StatusOr<std::unique_ptr<gpupool::Pools>> MakeConfiguredPools(
    std::unique_ptr<gpupool::Backend> backend) {
  absl::StatusOr<gpupool::PoolsConfig> config = gpupool::ParsePoolsConfig(
      "max_idle_per_key=32,max_cached_bytes=2GiB,"
      "prewarm=any:0:non_blocking+priority=-1:1,prewarm=any:0:default:13");
  if (!config.ok()) return config.status();  // InvalidArgument, names token
  absl::StatusOr<std::unique_ptr<gpupool::Pools>> pools =
      gpupool::Pools::Create(std::move(backend), config->options);
  if (!pools.ok()) return pools.status();
  absl::Status prewarmed = gpupool::RunPrewarms(**pools, config->prewarm);
  if (!prewarmed.ok()) return prewarmed;
  return pools;
}

int main() {
  absl::StatusOr<std::unique_ptr<gpupool::Pools>> pools =
      MakeConfiguredPools(std::make_unique<gpupool::SimBackend>());
  if (!pools.ok()) {
    std::fprintf(stderr, "%s\n", pools.status().ToString().c_str());
    return 1;
  }
  // A typo is an error naming the token, never a crash or a silent default.
  absl::StatusOr<gpupool::PoolsConfig> bad =
      gpupool::ParsePoolsConfig("max_idle_per_key=32,max_cached_bytes=2GB!");
  std::printf("idle streams after prewarm: %lld\nbad config: %s\n",
              static_cast<long long>((*pools)->streams().GetStats().idle),
              bad.status().ToString().c_str());
  return (*pools)->streams().GetStats().idle == 14 &&
                 absl::IsInvalidArgument(bad.status())
             ? 0
             : 2;
}
