// TakeSnapshot over a Pools bundle (gpupool/snapshot.h): the cache's
// snapshot plus the stream and event pools' counts per (device, config).

#include <vector>

#include "gpupool/pools.h"
#include "gpupool/snapshot.h"

namespace gpupool {
namespace {

void AddKeys(const std::vector<PoolKeyStats>& keys, MemorySnapshot& snapshot,
             std::vector<PoolKeySnapshot> DeviceSnapshot::*field) {
  for (const PoolKeyStats& key : keys) {
    if (key.device < 0 ||
        key.device >= static_cast<int>(snapshot.devices.size())) {
      continue;
    }
    (snapshot.devices[key.device].*field)
        .push_back(PoolKeySnapshot{key.config, key.stats.idle, key.stats.in_use,
                                   key.stats.draining});
  }
}

}  // namespace

MemorySnapshot TakeSnapshot(const Pools& pools) {
  MemorySnapshot snapshot = TakeSnapshot(pools.allocations());
  AddKeys(pools.streams().GetStatsPerKey(), snapshot,
          &DeviceSnapshot::stream_pools);
  AddKeys(pools.events().GetStatsPerKey(), snapshot,
          &DeviceSnapshot::event_pools);
  return snapshot;
}

}  // namespace gpupool
