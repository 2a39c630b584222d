// One (device, MemoryKind) shard of the allocation cache, sealed: its free
// index, the retiring list, the leases out, the stable buffers, the counters
// and the count of runtime allocations in its care, all private under one
// lock. Each method is one step of the cache's policy taken under that lock;
// none calls the runtime, so the cache (AllocationCacheCore) makes every
// runtime call between two of them with the lock released.
//
// Memory that fits: a runtime allocation (segment) holds one or more blocks
// (block.h). A request takes a free block of its size class or larger from
// the free index (free_index.h), split when the rest is worth keeping and the
// block is not much larger than the request (the bounded remainder policy
// below); a block coming back merges with the free blocks beside it in its
// segment. Only wholly free segments are freed, retired or counted against
// max_cached_bytes.
//
// Stream order across split and merge: a split remainder inherits its
// parent's fence (its events and release stream) unless the parent was
// proven idle; a merged block carries both halves' events, and is pending on
// one stream alone only when both halves were (or one was ready).
//
// Blocks of an older device generation (the device was poisoned) are taken
// out by every method that is given the current generation and handed back
// in `stale` for the caller to delete (counted as dropped).

#ifndef GPUPOOL_SRC_ALLOCATION_SHARD_H_
#define GPUPOOL_SRC_ALLOCATION_SHARD_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/pool_stats.h"
#include "gpupool/snapshot.h"
#include "gpupool/source_location.h"
#include "src/allocation/block.h"
#include "src/allocation/cached_bytes.h"
#include "src/allocation/free_index.h"
#include "src/allocation/in_use.h"
#include "src/allocation/lease_request.h"
#include "src/allocation/parked.h"
#include "src/allocation/release_slot.h"
#include "src/allocation/segment.h"
#include "src/allocation/stable_entries.h"
#include "src/allocation/swept_generation.h"
#include "src/lifetime/cache_line_allocator.h"
#include "src/lifetime/handle_ledger.h"
#include "src/lifetime/lease_ids.h"
#include "src/lifetime/mutex.h"

namespace gpupool::internal {

// Cache-line aligned, its bins on lines of their own: shards of different
// devices are written by different threads on every hit and return.
class alignas(kCacheLine) AllocationShard {
 public:
  // `device_cached_bytes` counts cached bytes of the device over all its
  // shards (the max_cached_bytes cap is per device); it must outlive us.
  AllocationShard(int device, MemoryKind kind, int size_class_count,
                  size_t max_split_ratio, size_t max_cached_bytes,
                  std::atomic<size_t>* device_cached_bytes);
  // Deletes the host-side records of blocks still listed (never frees
  // memory: the cache handed those to the runtime first, or they are leaked).
  ~AllocationShard();
  AllocationShard(const AllocationShard&) = delete;
  AllocationShard& operator=(const AllocationShard&) = delete;

  int device() const { return device_; }
  MemoryKind kind() const { return kind_; }

  // --- Allocate -------------------------------------------------------------
  // The best-fitting cached block of at least `request.lease_bytes`
  // (FreeIndex::FindBestFit) when it is usable at once — pending on
  // `request.stream` alone, or ready — split to that size, leased and
  // counted as a hit. Else nullptr, with up to `pending_checks` of the
  // oldest pending blocks that fit moved to `candidates` (empty on entry)
  // for the caller to check (with none, the best block usable at once is
  // taken).
  //
  // With `unchecked`, the release slot's block that TakeCached's lone-lane
  // shortcut would give as the one candidate (released on another stream,
  // fenced, of exactly the lease size, nothing else cached) is leased at
  // once, unchecked: `unchecked` describes it and nothing else is returned.
  // The caller queries its events outside the lock and keeps the lease when
  // they completed, so that the usual cross-stream reuse of a buffer takes
  // the lock once; else it calls UndoUncheckedLease. Observers see the
  // lease (and its hit) meanwhile.
  AllocationBlock* TakeCached(const LeaseRequest& request, int pending_checks,
                              uint64_t generation, BlockVector* candidates,
                              BlockVector* stale,
                              UncheckedLease* unchecked = nullptr);
  // Undoes an unchecked lease whose events were found `state` (kIdle only
  // when the block's generation is gone): the block is back as it was
  // released, then settled as an unchosen candidate (SettleCandidates) —
  // kept pending, or dropped or leaked into `garbage` — with its hit
  // uncounted and its hold dropped.
  void UndoUncheckedLease(const UncheckedLease& unchecked, BlockState state,
                          uint64_t generation, BlockVector* garbage);
  // Settles checked candidates: leases `chosen` (a hit; `waited`: made safe
  // by a stream wait, so a split remainder keeps its events; else they
  // completed) unless its generation is gone, puts `keep` back as the
  // oldest pending blocks (retiring those the cap has no room for any more),
  // and retires `dropped` and `leaked` (appended to `garbage` for the caller
  // to delete). Returns the leased block or nullptr.
  AllocationBlock* SettleCandidates(AllocationBlock* chosen, bool waited,
                                    const BlockVector& keep,
                                    const BlockVector& dropped,
                                    const BlockVector& leaked,
                                    const LeaseRequest& request,
                                    uint64_t generation, BlockVector* garbage);
  // Leases a block just allocated from the runtime (`tally`: a miss or an
  // uncached allocation), which enters the shard's care with it.
  void LeaseNew(AllocationBlock* block, const LeaseRequest& request,
                CacheCounter tally);

