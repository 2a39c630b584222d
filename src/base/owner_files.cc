// Owner-only shared-memory files (owner_files.h).

#include "src/base/owner_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace gpupool::internal {
namespace {

std::string Errno(int error) { return strerror(error); }

// The user's directory, created if missing, as an O_DIRECTORY fd checked
// with fstat: a directory, owned by the caller, no group/other bits.
absl::StatusOr<int> OpenDirectory(bool create) {
  const std::string path = OwnerDirectoryPath();
  if (create && mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(
        absl::StrCat("cannot create ", path, ": ", Errno(errno)));
  }
  const int fd =
      open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    }
    if (error == ELOOP || error == ENOTDIR) {
      return absl::PermissionDeniedError(absl::StrCat(
          path, " is not a directory of this user (a link or a file)"));
    }
    return absl::InternalError(
        absl::StrCat("cannot open ", path, ": ", Errno(error)));
  }
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISDIR(info.st_mode) ||
      info.st_uid != geteuid() || (info.st_mode & 077) != 0) {
    close(fd);
    return absl::PermissionDeniedError(absl::StrCat(
        path,
        " is not this user's private directory (another owner, or group or "
        "other permission bits): gpupool will not share memory through it"));
  }
  return fd;
}

}  // namespace

std::string OwnerDirectoryPath() {
  return absl::StrCat("/dev/shm/gpupool-", geteuid());
}

absl::StatusOr<int> CreateOwnerFile(absl::string_view name, size_t bytes) {
  absl::StatusOr<int> dir = OpenDirectory(/*create=*/true);
  if (!dir.ok()) return dir.status();
  const std::string file(name);
  const int fd =
      openat(*dir, file.c_str(),
             O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  const int error = errno;
  if (fd < 0) {
    close(*dir);
    const std::string what = absl::StrCat(
        "cannot create ", OwnerDirectoryPath(), "/", file, ": ", Errno(error));
    return error == EEXIST ? absl::AlreadyExistsError(what)
                           : absl::InternalError(what);
  }
  // umask may have cleared bits, never added any; the liveness lock before
  // the size (see the header); ftruncate sizes it.
  if (fchmod(fd, 0600) != 0 || flock(fd, LOCK_SH | LOCK_NB) != 0 ||
      ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int failed = errno;
    unlinkat(*dir, file.c_str(), 0);
    close(*dir);
    close(fd);
    return absl::InternalError(
        absl::StrCat("cannot size ", file, ": ", Errno(failed)));
  }
  close(*dir);
  return fd;
}

absl::StatusOr<int> OpenOwnerFile(absl::string_view name, size_t bytes) {
  absl::StatusOr<int> dir = OpenDirectory(/*create=*/false);
  if (!dir.ok()) return dir.status();
  const std::string file(name);
  const int fd =
      openat(*dir, file.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  const int error = errno;
  close(*dir);
  const std::string path = absl::StrCat(OwnerDirectoryPath(), "/", file);
  if (fd < 0) {
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    }
    if (error == ELOOP) {
      return absl::PermissionDeniedError(
          absl::StrCat(path, " is a symbolic link: refused"));
    }
    if (error == EACCES || error == EPERM) {
      return absl::PermissionDeniedError(
          absl::StrCat(path, ": ", Errno(error)));
    }
    return absl::InternalError(
        absl::StrCat("cannot open ", path, ": ", Errno(error)));
  }
  struct stat info;
  absl::Status refused;
  if (fstat(fd, &info) != 0) {
    refused = absl::InternalError(
        absl::StrCat("cannot fstat ", path, ": ", Errno(errno)));
  } else if (!S_ISREG(info.st_mode)) {
    refused = absl::PermissionDeniedError(
        absl::StrCat(path, " is not a regular file: refused"));
  } else if (info.st_uid != geteuid()) {
    refused = absl::PermissionDeniedError(
        absl::StrCat(path, " belongs to uid ", info.st_uid,
                     ", not to this user (uid ", geteuid(), "): refused"));
  } else if ((info.st_mode & 077) != 0) {
    refused = absl::PermissionDeniedError(
        absl::StrCat(path, " is readable or writable by other users: refused"));
  } else if (bytes == kAnyOwnerFileSize
                 ? info.st_size == 0
                 : static_cast<uint64_t>(info.st_size) != bytes) {
    refused = absl::InvalidArgumentError(
        absl::StrCat(path, " holds ", info.st_size, " bytes, not the ", bytes,
                     " expected (truncated or not gpupool's): refused"));
  }
  if (!refused.ok()) {
    close(fd);
    return refused;
  }
  return fd;
}

bool OwnerFileCreatorDead(absl::string_view name, size_t bytes) {
  absl::StatusOr<int> fd = OpenOwnerFile(name, bytes);
  if (!fd.ok()) return fd.status().code() == absl::StatusCode::kNotFound;
  const bool dead = flock(*fd, LOCK_EX | LOCK_NB) == 0;
  close(*fd);
  return dead;
}

void UnlinkOwnerFile(absl::string_view name) {
  absl::StatusOr<int> dir = OpenDirectory(/*create=*/false);
  if (!dir.ok()) return;
  unlinkat(*dir, std::string(name).c_str(), 0);
  close(*dir);
}

namespace {

struct AtExit {
  absl::Mutex mu;
  pid_t pid ABSL_GUARDED_BY(mu) = 0;  // the process that registered them
  absl::flat_hash_set<std::string> names ABSL_GUARDED_BY(mu);
};

AtExit& Registry() {
  static AtExit* const registry = new AtExit;  // never destroyed
  return *registry;
}

void UnlinkRegisteredFiles() {
  AtExit& registry = Registry();
  absl::MutexLock lock(&registry.mu);
  if (registry.pid != getpid()) return;  // a fork() child's exit
  for (const std::string& name : registry.names) UnlinkOwnerFile(name);
  registry.names.clear();
}

}  // namespace

void UnlinkOwnerFileAtExit(absl::string_view name) {
  AtExit& registry = Registry();
  absl::MutexLock lock(&registry.mu);
  if (registry.pid != getpid()) {
    registry.pid = getpid();
    registry.names.clear();  // a fork() child: its parent's names
    std::atexit(&UnlinkRegisteredFiles);
  }
  registry.names.insert(std::string(name));
}

void ForgetOwnerFileAtExit(absl::string_view name) {
  AtExit& registry = Registry();
  absl::MutexLock lock(&registry.mu);
  registry.names.erase(std::string(name));
}

void ForEachOwnerFile(absl::string_view prefix,
                      void (*visit)(const std::string& name, void* arg),
                      void* arg) {
  absl::StatusOr<int> dir = OpenDirectory(/*create=*/false);
  if (!dir.ok()) return;
  DIR* stream = fdopendir(*dir);  // owns the fd from here
  if (stream == nullptr) {
    close(*dir);
    return;
  }
  while (const dirent* entry = readdir(stream)) {
    const std::string name = entry->d_name;
    if (absl::StartsWith(name, prefix)) visit(name, arg);
  }
  closedir(stream);
}

}  // namespace gpupool::internal
