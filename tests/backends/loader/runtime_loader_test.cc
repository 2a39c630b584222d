// Tests of the runtime loader (src/backends/loader/runtime_library.h) over
// real shared libraries: the fake runtime (tests/fake_runtime), a variant of it
// lacking one entry point, and paths that do not exist. No vendor header and
// no GPU: built and run everywhere. The CUDA and HIP backends over the loader
// are tested end to end in tests/backends/loader/backend_loader_test.cc.

#include <stdlib.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gtest/gtest.h"
#include "src/backends/loader/runtime_library.h"
#include "tests/backends/fake_runtime/fake_runtime_state.h"

namespace gpupool {
namespace {

using ::gpupool::loader_internal::EntryPoint;
using ::gpupool::loader_internal::LibrarySearch;
using ::gpupool::loader_internal::ResolveEntryPoints;
using ::gpupool::loader_internal::RuntimeLibrary;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kFake[] = GPUPOOL_FAKE_CUDART;
constexpr char kFakeMissingSymbol[] = GPUPOOL_FAKE_CUDART_OLD;
// Loaded by one test only: "loadable, not yet loaded".
constexpr char kFakeHip[] = GPUPOOL_FAKE_AMDHIP64;
constexpr char kMissing[] = "/nonexistent/gpupool/libcudart.so.13";
constexpr char kEnvVar[] = "GPUPOOL_LOADER_TEST_RUNTIME";

// Sets or unsets kEnvVar for one test.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* value) {
    if (value == nullptr) {
      unsetenv(kEnvVar);
    } else {
      setenv(kEnvVar, value, /*overwrite=*/1);
    }
  }
  ~ScopedEnv() { unsetenv(kEnvVar); }
};

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

TEST(RuntimeLibraryTest, OpenFileLoadsTheFileAndReportsItsPath) {
  absl::StatusOr<RuntimeLibrary> library =
      RuntimeLibrary::OpenFile("CUDA", kFake, "");
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ(library->path(), kFake);
  EXPECT_EQ(library->runtime(), "CUDA");
  EXPECT_NE(library->FindSymbol("cudaGetDeviceCount"), nullptr);
  EXPECT_NE(library->FindSymbol("gpupool_fake_runtime_state"), nullptr);
  EXPECT_EQ(library->FindSymbol("hipGetDeviceCount"), nullptr);
}

TEST(RuntimeLibraryTest, OpenFileOfAMissingFileIsUnavailableWithTheHint) {
  absl::StatusOr<RuntimeLibrary> library =
      RuntimeLibrary::OpenFile("CUDA", kMissing, "point X elsewhere");
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FaultOf(library.status()), Fault::kCaller);
  EXPECT_THAT(
      Message(library.status()),
      AllOf(HasSubstr("the CUDA runtime library"), HasSubstr(kMissing),
            HasSubstr("could not be loaded"), HasSubstr("point X elsewhere")));
}

TEST(RuntimeLibraryTest, OpenTriesCandidatesInOrder) {
  ScopedEnv env(nullptr);
  absl::StatusOr<RuntimeLibrary> library = RuntimeLibrary::Open(
      LibrarySearch{"CUDA", kEnvVar, {kMissing, kFake, kFakeMissingSymbol}});
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ(library->path(), kFake);
}

TEST(RuntimeLibraryTest, OpenPrefersACandidateAlreadyLoaded) {
  ScopedEnv env(nullptr);
  ASSERT_TRUE(RuntimeLibrary::OpenFile("CUDA", kFakeMissingSymbol, "").ok());
  // kFakeHip would load too, but the process already has the second
  // candidate: two copies of a runtime in one process do not share handles.
  absl::StatusOr<RuntimeLibrary> library = RuntimeLibrary::Open(
      LibrarySearch{"CUDA", kEnvVar, {kFakeHip, kFakeMissingSymbol}});
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ(library->path(), kFakeMissingSymbol);
}

TEST(RuntimeLibraryTest, NoCandidateNamesEveryOneAndTheVariable) {
  ScopedEnv env(nullptr);
  const std::string other = "libgpupool_no_such_runtime.so.1";
  absl::StatusOr<RuntimeLibrary> library =
      RuntimeLibrary::Open(LibrarySearch{"CUDA", kEnvVar, {kMissing, other}});
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FaultOf(library.status()), Fault::kCaller);
  EXPECT_THAT(Message(library.status()),
              AllOf(HasSubstr("no CUDA runtime library found"),
                    HasSubstr(kMissing), HasSubstr(other), HasSubstr(kEnvVar),
                    HasSubstr("LD_LIBRARY_PATH")));
}

TEST(RuntimeLibraryTest, TheVariableIsTheOnlyPlaceLookedWhenSet) {
  // The candidates would load; a variable naming a missing file must not fall
  // back to them.
  ScopedEnv env(kMissing);
  absl::StatusOr<RuntimeLibrary> library =
      RuntimeLibrary::Open(LibrarySearch{"CUDA", kEnvVar, {kFake}});
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Message(library.status()),
              AllOf(HasSubstr(kMissing), HasSubstr(kEnvVar),
                    HasSubstr("unset it to search for")));
}

