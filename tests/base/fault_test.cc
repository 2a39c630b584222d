// Fault classes in words: every class round-trips through its message tag,
// WithFault replaces a tag rather than stacking it, and the statuses the
// library nests (a poisoned device's refusal, the cache's out-of-memory
// error) print as words, with no payload and no nested "CODE: " prefix.

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/pools.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr Fault kAllFaults[] = {
    Fault::kNone,        Fault::kNotReady, Fault::kResource, Fault::kDevice,
    Fault::kOutOfMemory, Fault::kShutdown, Fault::kCaller};

// Words only: no payload in wire form, and no status code ("INTERNAL: ")
// after the printed status's own leading one.
::testing::Matcher<std::string> ReadsAsWords() {
  return AllOf(Not(HasSubstr("type.googleapis.com")),
               Not(ContainsRegex(".: [A-Z_][A-Z_]+: ")));
}

TEST(FaultTest, EveryClassRoundTripsThroughItsTag) {
  for (Fault fault : kAllFaults) {
    SCOPED_TRACE(FaultName(fault));
    const absl::Status status =
        FaultError(fault, absl::StatusCode::kInternal, "the runtime said no");
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_EQ(FaultOf(status), fault);
    EXPECT_EQ(status.message(), std::string("the runtime said no ") +
                                    std::string(FaultTag(fault)));
    EXPECT_EQ(MessageWithoutFault(status), "the runtime said no");
    EXPECT_THAT(status.ToString(), ReadsAsWords());
    // A copy made from the words and the code alone keeps the class.
    EXPECT_EQ(FaultOf(absl::Status(status.code(), status.message())), fault);
  }
}

TEST(FaultTest, TagsReadAsWords) {
  EXPECT_EQ(FaultError(Fault::kDevice, absl::StatusCode::kInternal,
                       "cudaErrorIllegalAddress (700)")
                .ToString(),
            "INTERNAL: cudaErrorIllegalAddress (700) (device fault)");
  EXPECT_EQ(FaultTag(Fault::kResource), "(handle fault)");
  EXPECT_EQ(FaultTag(Fault::kOutOfMemory), "(out-of-memory fault)");
}

TEST(FaultTest, OkIsNoneAndStaysOk) {
  EXPECT_EQ(FaultOf(absl::OkStatus()), Fault::kNone);
  EXPECT_TRUE(WithFault(absl::OkStatus(), Fault::kDevice).ok());
}

TEST(FaultTest, WithFaultReplacesAnEarlierTag) {
  absl::Status status = absl::AbortedError("stream 0x10 faulted");
  status = WithFault(std::move(status), Fault::kResource);
  status = WithFault(std::move(status), Fault::kDevice);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(status.message(), "stream 0x10 faulted (device fault)");
  EXPECT_EQ(FaultOf(status), Fault::kDevice);
}

TEST(FaultTest, AnEmptyMessageCarriesTheTagAlone) {
  const absl::Status status =
      WithFault(absl::Status(absl::StatusCode::kInternal, ""), Fault::kDevice);
  EXPECT_EQ(status.message(), "(device fault)");
  EXPECT_EQ(FaultOf(status), Fault::kDevice);
  EXPECT_EQ(MessageWithoutFault(status), "");
}

TEST(FaultTest, UntaggedStatusesAreClassifiedByCode) {
  EXPECT_EQ(FaultOf(absl::ResourceExhaustedError("x")), Fault::kOutOfMemory);
  EXPECT_EQ(FaultOf(absl::InvalidArgumentError("x")), Fault::kCaller);
  EXPECT_EQ(FaultOf(absl::NotFoundError("x")), Fault::kCaller);
  EXPECT_EQ(FaultOf(absl::OutOfRangeError("x")), Fault::kCaller);
  EXPECT_EQ(FaultOf(absl::UnavailableError("x")), Fault::kShutdown);
  EXPECT_EQ(FaultOf(absl::InternalError("x")), Fault::kResource);
  // A tag glued to a word, or inside the message, is not a tag.
  EXPECT_EQ(FaultOf(absl::InternalError("x(device fault)")), Fault::kResource);
  EXPECT_EQ(FaultOf(absl::InternalError("(device fault) then more")),
            Fault::kResource);
  EXPECT_EQ(MessageWithoutFault(absl::InternalError("x(device fault)")),
            "x(device fault)");
}