  // --- Blocks kept outside the cached lists (held, or a capture router's) --
  // Leases a kept block (a hit when `hit`; else the keeper hands it back to
  // the general cache, which releases it at once).
  void LeaseKept(AllocationBlock* block, const LeaseRequest& request, bool hit);
  // Takes a leased block out of use to be kept (held, or by a capture
  // router): it leaves the in-use gauges and stays in the shard's care.
  void TakeOutOfUse(AllocationBlock* block);
  // Puts a kept block back in use, without a lease's tallies (no hit, no
  // peak): the keeper is about to give it to the general cache.
  void Reinstate(AllocationBlock* block);

  // --- Release --------------------------------------------------------------
  struct AfterReturn {
    AllocationBlock* to_free = nullptr;    // idle and not cached: free it
    AllocationBlock* to_poll = nullptr;    // oldest retiring block to check
    AllocationBlock* to_delete = nullptr;  // retired (dropped or leaked)
  };
  // Takes back a leased block whose events were recorded with result
  // `state`: cached within the cap, else retired until its events complete,
  // else handed back to free. Dropped when its generation is no longer
  // `generation`, leaked once the shard is closed.
  AfterReturn TakeBack(AllocationBlock* block, BlockState state,
                       uint64_t generation);

  // --- Parked blocks (parked.h) --------------------------------------------
  // Parks a leased block released on its one stream with its fence deferred
  // (no runtime call): it leaves use and counts as cached (pending). False,
  // with nothing changed, when the cap has no room, the shard is closed or
  // the block's generation is no longer `generation`.
  // `to_poll` (when given: a release) is set to the oldest retiring block,
  // for the caller to check, as TakeBack's; a released block is parked only
  // when it is a whole segment (a part merges with its free neighbours at
  // its release).
  bool Park(AllocationBlock* block, uint64_t generation,
            AllocationBlock** to_poll = nullptr);
  // The block parked on `request.stream` for its lease size, leased (a hit);
  // nullptr when there is none. Stale blocks go to `stale` (as TakeCached);
  // `deferred_left` (set when none is given) tells whether a parked block's
  // fence is still deferred. With `unchecked`, the slot's block may be
  // leased unchecked as TakeCached does (then nothing is returned and
  // nothing is deferred).
  AllocationBlock* TakeParked(const LeaseRequest& request, uint64_t generation,
                              BlockVector* stale, bool* deferred_left,
                              UncheckedLease* unchecked = nullptr);
  // Takes out the parked blocks of `stream` (all with nullopt; only those
  // whose fence is deferred with `deferred_only`) to be fenced: back in use
  // for the caller to release as leases that ended.
  void Unpark(std::optional<NativeStream> stream, bool deferred_only,
              BlockVector* out);
  // Whether blocks may be parked (or wait in the release slot); read
  // without the lock (a hint: a block parked meanwhile is fenced by a later
  // call).
  bool MayHaveParked() const {
    return any_parked_.load(std::memory_order_relaxed) || slot_.occupied();
  }

