// The leases one keyed-pool shard has out: their count, high-water mark, ids
// (src/lifetime/lease_ids.h) and acquire sites (for GetOutstandingLeases).
//
// Not synchronised: the owning shard guards it with its own lock.

#ifndef GPUPOOL_SRC_POOLS_LEASE_SITES_H_
#define GPUPOOL_SRC_POOLS_LEASE_SITES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpupool/source_location.h"
#include "src/lifetime/cache_line_allocator.h"
#include "src/lifetime/lease_ids.h"

namespace gpupool::internal {

class LeaseSites {
 public:
  // A lease's id and its slot in the site table (kNoSite when not tracked).
  static constexpr uint32_t kNoSite = 0xFFFFFFFF;
  struct Ticket {
    uint64_t id = 0;
    uint32_t site = kNoSite;
    bool validating = false;  // reserved, not yet confirmed as out
  };

  // `track_sites`: whether acquire sites are recorded (PoolOptions).
  explicit LeaseSites(bool track_sites) : track_sites_(track_sites) {
    // Room for the first leases at once: a new pool's tables would
    // otherwise be reallocated at 1, 2, 4, ... leases, each an aligned
    // allocation (a pool made per client pays them all).
    if (track_sites_) {
      sites_.reserve(kFirstSlots);
      free_.reserve(kFirstSlots);
    }
  }

  // Counts a lease about to be handed out and records its site in a free
  // slot (no hashing on the hot path). A reservation whose handle must still
  // be validated (`validating`) counts toward the peak only once Confirm
  // says it went out.
  Ticket Reserve(SourceLocation where, bool validating) {
    Ticket ticket{ids_.Next(), kNoSite, validating};
    ++in_use_;
    if (validating) {
      ++validating_;
    } else {
      NotePeak();
    }
    if (track_sites_) {
      if (free_.empty()) {
        ticket.site = static_cast<uint32_t>(sites_.size());
        sites_.push_back(Site{ticket.id, where});
      } else {
        ticket.site = free_.back();
        free_.pop_back();
        sites_[ticket.site] = Site{ticket.id, where};
      }
    }
    return ticket;
  }

  // A validated reservation goes out.
  void Confirm(Ticket& ticket) {
    if (!ticket.validating) return;
    ticket.validating = false;
    --validating_;
    NotePeak();
  }

  // A lease came back, or a reservation was never handed out.
  void Finish(const Ticket& ticket) {
    if (ticket.validating) --validating_;
    --in_use_;
    // The id check keeps a corrupted or foreign ticket from freeing another
    // lease's slot.
    if (ticket.site < sites_.size() && sites_[ticket.site].id == ticket.id) {
      sites_[ticket.site].id = 0;
      free_.push_back(ticket.site);
    }
  }

  int in_use() const { return in_use_; }
  int64_t peak() const { return peak_; }

  // Calls `visit(id, where)` for each outstanding tracked lease.
  template <typename Visit>
  void ForEach(Visit visit) const {
    for (const Site& site : sites_) {
      if (site.id != 0) visit(site.id, site.where);
    }
  }

 private:
  // An outstanding lease's acquire site; id 0: a free slot.
  struct Site {
    uint64_t id = 0;
    SourceLocation where;
  };

  void NotePeak() {
    const int out = in_use_ - validating_;
    if (out > peak_) peak_ = out;
  }

  static constexpr size_t kFirstSlots = 32;

  const bool track_sites_;
  LeaseIdBlock ids_;
  int in_use_ = 0;
  int validating_ = 0;
  int64_t peak_ = 0;
  // Grows to the peak number of leases out at once; `free_` lists free slots.
  // Written on every acquire and return: on cache lines of their own (see
  // src/lifetime/cache_line_allocator.h).
  std::vector<Site, CacheLineAllocator<Site>> sites_;
  std::vector<uint32_t, CacheLineAllocator<uint32_t>> free_;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_POOLS_LEASE_SITES_H_