TEST(RuntimeLibraryTest, TheVariableOverridesTheCandidates) {
  ScopedEnv env(kFake);
  absl::StatusOr<RuntimeLibrary> library = RuntimeLibrary::Open(
      LibrarySearch{"CUDA", kEnvVar, {kFakeMissingSymbol}});
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ(library->path(), kFake);
}

TEST(RuntimeLibraryTest, AnEmptyVariableIsUnset) {
  ScopedEnv env("");
  absl::StatusOr<RuntimeLibrary> library =
      RuntimeLibrary::Open(LibrarySearch{"CUDA", kEnvVar, {kFake}});
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ(library->path(), kFake);
}

TEST(RuntimeLibraryTest, ResolveFillsEverySlot) {
  absl::StatusOr<RuntimeLibrary> library =
      RuntimeLibrary::OpenFile("CUDA", kFake, "");
  ASSERT_TRUE(library.ok()) << library.status();
  void* count = nullptr;
  void* state = nullptr;
  const EntryPoint entries[] = {{"cudaGetDeviceCount", &count},
                                {"gpupool_fake_runtime_state", &state}};
  ASSERT_TRUE(library->Resolve(entries).ok());
  EXPECT_EQ(count, library->FindSymbol("cudaGetDeviceCount"));
  // The slot holds the library's own function: calling it reaches its state.
  auto* state_fn = reinterpret_cast<gpupool_fake::State* (*)()>(state);
  ASSERT_NE(state_fn, nullptr);
  EXPECT_EQ(state_fn(),
            reinterpret_cast<gpupool_fake::State* (*)()>(
                library->FindSymbol("gpupool_fake_runtime_state"))());
}

TEST(RuntimeLibraryTest, AMissingEntryPointIsNamedAndNoSlotIsWritten) {
  absl::StatusOr<RuntimeLibrary> library =
      RuntimeLibrary::OpenFile("CUDA", kFakeMissingSymbol, "");
  ASSERT_TRUE(library.ok()) << library.status();
  int sentinel = 0;
  void* count = &sentinel;
  void* wait = &sentinel;
  void* nope = &sentinel;
  const EntryPoint entries[] = {{"cudaGetDeviceCount", &count},
                                {"cudaStreamWaitEvent", &wait},
                                {"cudaNoSuchFunction", &nope}};
  const absl::Status status = library->Resolve(entries);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FaultOf(status), Fault::kCaller);
  EXPECT_THAT(Message(status),
              AllOf(HasSubstr(kFakeMissingSymbol),
                    HasSubstr("lacks cudaStreamWaitEvent, cudaNoSuchFunction"),
                    Not(HasSubstr("cudaGetDeviceCount"))));
  EXPECT_EQ(count, &sentinel);
  EXPECT_EQ(wait, &sentinel);
  EXPECT_EQ(nope, &sentinel);
}

TEST(RuntimeLibraryTest, AMissingOptionalEntryPointLeavesItsSlotNull) {
  absl::StatusOr<RuntimeLibrary> library =
      RuntimeLibrary::OpenFile("CUDA", kFakeMissingSymbol, "");
  ASSERT_TRUE(library.ok()) << library.status();
  int sentinel = 0;
  void* count = nullptr;
  void* wait = &sentinel;
  void* nope = &sentinel;
  const EntryPoint entries[] = {{"cudaGetDeviceCount", &count},
                                {"cudaStreamWaitEvent", &wait, true},
                                {"cudaNoSuchFunction", &nope, true}};
  ASSERT_TRUE(library->Resolve(entries).ok());
  EXPECT_EQ(count, library->FindSymbol("cudaGetDeviceCount"));
  EXPECT_NE(count, nullptr);
  EXPECT_EQ(wait, nullptr);
  EXPECT_EQ(nope, nullptr);
}

TEST(RuntimeLibraryTest, AMissingRequiredEntryPointIsNamedWithoutTheOptional) {
  absl::StatusOr<RuntimeLibrary> library =
      RuntimeLibrary::OpenFile("CUDA", kFakeMissingSymbol, "");
  ASSERT_TRUE(library.ok()) << library.status();
  int sentinel = 0;
  void* wait = &sentinel;
  void* nope = &sentinel;
  const EntryPoint entries[] = {{"cudaStreamWaitEvent", &wait},
                                {"cudaNoSuchFunction", &nope, true}};
  const absl::Status status = library->Resolve(entries);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Message(status), AllOf(HasSubstr("lacks cudaStreamWaitEvent "),
                                     Not(HasSubstr("cudaNoSuchFunction"))));
  EXPECT_EQ(wait, &sentinel);
  EXPECT_EQ(nope, &sentinel);
}

TEST(RuntimeLibraryTest, ResolveEntryPointsTakesAnyLookup) {
  // What an interposer does with dlsym(RTLD_NEXT, name).
  static int target = 0;
  void* slot = nullptr;
  const EntryPoint entries[] = {{"anything", &slot}};
  ASSERT_TRUE(
      ResolveEntryPoints(
          "a lookup", [](const char*) -> void* { return &target; }, entries)
          .ok());
  EXPECT_EQ(slot, &target);
  const absl::Status missing = ResolveEntryPoints(
      "the next object", [](const char*) -> void* { return nullptr; }, entries);
  EXPECT_THAT(Message(missing), HasSubstr("the next object lacks anything"));
}

}  // namespace
}  // namespace gpupool