  // --- The release slot (release_slot.h) -----------------------------------
  // A block released onto its lane (as Park: a whole segment, of
  // `generation`) is left in the slot without the lock; the next holder of
  // the lock parks it, or, as a request of its stream and lease size, takes
  // it back with a lease's own bookkeeping (TakeParked, TakeCached). Every
  // other method settles the slot as it locks (SettledLock), as SettleSlot
  // does for a caller that reads the device's cached bytes: what they see
  // is as if Park had run at the release. False, nothing changed, when the
  // slot is full or closed, a retiring block waits for a release to check it
  // (Park's `to_poll`), or the cap has no room. On true the block carries
  // the hold its lease had on this shard's lease owner (slot_hold) and the
  // caller must touch neither it nor this shard again: the block may be
  // leased again, and the cache closed, before Stash returns.
  bool Stash(AllocationBlock* block, uint64_t generation);
  void SettleSlot();
  // The count of holds on this shard's lease owner (AllocationLeaseOwner),
  // from which a slot block's hold is dropped when the block leaves the
  // slot other than as a lease; set once, before the first lease.
  void set_lease_holds(std::atomic<int64_t>* holds) { lease_holds_ = holds; }

  // --- Freeing --------------------------------------------------------------
  // Takes wholly free segments until at least `bytes` were taken, plus every
  // retiring one when `with_retiring`: largest class first (ready before
  // pending within a class), or with `best_match` the smallest segment of
  // `bytes` or more when there is one; segments of `smaller_than` bytes or
  // more are left.
  void TakeForRelease(size_t bytes, bool with_retiring, bool best_match,
                      size_t smaller_than, uint64_t generation,
                      BlockVector* out, BlockVector* stale);
  // Idle blocks the caller would free, under one lock: a whole segment stays
  // in `blocks` for the caller to free; part of a segment goes into the free
  // index instead (merged; dropped from `blocks`), unless its merge made a
  // whole segment over the cap, which takes its place in `blocks`.
  void KeepIfParts(BlockVector* blocks);
  // Forgets a block without a runtime call (`how`: dropped or leaked): its
  // segment is counted as retired once its last block is forgotten.
  void Forget(AllocationBlock* block, RetireReason how);
  // Takes everything the shard holds but its leases: wholly free segments
  // (parked ones fenced at their release too) and retiring blocks into
  // `blocks`, stable buffers into `stable`; a parked block whose fence is
  // still deferred is leaked (into `stale`: never freed unfenced). `close`:
  // later releases leak. `leak`: what is taken is counted as leaked here (the
  // runtime may not be called).
  void TakeEverything(bool close, bool leak, uint64_t generation,
                      BlockVector* blocks, std::vector<void*>* stable,
                      SpareEvents* spares, BlockVector* stale);
  void TakeStale(uint64_t generation, BlockVector* stale);
  // The oldest retiring block, or nullptr (also when one retired by another
  // thread is not seen yet: polling is a hint); RestoreRetiring puts it
  // back.
  AllocationBlock* TakeOldestRetiring();
  void RestoreRetiring(AllocationBlock* block);

  // --- Stable buffers -------------------------------------------------------
  struct StableClaim {
    void* existing = nullptr;        // the buffer already holds the bytes
    StableBuffer* buffer = nullptr;  // else: claimed (busy) for the caller
  };
  // Waits until no other thread (re)allocates `name`, then returns its
  // buffer if it holds `bytes`, else claims the entry for the caller, who
  // allocates the new buffer while the old one stays in place.
  StableClaim ClaimStable(absl::string_view name, size_t bytes,
                          uint64_t generation, BlockVector* stale);
  // Ends a claim. With `ptr` (of `capacity` bytes, allocated in `generation`)
  // installs it (it enters the shard's care) and returns the buffer it
  // replaced for the caller to free
  // (nullptr: none, or one of a dead generation, counted as dropped). With
  // nullptr (the allocation failed) the old buffer stays unless its
  // generation is no longer `generation`.
  void* FinishStable(StableBuffer* buffer, void* ptr, size_t capacity,
                     uint64_t generation);
  // Empties `name`'s buffer; returns its memory (nullptr: none).
  void* TakeStable(absl::string_view name, uint64_t generation,
                   BlockVector* stale);

  // --- Counting -------------------------------------------------------------
  void Count(CacheCounter tally);
  // The single retire path: `count` handles left the shard's care.
  void Retire(RetireReason how, int64_t count = 1);