TEST(FaultTest, OtherPayloadsStayAndTheOldFaultPayloadGoes) {
  absl::Status status = absl::InternalError("sticky");
  status.SetPayload("example.com/trace", absl::Cord("id-7"));
  // A caller that still attaches the old payload is understood...
  status.SetPayload(kFaultPayloadUrl, absl::Cord("kDevice"));
  EXPECT_EQ(FaultOf(status), Fault::kDevice);
  // ...and WithFault turns it into words.
  const absl::Status tagged = WithFault(status, Fault::kDevice);
  EXPECT_FALSE(tagged.GetPayload(kFaultPayloadUrl).has_value());
  EXPECT_EQ(tagged.GetPayload("example.com/trace"), absl::Cord("id-7"));
  EXPECT_EQ(FaultOf(tagged), Fault::kDevice);
  EXPECT_EQ(tagged.message(), "sticky (device fault)");
}

// The poisoned device's refusal nests the sticky error in words and keeps
// Fault::kDevice, as the pools react to it.
TEST(FaultTest, PoisonedDeviceAcquirePrintsWordsAndStaysADeviceFault) {
  SimBackend sim;
  StreamPool streams(sim);
  sim.PoisonDevice(0, absl::InternalError("injected sticky error"));
  absl::StatusOr<PooledStream> first = streams.Acquire(0);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(FaultOf(first.status()), Fault::kDevice);
  EXPECT_THAT(first.status().ToString(), ReadsAsWords());

  absl::StatusOr<PooledStream> refused = streams.Acquire(0);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition,
                                HasSubstr("injected sticky error")));
  EXPECT_EQ(FaultOf(refused.status()), Fault::kDevice);
  const std::string printed = refused.status().ToString();
  EXPECT_THAT(printed, ReadsAsWords());
  EXPECT_THAT(printed, Not(HasSubstr("INTERNAL")));
  EXPECT_EQ(printed,
            "FAILED_PRECONDITION: device 0 is poisoned by a sticky error and "
            "needs a reset (then RecoverDevice): injected sticky error "
            "(device fault)");
}

// The cache's out-of-memory error nests the runtime's error and a failed
// memory query in words; the class stays kOutOfMemory.
TEST(FaultTest, CacheOutOfMemoryNestsWords) {
  auto owned = std::make_unique<SimBackend>();
  SimBackend* sim = owned.get();
  absl::StatusOr<std::unique_ptr<Pools>> pools =
      Pools::Create(std::move(owned));
  ASSERT_TRUE(pools.ok()) << pools.status();
  sim->SetMemoryLimit(0, 1 << 20);
  // Both memory queries of the chain fail (before the retry and for the
  // message).
  for (int i = 0; i < 2; ++i) {
    sim->FailNext(SimOp::kMemoryInfo,
                  FaultError(Fault::kResource, absl::StatusCode::kInternal,
                             "memory query failed"),
                  0);
  }
  absl::StatusOr<PooledAllocation> big =
      (*pools)->allocations().Allocate(0, 8 << 20);
  EXPECT_THAT(big, StatusIs(absl::StatusCode::kResourceExhausted,
                            AllOf(HasSubstr("device free/total unknown "
                                            "(memory query failed)"),
                                  HasSubstr("runtime: sim: out of"))));
  EXPECT_EQ(FaultOf(big.status()), Fault::kOutOfMemory);
  const std::string printed = big.status().ToString();
  EXPECT_THAT(printed, StartsWith("RESOURCE_EXHAUSTED: AllocationCache: "));
  EXPECT_THAT(printed, ReadsAsWords());
  EXPECT_THAT(printed, Not(HasSubstr("INTERNAL")));
}

}  // namespace
}  // namespace gpupool
