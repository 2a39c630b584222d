// Owner-only shared-memory files: the one place gpupool creates and opens
// the files other processes map (the IPC export tables, the simulator's
// IPC segments).
//
// Every file lives in the calling user's directory, /dev/shm/gpupool-<euid>
// (mode 0700, owned by the caller), opened once per process with
// O_DIRECTORY | O_NOFOLLOW and checked with fstat on the descriptor; files are
// made and opened relative to it (openat), so no path is resolved twice and
// no other user can plant, swap or link a file in it. An existing file is
// opened with O_NOFOLLOW | O_NONBLOCK (a planted symlink or FIFO neither
// redirects nor hangs the caller) and checked with fstat on the descriptor
// that will be mapped: a regular file, owned by the caller, no group or
// other permission bits, exactly the expected size (a truncated file is
// refused, never mapped: mapping it would raise SIGBUS on access).
//
// Sharing is between processes of one effective uid: that is the trust
// boundary (a same-uid process can ptrace us anyway).
//
// Thread safety: every function may be called concurrently.

#ifndef GPUPOOL_SRC_BASE_OWNER_FILES_H_
#define GPUPOOL_SRC_BASE_OWNER_FILES_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/export.h"

namespace gpupool::internal {

// The calling user's directory path (for messages and tests).
GPUPOOL_EXPORT std::string OwnerDirectoryPath();

// Creates `name` (new, mode 0600, `bytes` long) in the user's directory and
// returns its descriptor (O_RDWR | O_CLOEXEC), holding a shared flock(2) on
// it: the creator's liveness, which the kernel drops when the creator dies.
// The lock is taken before the file gets its size, so a reaper (which opens
// only files of the expected size) never takes a file being made for a dead
// one. PermissionDenied when the directory is not the caller's own (another
// user made it, or it is not a directory); AlreadyExists; Internal for other
// system errors.
GPUPOOL_EXPORT absl::StatusOr<int> CreateOwnerFile(absl::string_view name,
                                                   size_t bytes);

// Whether the creator of `name` has died: nobody holds the liveness lock
// CreateOwnerFile took (probed exclusively on a fresh open file description,
// then dropped). True when the file is gone too; false while the creator
// lives, and for a file that is not `bytes` long or not ours (not ours to
// judge).
// kAnyOwnerFileSize: any size but 0 (a file being made is 0 bytes until its
// creator holds the liveness lock).
inline constexpr size_t kAnyOwnerFileSize = ~size_t{0};
GPUPOOL_EXPORT bool OwnerFileCreatorDead(absl::string_view name, size_t bytes);

// Opens the existing `name` of the user's directory read-write after the
// checks above. NotFound: no such file. PermissionDenied: a symlink, not a
// regular file, another owner, group or other bits set, or the directory is
// not the caller's own. InvalidArgument: not `bytes` long.
GPUPOOL_EXPORT absl::StatusOr<int> OpenOwnerFile(absl::string_view name,
                                                 size_t bytes);

// Removes `name` from the user's directory (missing is not an error).
GPUPOOL_EXPORT void UnlinkOwnerFile(absl::string_view name);

// Files to remove when this process exits normally (exit() or a return
// from main), for owners that are never destroyed (the process-wide
// pools); Forget when the owner removed it itself. A killed process leaves
// its files to the reapers. A fork() child removes nothing of its parent's.
GPUPOOL_EXPORT void UnlinkOwnerFileAtExit(absl::string_view name);
GPUPOOL_EXPORT void ForgetOwnerFileAtExit(absl::string_view name);

// Calls `visit` with each entry name of the user's directory that starts
// with `prefix` (the reapers' walk). Nothing when there is no directory.
GPUPOOL_EXPORT void ForEachOwnerFile(absl::string_view prefix,
                                     void (*visit)(const std::string& name,
                                                   void* arg),
                                     void* arg);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_BASE_OWNER_FILES_H_
