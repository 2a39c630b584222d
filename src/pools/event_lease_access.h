// How the library's own event holders (the allocation cache's stream-order
// fence) return a PooledEvent they saw complete, so that its pool keeps it
// without querying it again. Not for users: a PooledEvent's holder can
// only vouch for an event it recorded itself.
//
// Thread safety: as PooledEvent (one holder at a time).

#ifndef GPUPOOL_SRC_POOLS_EVENT_LEASE_ACCESS_H_
#define GPUPOOL_SRC_POOLS_EVENT_LEASE_ACCESS_H_

#include "gpupool/event_pool.h"

namespace gpupool::internal {

struct EventLeaseAccess {
  // Returns `event` to its pool (ReturnAs::kKnownIdle): the caller saw its
  // last record complete (a query or synchronize that succeeded) and has
  // recorded nothing on it since. `event` is empty afterwards.
  static void ReleaseKnownIdle(PooledEvent& event) {
    event.lease_.ReleaseKnownIdle();
  }
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_POOLS_EVENT_LEASE_ACCESS_H_
