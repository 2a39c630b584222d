// Lease ids: unique for the process's life across every shard of every pool
// (OutstandingLease reports them; a lease's slot is freed only by the id it
// was given). A shard draws its ids in blocks from one process-wide 64-bit
// counter, so the shared counter is written once per kBlock acquires, not on
// every one, and ids never repeat before 2^64 acquires in the process.

#ifndef GPUPOOL_SRC_LIFETIME_LEASE_IDS_H_
#define GPUPOOL_SRC_LIFETIME_LEASE_IDS_H_

#include <atomic>
#include <cstdint>

namespace gpupool::internal {

// The process's next undrawn lease id; 0 is never drawn (it marks "no lease").
inline std::atomic<uint64_t>& ProcessLeaseIds() {
  static std::atomic<uint64_t> next{1};
  return next;
}

// One shard's current block of ids. Not synchronised: the shard's lock
// guards it.
class LeaseIdBlock {
 public:
  static constexpr uint64_t kBlock = uint64_t{1} << 16;

  explicit LeaseIdBlock(std::atomic<uint64_t>* source = &ProcessLeaseIds())
      : source_(source) {}

  uint64_t Next() {
    if (next_ == end_) {
      next_ = source_->fetch_add(kBlock, std::memory_order_relaxed);
      end_ = next_ + kBlock;
    }
    return next_++;
  }

 private:
  std::atomic<uint64_t>* const source_;
  uint64_t next_ = 0;
  uint64_t end_ = 0;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_LIFETIME_LEASE_IDS_H_