  AllocationCacheStats Stats() const;
  void AppendOutstanding(std::vector<OutstandingLease>* out) const;
  // For snapshots, under the shard's lock: every block it lists (leased,
  // cached ready or pending, retiring) and every stable buffer holding
  // memory. Blocks taken out of use (held, or a capture router's) are not
  // listed here. A block being fenced (`fencing`) is visited as pending; its
  // `events` and `release_stream` are written outside the lock meanwhile and
  // must not be read (its `uses` may).
  void ForEachBlock(
      absl::FunctionRef<void(const AllocationBlock&, BlockUse)> visit,
      absl::FunctionRef<void(absl::string_view, const StableBuffer&)> stable)
      const;

 private:
  // Merges `block` with the free blocks beside it and lists the result in
  // the free index (`oldest`: as the oldest pending block). Returns nullptr,
  // or the merged block when it is a whole segment the cap has no room for
  // (not listed: the caller retires or frees it).
  // `released`: `block` was just released (its events were recorded after
  // its lease), so its event may cover its neighbours' (segment.h).
  // SettleCandidates' bookkeeping of the candidates not chosen (kept,
  // dropped, leaked) and of a chosen one of a dead generation (nullptr is
  // returned then).
  AllocationBlock* SettleOthersLocked(AllocationBlock* chosen,
                                      const BlockVector& keep,
                                      const BlockVector& dropped,
                                      const BlockVector& leaked,
                                      uint64_t generation, BlockVector* garbage)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  AllocationBlock* AddCachedLocked(AllocationBlock* block, bool oldest,
                                   bool released = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  AllocationBlock* MergeLocked(AllocationBlock* block, bool released)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Merges every run of free blocks side by side, fence bound or not.
  void CoalesceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Cuts `block` to `bytes` when the rest is worth keeping; the rest is
  // listed free, with the block's events when `rest_takes_events`.
  void SplitLocked(AllocationBlock* block, size_t bytes, bool rest_takes_events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The bookkeeping below is defined here, inline: every lease and release
  // passes through it, the parked cycle from shard_kept.cc.
  // Gives back what Stash reserved for `block` (a capped cache's).
  void UnreserveSlotBlock(const AllocationBlock& block) {
    if (SlotReserves()) cached_bytes_.Remove(block.size);
  }
  // A block enters (or leaves) the cached gauges and the device's cached
  // bytes, listed or parked: false, nothing counted, when a whole segment
  // finds no room under the cap (a part of a segment is cached whatever
  // the cap).
  bool CountCachedLocked(const AllocationBlock& block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (IsWholeSegment(&block)) {
      if (!cached_bytes_.Reserve(block.size)) return false;
    } else {
      // Part of a segment cannot go back to the runtime: it stays cached
      // whatever the cap (which holds for whole segments).
      cached_bytes_.Add(block.size);
    }
    ++stats_.blocks_cached;
    stats_.bytes_cached += static_cast<int64_t>(block.size);
    return true;
  }
  void UncountCachedLocked(const AllocationBlock& block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    --stats_.blocks_cached;
    stats_.bytes_cached -= static_cast<int64_t>(block.size);
    cached_bytes_.Remove(block.size);
  }
  void RemoveCachedLocked(AllocationBlock* block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  AllocationBlock* TakeOldestPendingLocked(size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t TakeCachedLocked(size_t bytes, bool best_match, size_t smaller_than,
                          BlockVector* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TakeAllCachedLocked(BlockVector* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddRetiringLocked(AllocationBlock* block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  AllocationBlock* TakeOldestRetiringLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // any_retiring_ after a change of retiring_.
  void NoteRetiringLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    any_retiring_.store(!retiring_.empty(), std::memory_order_relaxed);
  }
  void TakeAllRetiringLocked(BlockVector* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LeaseLocked(AllocationBlock* block, const LeaseRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    block->uses.clear();
    if (request.stream != nullptr) block->uses.push_back(request.stream);
    StampLeaseLocked(block, request);
    // Spares of a merge join the lease's: its release re-records them.
    if (!block->spare_events.empty()) {
      MoveEvents(block->spare_events, block->events);
    }
    AddInUseLocked(block);
    in_use_.RaisePeak();
  }
  // The lease's own fields, which every lease sets (LeaseLocked, and a
  // block taken back from the release slot, in use throughout).
  void StampLeaseLocked(AllocationBlock* block, const LeaseRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    block->requested = request.bytes;
    block->stream = request.stream;
    block->release_stream = nullptr;
    block->lease_id = lease_ids_.Next();
    block->where = request.where;
    block->leased_unix_ns = request.leased_unix_ns;
    block->leased_at = ++lease_count_;
    // A spare serves a lease of the general cache, whose release re-records
    // it. A room's block (`owner`: a graph pool's) goes back to its room,
    // which records nothing at a release inside a capture and reuses only
    // blocks without events there: a lent spare would keep the block from
    // that reuse and stand for work it never fenced.
    if (block->owner == nullptr) LendSpare(block, &spare_events_);
  }
  // Whether leasing `block` for `request` takes it to another stream than
  // its previous lease's (AllocationBlock::fence_at_release): so on every
  // path but its own lane (TakeParkedLocked clears it).
  static void NoteCrossing(AllocationBlock* block,
                           const LeaseRequest& request) {
    block->fence_at_release =
        block->stream != nullptr && block->stream != request.stream;
  }
  // A block enters (or leaves) the in-use list and gauges; a lease also
  // raises the peak (LeaseLocked).
  void AddInUseLocked(AllocationBlock* block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    in_use_.Add(block);
    block->whole_in_use = IsWholeSegment(block);
  }
  void RemoveInUseLocked(AllocationBlock* block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    in_use_.Remove(block);
  }
  // Takes out what is older than `generation` once per generation, and
  // again after a stale block came in (swept_generation.h). A late
  // caller's older `generation` never drops a newer one's blocks.
  void TakeStaleLocked(uint64_t generation, BlockVector* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (swept_.SweepDue(generation)) TakeStaleSlowLocked(generation, out);
  }
  bool DeadLocked(const AllocationBlock& block, uint64_t generation) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return swept_.Dead(block, generation);
  }
  void NoteStaleLocked(const AllocationBlock& block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    swept_.NoteStale(block.generation);
  }
  void TakeStaleSlowLocked(uint64_t generation, BlockVector* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unlinks `block` (going, `how`) from its segment (segment.h,
  // LeaveSegment): true when the segment departs with it.
  bool LeaveLocked(AllocationBlock* block, RetireReason how)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return LeaveSegment(block, how == RetireReason::kLeaked, &records_,
                        &leaked_parts_);
  }
  // The block parked on the request's stream for its lease size, leased (a
  // hit); nullptr when there is none.
  AllocationBlock* TakeParkedLocked(const LeaseRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The slot's block (Stash) leased to `request` when it is of the
  // request's stream, lease size and `generation` (a hit, as a lane's);
  // else nullptr, and the block is, by `miss`:
  enum class SlotMiss {
    kPark,       // parked (SettleSlotLocked)
    kLeave,      // back in the slot when of `generation` (parked if a
                 // release filled it meanwhile), else parked
    kCandidate,  // put in `candidates` when it is what TakeCached's
                 // lone-lane shortcut would give (fenced, of another
                 // stream, of exactly the lease size, nothing else
                 // cached), out of use; else parked
  };
  // Called before TakeStaleLocked, as every settling is: a stale block is
  // parked before its generation's drop, which takes it.
  // (With `unchecked`, the lone-lane shortcut's block is leased unchecked
  // instead, whatever `miss` says: TakeCached.)
  AllocationBlock* TakeSlotLocked(const LeaseRequest& request,
                                  uint64_t generation, SlotMiss miss,
                                  BlockVector* candidates = nullptr,
                                  UncheckedLease* unchecked = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // TakeSlotLocked's other cases: `block` (in the slot) is not the
  // request's.
  AllocationBlock* SlotMissLocked(AllocationBlock* block,
                                  const LeaseRequest& request,
                                  uint64_t generation, SlotMiss miss,
                                  BlockVector* candidates,
                                  UncheckedLease* unchecked)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The slot's `block`, in use throughout, leased to `request` as a slot
  // hit is, its release's fields saved in `unchecked` (TakeCached).
  void LeaseUncheckedLocked(AllocationBlock* block, const LeaseRequest& request,
                            UncheckedLease* unchecked)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What Park would have done at the slot's block's release.
  void SettleSlotLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ParkFromSlotLocked(AllocationBlock* block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the hold a block taken out of the slot carried, unless a lease
  // takes it over. Never the owner's last hold: the cache's own hold stays
  // until after its end has closed the slot (AllocationCacheCore::
  // DropLeaseAnchors comes after FreeEverything(close)), and before that
  // every block that leaves the slot does so under this lock (a candidate
  // for another stream keeps the hold until SettleCandidates, under this
  // lock again, hands it to the lease or drops it).
  void DropSlotHoldLocked(AllocationBlock* block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!block->slot_hold) return;
    block->slot_hold = false;
    lease_holds_->fetch_sub(1, std::memory_order_acq_rel);
  }
  // Whether Stash reserves a block's bytes against the cap (a capped cache;
  // uncapped, the count at settling cannot fail).
  bool SlotReserves() const { return cached_bytes_.capped(); }
  // The shard's lock, taken with the release slot settled: what every
  // method holds but the two that may take the slot's block back. Settling
  // in a const method too: it completes a release's bookkeeping, which
  // changes nothing a reader could tell from Park having run at the release.
  class ABSL_SCOPED_LOCKABLE SettledLock {
   public:
    explicit SettledLock(const AllocationShard* shard)
        ABSL_EXCLUSIVE_LOCK_FUNCTION(shard->mu_)
        : shard_(const_cast<AllocationShard*>(shard)) {
      shard_->mu_.Lock();
      shard_->SettleSlotLocked();
    }
    SettledLock(const SettledLock&) = delete;
    SettledLock& operator=(const SettledLock&) = delete;
    ~SettledLock() ABSL_UNLOCK_FUNCTION() { shard_->mu_.Unlock(); }

   private:
    AllocationShard* const shard_;
  };
  // Lists every parked block whose fence is recorded (release_stream set)
  // in the free index: no runtime call. A request no lane serves does so
  // before it searches the index.
  void ListFencedParkedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Parked blocks leave the cached gauges (and the device's cached bytes).
  void UncacheParkedLocked(const AllocationBlock& block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Parked blocks of older generations into `out`; returns the handles that
  // left with them.
  int64_t TakeStaleParkedLocked(uint64_t generation, BlockVector* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes out the parked blocks fenced at their release, uncounted as
  // cached: whole segments, to be freed as the free index's are.
  void TakeFencedParkedLocked(BlockVector* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leaks what is still parked when everything is taken (a fence recorded
  // now could not be trusted, or may not be made): no runtime call.
  void LeakParkedLocked(BlockVector* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `name`'s stable entry, once no other thread (re)allocates it.
  StableBuffer* StableEntryLocked(absl::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int device_;
  const MemoryKind kind_;
  // The device's cached bytes against the cap (cached_bytes.h).
  CachedBytes cached_bytes_;

  mutable Mutex mu_;
  FreeIndex index_ ABSL_GUARDED_BY(mu_);
  // Lease ids, drawn in blocks from the process's counter (one shared write
  // per 65,536 allocations, not one per allocation).
  LeaseIdBlock lease_ids_ ABSL_GUARDED_BY(mu_);
  // Leases, and parked blocks being fenced, with their gauges (in_use.h).
  InUseList in_use_ ABSL_GUARDED_BY(mu_);
  // Records of blocks a merge dropped, for the next split (segment.h).
  BlockRecords records_ ABSL_GUARDED_BY(mu_);
  // Spare events for leases that have none (segment.h).
  SpareEvents spare_events_ ABSL_GUARDED_BY(mu_);
  // Leases made so far: the clock of AllocationBlock::leased_at/listed_at.
  uint64_t lease_count_ ABSL_GUARDED_BY(mu_) = 0;
  PrimaryList retiring_ ABSL_GUARDED_BY(mu_);
  // Records of leaked parts of segments (LeaveSegment), until the shard
  // goes.
  PrimaryList leaked_parts_ ABSL_GUARDED_BY(mu_);
  SweptGeneration swept_ ABSL_GUARDED_BY(mu_);
  // Gauges and policy counters; the departure counters come from ledger_.
  AllocationCacheStats stats_ ABSL_GUARDED_BY(mu_);
  HandleLedger ledger_ ABSL_GUARDED_BY(mu_);
  // Blocks released with their fence deferred (parked.h).
  ParkedBlocks parked_ ABSL_GUARDED_BY(mu_);
  // !parked_.empty(), for MayHaveParked.
  std::atomic<bool> any_parked_{false};
  // A released block whose Park is still to be done (Stash).
  ReleaseSlot slot_;
  std::atomic<int64_t>* lease_holds_ = nullptr;  // see set_lease_holds
  // !retiring_.empty(), for Stash.
  std::atomic<bool> any_retiring_{false};
  // Set when the cache is destroyed: later releases leak.
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // AcquireStable buffers by name (kDevice shards only).
  StableEntries stable_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_SHARD_H_
