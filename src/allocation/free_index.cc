// The TLSF-style index over free blocks; see free_index.h.

#include "src/allocation/free_index.h"

#include <algorithm>

#include "src/allocation/segment.h"
#include "src/allocation/size_classes.h"

namespace gpupool::internal {

FreeIndex::FreeIndex(int size_class_count, size_t max_split_ratio)
    : max_split_ratio_(max_split_ratio),
      bins_(static_cast<size_t>(
          std::min(std::max(size_class_count, 1), ClassBitmap::kMaxClasses))) {}

void FreeIndex::Insert(AllocationBlock* block, bool oldest) {
  // Whoever sizes a block files it (FloorSizeClass); a merged block can
  // never outgrow the classes (segments are at most max_cached_block_bytes).
  const int size_class =
      std::min(block->size_class, static_cast<int>(bins_.size()) - 1);
  block->free_listed = true;
  Bin& bin = bins_[size_class];
  if (block->events.empty()) {
    block->release_stream = nullptr;
    bin.ready.PushFront(block);
    ready_classes_.Set(size_class);
    return;
  }
  if (oldest) {
    bin.pending.PushFront(block);
  } else {
    bin.pending.PushBack(block);
  }
  pending_classes_.Set(size_class);
  if (block->release_stream == nullptr) return;
  StreamBins* entry = StreamEntry(block->release_stream);
  const bool inserted = entry == nullptr;
  if (inserted) {
    auto made = std::make_unique<StreamBins>();
    made->lists.resize(bins_.size());
    entry = made.get();
    by_stream_.emplace(block->release_stream, std::move(made));
    memo_stream_ = block->release_stream;
    memo_entry_ = entry;
  }
  StreamBins& stream = *entry;
  if (oldest) {
    stream.lists[size_class].PushBack(block);
  } else {
    stream.lists[size_class].PushFront(block);
  }
  stream.classes.Set(size_class);
  block->stream_lists = &stream;
  if (inserted && by_stream_.size() > kMaxIdleStreams) SweepIdleStreams();
}

void FreeIndex::Remove(AllocationBlock* block) {
  const int size_class = block->size_class;
  block->free_listed = false;
  Bin& bin = bins_[size_class];
  if (block->events.empty()) {
    bin.ready.Remove(block);
    if (bin.ready.empty()) ready_classes_.Clear(size_class);
    return;
  }
  bin.pending.Remove(block);
  if (bin.pending.empty()) pending_classes_.Clear(size_class);
  if (block->release_stream == nullptr) return;
  StreamBins& stream = *static_cast<StreamBins*>(block->stream_lists);
  block->stream_lists = nullptr;
  StreamList& list = stream.lists[size_class];
  list.Remove(block);
  if (list.empty()) stream.classes.Clear(size_class);
}

template <typename Head>
AllocationBlock* FreeIndex::Find(size_t bytes, Classes classes,
                                 const ClassBitmap& non_empty,
                                 Head head) const {
  if (classes.floor != classes.fits && classes.floor < size_class_count()) {
    AllocationBlock* block = head(classes.floor);
    if (block != nullptr && block->size >= bytes) return block;
  }
  const int found = non_empty.FindAtOrAbove(classes.fits);
  return found < 0 || found >= size_class_count() ? nullptr : head(found);
}

AllocationBlock* FreeIndex::FindSameStream(size_t bytes, Classes classes,
                                           NativeStream stream) const {
  const StreamBins* entry = StreamEntry(stream);
  if (entry == nullptr) return nullptr;
  const StreamBins& bins = *entry;
  return Find(bytes, classes, bins.classes,
              [&](int c) { return bins.lists[c].front(); });
}

AllocationBlock* FreeIndex::FindReady(size_t bytes, Classes classes) const {
  return Find(bytes, classes, ready_classes_,
              [&](int c) { return bins_[c].ready.front(); });
}

AllocationBlock* FreeIndex::FindOldestPending(size_t bytes,
                                              Classes classes) const {
  return Find(bytes, classes, pending_classes_,
              [&](int c) { return bins_[c].pending.front(); });
}

AllocationBlock* FreeIndex::FindSameStream(size_t bytes,
                                           NativeStream stream) const {
  return FindSameStream(bytes, Classes(bytes), stream);
}

AllocationBlock* FreeIndex::FindReady(size_t bytes) const {
  return FindReady(bytes, Classes(bytes));
}

AllocationBlock* FreeIndex::FindOldestPending(size_t bytes) const {
  return FindOldestPending(bytes, Classes(bytes));
}

AllocationBlock* FreeIndex::FindBestFit(size_t bytes, NativeStream stream,
                                        bool with_pending) const {
  const Classes classes(bytes);
  AllocationBlock* best = nullptr;
  if (stream != nullptr) {
    best = ServingOrNull(FindSameStream(bytes, classes, stream), bytes,
                         max_split_ratio_);
    if (best != nullptr && best->size_class <= classes.fits) return best;
  }
  // A larger block of the stream's own would be split where a tighter one
  // may be free elsewhere: the rest of the larger block then strands in a
  // segment kept by the lease.
  if (AllocationBlock* ready =
          ServingOrNull(FindReady(bytes, classes), bytes, max_split_ratio_);
      ready != nullptr && (best == nullptr || ready->size < best->size)) {
    best = ready;
  }
  AllocationBlock* oldest =
      ServingOrNull(FindOldestPending(bytes, classes), bytes, max_split_ratio_);
  if (oldest != nullptr && (best == nullptr || oldest->size < best->size) &&
      (with_pending || UsableAtOnce(oldest, stream))) {
    best = oldest;
  }
  return best;
}

AllocationBlock* FreeIndex::SmallestWholeOf(size_t bytes) {
  // Classes from the one `bytes` falls in upward: the first class with a
  // whole segment that fits holds the best match (later classes are larger).
  const int first = bytes < kMinSizeClassBytes ? 0 : FloorSizeClass(bytes);
  for (size_t i = static_cast<size_t>(std::max(first, 0)); i < bins_.size();
       ++i) {
    AllocationBlock* best = nullptr;
    for (PrimaryList* list : {&bins_[i].ready, &bins_[i].pending}) {
      for (AllocationBlock* block = list->front(); block != nullptr;
           block = PrimaryList::Next(block)) {
        if (IsWholeSegment(block) && block->size >= bytes &&
            (best == nullptr || block->size < best->size)) {
          best = block;
        }
      }
    }
    if (best != nullptr) return best;
  }
  return nullptr;
}

FreeIndex::StreamBins* FreeIndex::LookUpStream(NativeStream stream) const {
  auto it = by_stream_.find(stream);
  if (it == by_stream_.end()) return nullptr;
  memo_stream_ = stream;
  memo_entry_ = it->second.get();
  return memo_entry_;
}

void FreeIndex::SweepIdleStreams() {
  // Streams come and go (user-created ones too): keep the map small.
  memo_stream_ = nullptr;
  memo_entry_ = nullptr;
  for (auto it = by_stream_.begin(); it != by_stream_.end();) {
    if (it->second->classes.empty()) {
      by_stream_.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace gpupool::internal
