// GPUPOOL_CONF: table-driven parsing of good and bad input, byte sizes, the
// prewarm list on a private bundle, and ProcessPools() reading the variable
// (in death-test children, since the process-wide bundle is created once).

#include "gpupool/config.h"

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/pools.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "src/process/environment.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::gpupool::testing::StrictSimOptions;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// --- good input ----------------------------------------------------------

struct GoodCase {
  std::string name;
  std::string text;
  std::function<void(const PoolsConfig&)> check;
};

void PrintTo(const GoodCase& c, std::ostream* os) { *os << c.text; }

class ParseGoodTest : public ::testing::TestWithParam<GoodCase> {};

TEST_P(ParseGoodTest, Parses) {
  absl::StatusOr<PoolsConfig> config = ParsePoolsConfig(GetParam().text);
  ASSERT_THAT(config, IsOk());
  GetParam().check(*config);
}

const PoolOptions kDefaults;

void ExpectDefaults(const PoolsConfig& config) {
  for (const PoolOptions* options :
       {&config.options.streams, &config.options.events}) {
    EXPECT_EQ(options->max_idle_per_key, kDefaults.max_idle_per_key);
    EXPECT_EQ(options->max_live_per_key, kDefaults.max_live_per_key);
    EXPECT_EQ(options->acquire_timeout, kDefaults.acquire_timeout);
    EXPECT_EQ(options->validate_on_acquire, kDefaults.validate_on_acquire);
    EXPECT_EQ(options->track_lease_sites, kDefaults.track_lease_sites);
  }
  const AllocationCacheOptions cache_defaults;
  EXPECT_EQ(config.options.allocations.max_cached_bytes,
            cache_defaults.max_cached_bytes);
  EXPECT_EQ(config.options.allocations.max_cached_block_bytes,
            cache_defaults.max_cached_block_bytes);
  EXPECT_TRUE(config.prewarm.empty());
  EXPECT_TRUE(config.preload.enabled);
  EXPECT_TRUE(config.preload.streams);
  EXPECT_TRUE(config.preload.events);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParseGoodTest,
    ::testing::Values(
        GoodCase{"Empty", "", ExpectDefaults},
        GoodCase{"Blank", "  \t ", ExpectDefaults},
        GoodCase{"OnlyCommas", " , ,", ExpectDefaults},
        GoodCase{"MaxIdleSetsBothPools", "max_idle_per_key=8",
                 [](const PoolsConfig& c) {
                   EXPECT_EQ(c.options.streams.max_idle_per_key, 8);
                   EXPECT_EQ(c.options.events.max_idle_per_key, 8);
                   EXPECT_EQ(c.options.streams.max_live_per_key, 0);
                 }},
        GoodCase{"LiveAndTimeout", "max_live_per_key=16,acquire_timeout=500ms",
                 [](const PoolsConfig& c) {
                   EXPECT_EQ(c.options.streams.max_live_per_key, 16);
                   EXPECT_EQ(c.options.events.max_live_per_key, 16);
                   EXPECT_EQ(c.options.streams.acquire_timeout,
                             absl::Milliseconds(500));
                 }},
        GoodCase{"TimeoutSecondsAndZero", "acquire_timeout=2s",
                 [](const PoolsConfig& c) {
                   EXPECT_EQ(c.options.events.acquire_timeout,
                             absl::Seconds(2));
                 }},
        GoodCase{"TimeoutZero", "acquire_timeout=0",
                 [](const PoolsConfig& c) {
                   EXPECT_EQ(c.options.streams.acquire_timeout,
                             absl::ZeroDuration());
                 }},
        GoodCase{"Booleans", "validate_on_acquire=false,track_lease_sites=0",
                 [](const PoolsConfig& c) {
                   EXPECT_FALSE(c.options.streams.validate_on_acquire);
                   EXPECT_FALSE(c.options.events.validate_on_acquire);
                   EXPECT_FALSE(c.options.streams.track_lease_sites);
                 }},
        GoodCase{"BooleansAnyCase",
                 "validate_on_acquire=TRUE,track_lease_sites=1",
                 [](const PoolsConfig& c) {
                   EXPECT_TRUE(c.options.streams.validate_on_acquire);
                   EXPECT_TRUE(c.options.events.track_lease_sites);
                 }},
        GoodCase{"PreloadOff", "preload=false",
                 [](const PoolsConfig& c) {
                   EXPECT_FALSE(c.preload.enabled);
                   EXPECT_TRUE(c.preload.streams);
                   EXPECT_TRUE(c.preload.events);
                 }},
        GoodCase{"PreloadPerKind", "preload_streams=0,preload_events=TRUE",
                 [](const PoolsConfig& c) {
                   EXPECT_TRUE(c.preload.enabled);
                   EXPECT_FALSE(c.preload.streams);
                   EXPECT_TRUE(c.preload.events);
                 }},
        GoodCase{"BinarySize", "max_cached_bytes=2GiB",
                 [](const PoolsConfig& c) {
                   EXPECT_EQ(c.options.allocations.max_cached_bytes,
                             size_t{2} << 30);
                 }},
        GoodCase{"DecimalSize",
                 "max_cached_bytes=1GB,max_cached_block_bytes=512KiB",
                 [](const PoolsConfig& c) {
                   EXPECT_EQ(c.options.allocations.max_cached_bytes,
                             size_t{1000000000});
                   EXPECT_EQ(c.options.allocations.max_cached_block_bytes,
                             size_t{512} << 10);
                 }},
        GoodCase{"Trace", "trace=100000",
                 [](const PoolsConfig& c) {
                   EXPECT_EQ(c.options.allocations.trace_capacity,
                             size_t{100000});
                 }},
        GoodCase{"LeaseTimes", "lease_times=1",
                 [](const PoolsConfig& c) {
                   EXPECT_TRUE(c.options.allocations.record_lease_times);
                 }},
        GoodCase{"GiveBackThreshold", "give_back_above_percent=50",
                 [](const PoolsConfig& c) {
                   EXPECT_EQ(c.options.allocations.give_back_above_percent, 50);
                 }},
        GoodCase{"DeferSameStreamFences", "defer_same_stream_fences=1",
                 [](const PoolsConfig& c) {
                   EXPECT_TRUE(c.options.allocations.defer_same_stream_fences);
                 }},
        GoodCase{"GiveBackOff", "give_back_above_percent=-1",
                 [](const PoolsConfig& c) {
                   EXPECT_EQ(c.options.allocations.give_back_above_percent, -1);
                 }},
        GoodCase{"ZeroCachedBytes", "max_cached_bytes=0",
                 [](const PoolsConfig& c) {
                   EXPECT_EQ(c.options.allocations.max_cached_bytes, size_t{0});
                 }},
        GoodCase{"SpacesEmptyTokensAndLastWins",
                 " max_idle_per_key = 4 , , max_idle_per_key=5,",
                 [](const PoolsConfig& c) {
                   EXPECT_EQ(c.options.streams.max_idle_per_key, 5);
                 }},
        GoodCase{"OnePrewarm",
                 "max_cached_bytes=2GiB,prewarm=cuda:0:non_blocking:18",
                 [](const PoolsConfig& c) {
                   ASSERT_EQ(c.prewarm.size(), 1u);
                   EXPECT_EQ(c.prewarm[0].backend, "cuda");
                   EXPECT_EQ(c.prewarm[0].device, 0);
                   EXPECT_EQ(c.prewarm[0].config, StreamConfig{});
                   EXPECT_EQ(c.prewarm[0].count, 18);
                 }},
        GoodCase{"PrewarmsAccumulateInOrder",
                 "prewarm=hip:1:blocking+priority=-1:4,prewarm=any:0:default:2",
                 [](const PoolsConfig& c) {
                   ASSERT_EQ(c.prewarm.size(), 2u);
                   EXPECT_EQ(c.prewarm[0].backend, "hip");
                   EXPECT_EQ(c.prewarm[0].device, 1);
                   EXPECT_FALSE(c.prewarm[0].config.non_blocking);
                   EXPECT_EQ(c.prewarm[0].config.priority, -1);
                   EXPECT_EQ(c.prewarm[0].count, 4);
                   EXPECT_EQ(c.prewarm[1].backend, "any");
                   EXPECT_TRUE(c.prewarm[1].config.non_blocking);
                   EXPECT_EQ(c.prewarm[1].config.priority, 0);
                 }}),
    [](const ::testing::TestParamInfo<GoodCase>& info) {
      return info.param.name;
    });

// --- bad input -----------------------------------------------------------

struct BadCase {
  std::string name;
  std::string text;
  // The error must name the token as `token <index> "<token>" (column <c>)`
  // and give this reason.
  int index;
  std::string token;
  int column;
  std::string reason;
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.text; }

class ParseBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ParseBadTest, NamesTheBadTokenAndItsPosition) {
  const BadCase& c = GetParam();
  const std::string where = "token " + std::to_string(c.index) + " \"" +
                            c.token + "\" (column " + std::to_string(c.column) +
                            ")";
  EXPECT_THAT(ParsePoolsConfig(c.text),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(where), HasSubstr(c.reason))));
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParseBadTest,
    ::testing::Values(
        BadCase{"NoEquals", "max_idle_per_key", 1, "max_idle_per_key", 1,
                "expected key=value"},
        BadCase{"MissingValue", "max_idle_per_key=", 1, "max_idle_per_key=", 1,
                "missing value for max_idle_per_key"},
        BadCase{"MissingKey", "=5", 1, "=5", 1, "missing key"},
        BadCase{"UnknownKey", "max_idle=4", 1, "max_idle=4", 1,
                "unknown key \"max_idle\" (known keys: max_idle_per_key"},
        BadCase{"PreloadNotBoolean", "preload=off", 1, "preload=off", 1,
                "preload: \"off\" is not a boolean"},
        BadCase{"NegativeInt", "max_idle_per_key=-1", 1, "max_idle_per_key=-1",
                1, "-1 is out of range [0, "},
        BadCase{"NotAnInt", "max_live_per_key=lots", 1, "max_live_per_key=lots",
                1, "\"lots\" is not an integer"},
        BadCase{
            "IntOverflow", "max_live_per_key=99999999999", 1,
            "max_live_per_key=99999999999", 1,
            "max_live_per_key: 99999999999 is out of range [0, 2147483647]"},
        BadCase{"NegativeIntOverflow", "max_idle_per_key=-99999999999", 1,
                "max_idle_per_key=-99999999999", 1,
                "-99999999999 is out of range [0, 2147483647]"},
        BadCase{"SignWithoutDigits", "max_idle_per_key=+", 1,
                "max_idle_per_key=+", 1, "\"+\" is not an integer"},
        BadCase{"SecondTokenPosition", "max_idle_per_key=4,  oops", 2, "oops",
                22, "expected key=value"},
        BadCase{"PositionAfterEmptyItems", ",,acquire_timeout=x", 3,
                "acquire_timeout=x", 3, "\"x\" is not a duration"},
        BadCase{"DurationWithoutUnit", "acquire_timeout=500", 1,
                "acquire_timeout=500", 1, "is not a duration"},
        BadCase{"NegativeDuration", "acquire_timeout=-1s", 1,
                "acquire_timeout=-1s", 1, "must be finite and not negative"},
        BadCase{"InfiniteDuration", "acquire_timeout=inf", 1,
                "acquire_timeout=inf", 1, "must be finite and not negative"},
        BadCase{"NotABool", "validate_on_acquire=yes", 1,
                "validate_on_acquire=yes", 1, "\"yes\" is not a boolean"},
        BadCase{"UnknownUnit", "max_cached_bytes=2XB", 1,
                "max_cached_bytes=2XB", 1, "unknown unit \"XB\""},
        BadCase{"FractionalSize", "max_cached_bytes=1.5GiB", 1,
                "max_cached_bytes=1.5GiB", 1,
                "fractional sizes are not supported"},
        BadCase{"UnitWithoutNumber", "max_cached_bytes=GiB", 1,
                "max_cached_bytes=GiB", 1, "\"GiB\" is not a size"},
        BadCase{"NegativeSize", "max_cached_bytes=-1", 1, "max_cached_bytes=-1",
                1, "\"-1\" is not a size"},
        BadCase{"SizeTooLargeForNumber",
                "max_cached_bytes=99999999999999999999999", 1,
                "max_cached_bytes=99999999999999999999999", 1, "too large"},
        BadCase{"SizeOverflowsWithUnit", "max_cached_bytes=20000000TiB", 1,
                "max_cached_bytes=20000000TiB", 1, "too large"},
        BadCase{"ZeroBlockSize", "max_cached_block_bytes=0", 1,
                "max_cached_block_bytes=0", 1, "must be > 0"},
        BadCase{"TraceTooLong", "trace=20000000", 1, "trace=20000000", 1,
                "20000000"},
        BadCase{"TraceNegative", "trace=-1", 1, "trace=-1", 1, "-1"},
        BadCase{"LeaseTimesNotABool", "lease_times=maybe", 1,
                "lease_times=maybe", 1, "maybe"},
        BadCase{"PrewarmTooFewFields", "prewarm=cuda:0:non_blocking", 1,
                "prewarm=cuda:0:non_blocking", 1, "got 3 fields"},
        BadCase{"PrewarmUnknownBackend", "prewarm=tpu:0:default:1", 1,
                "prewarm=tpu:0:default:1", 1, "unknown backend \"tpu\""},
        BadCase{"PrewarmBadDevice", "prewarm=cuda:x:default:1", 1,
                "prewarm=cuda:x:default:1", 1, "device: \"x\" is not"},
        BadCase{"PrewarmDeviceOverflow", "prewarm=cuda:99999999999:default:1",
                1, "prewarm=cuda:99999999999:default:1", 1,
                "device: 99999999999 is out of range"},
        BadCase{"PrewarmNegativeDevice", "prewarm=cuda:-1:default:1", 1,
                "prewarm=cuda:-1:default:1", 1, "device: -1 is out of range"},
        BadCase{"PrewarmUnknownConfig", "prewarm=cuda:0:fast:1", 1,
                "prewarm=cuda:0:fast:1", 1, "unknown stream config \"fast\""},
        BadCase{"PrewarmUnknownModifier", "prewarm=cuda:0:default+prio=1:1", 1,
                "prewarm=cuda:0:default+prio=1:1", 1,
                "unknown stream config modifier \"prio=1\""},
        BadCase{"PrewarmBadPriority", "prewarm=cuda:0:default+priority=hi:1", 1,
                "prewarm=cuda:0:default+priority=hi:1", 1,
                "priority: \"hi\" is not an integer"},
        BadCase{"PrewarmPriorityTwice",
                "prewarm=cuda:0:default+priority=1+priority=2:1", 1,
                "prewarm=cuda:0:default+priority=1+priority=2:1", 1,
                "priority given twice"},
        BadCase{"PrewarmCountTooLarge", "prewarm=cuda:0:default:100000", 1,
                "prewarm=cuda:0:default:100000", 1,
                "count: 100000 is out of range [0, 4096]"},
        BadCase{"PrewarmEmptyCount", "prewarm=cuda:0:default:", 1,
                "prewarm=cuda:0:default:", 1, "count: \"\" is not"}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      return info.param.name;
    });

TEST(ParsePoolsConfigTest, StopsAtTheFirstBadToken) {
  EXPECT_THAT(ParsePoolsConfig("bogus=1,max_idle_per_key=x"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("token 1 \"bogus=1\"")));
}

TEST(ParsePoolsConfigTest, ArbitraryBytesNeverCrash) {
  // Every prefix of a long valid text, and the text with each byte replaced
  // by a troublesome one, parse or fail with InvalidArgument.
  const std::string text =
      "max_idle_per_key=4,max_live_per_key=8,acquire_timeout=1500ms,"
      "validate_on_acquire=1,track_lease_sites=false,max_cached_bytes=3GiB,"
      "max_cached_block_bytes=64MB,prewarm=any:0:blocking+priority=-2:7";
  ASSERT_THAT(ParsePoolsConfig(text), IsOk());
  for (size_t length = 0; length <= text.size(); ++length) {
    absl::StatusOr<PoolsConfig> config =
        ParsePoolsConfig(absl::string_view(text).substr(0, length));
    if (!config.ok()) {
      EXPECT_THAT(config, StatusIs(absl::StatusCode::kInvalidArgument));
    }
  }
  for (char replacement : {'\0', ',', '=', ':', '+', '-', ' ', '\xff'}) {
    for (size_t i = 0; i < text.size(); ++i) {
      std::string mutated = text;
      mutated[i] = replacement;
      absl::StatusOr<PoolsConfig> config = ParsePoolsConfig(mutated);
      if (!config.ok()) {
        EXPECT_THAT(config, StatusIs(absl::StatusCode::kInvalidArgument))
            << mutated;
      }
    }
  }
}

// --- byte sizes ----------------------------------------------------------

TEST(ParseByteSizeTest, UnitsAreBinaryOrDecimal) {
  struct Case {
    const char* text;
    size_t bytes;
  };
  for (const Case& c : std::vector<Case>{{"0", 0},
                                         {"4096", 4096},
                                         {"1B", 1},
                                         {"1KiB", 1024},
                                         {"1kib", 1024},
                                         {"3MiB", size_t{3} << 20},
                                         {"2GiB", size_t{2} << 30},
                                         {"1TiB", size_t{1} << 40},
                                         {"1KB", 1000},
                                         {"5MB", 5000000},
                                         {"2GB", 2000000000},
                                         {"1TB", size_t{1000000000000}},
                                         {"16 MiB", size_t{16} << 20}}) {
    EXPECT_THAT(ParseByteSize(c.text), IsOk()) << c.text;
    EXPECT_EQ(ParseByteSize(c.text).value_or(~size_t{0}), c.bytes) << c.text;
  }
}

TEST(ParseByteSizeTest, RejectsGarbage) {
  for (const char* text : {"", "MiB", "1 2", "1Mi", "1e9", "0x10", "1.0"}) {
    EXPECT_THAT(ParseByteSize(text),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << text;
  }
}

// --- prewarm specs -------------------------------------------------------

TEST(PrewarmSpecTest, ToStringRoundTrips) {
  for (const char* text : {"cuda:0:non_blocking:18", "hip:3:blocking:1",
                           "any:1:non_blocking+priority=-1:4"}) {
    absl::StatusOr<PoolsConfig> config =
        ParsePoolsConfig(std::string("prewarm=") + text);
    ASSERT_THAT(config, IsOk());
    ASSERT_EQ(config->prewarm.size(), 1u);
    EXPECT_EQ(config->prewarm[0].ToString(), text);
  }
}

TEST(PrewarmSpecTest, AppliesToItsBackendOrAny) {
  PrewarmSpec spec;
  spec.backend = "hip";
  EXPECT_TRUE(spec.AppliesTo("hip"));
  EXPECT_FALSE(spec.AppliesTo("cuda"));
  spec.backend = "any";
  EXPECT_TRUE(spec.AppliesTo("sim"));
}

TEST(RunPrewarmsTest, RunsMatchingEntriesAndReportsTheFirstFailure) {
  auto owned = std::make_unique<SimBackend>(StrictSimOptions(/*devices=*/2));
  SimBackend* sim = owned.get();
  absl::StatusOr<std::unique_ptr<Pools>> pools =
      Pools::Create(std::move(owned));
  ASSERT_THAT(pools, IsOk());
  absl::StatusOr<PoolsConfig> config = ParsePoolsConfig(
      "prewarm=sim:0:non_blocking+priority=-1:3,"
      "prewarm=cuda:0:default:5,"   // other backend: skipped
      "prewarm=sim:9:default:1,"    // no device 9: reported
      "prewarm=any:1:blocking:2");  // still runs after the failure
  ASSERT_THAT(config, IsOk());
  EXPECT_THAT(RunPrewarms(**pools, config->prewarm),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("prewarm=sim:9:non_blocking:1 on sim")));
  EXPECT_EQ((*pools)->streams().GetStats(0, {.priority = -1}).idle, 3);
  EXPECT_EQ((*pools)->streams().GetStats(0, {}).idle, 0);
  EXPECT_EQ((*pools)->streams().GetStats(1, {.non_blocking = false}).idle, 2);
  EXPECT_EQ(sim->streams_created(), 5);
}

// --- ProcessPools() reads GPUPOOL_CONF -----------------------------------

void ProcessPoolsWithConf(const char* conf) {
  setenv("GPUPOOL_BACKEND", "sim", 1);
  setenv("GPUPOOL_CONF", conf, 1);
  absl::StatusOr<Pools*> pools = ProcessPools();
  if (!pools.ok()) {
    std::fprintf(stderr, "ProcessPools: %s\n",
                 pools.status().ToString().c_str());
    std::exit(pools.status().code() == absl::StatusCode::kInvalidArgument ? 3
                                                                          : 4);
  }
  StreamPool& streams = (*pools)->streams();
  const int prewarmed = static_cast<int>(streams.GetStats(0, {}).idle);
  {
    std::vector<PooledStream> leases;
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<PooledStream> stream = streams.Acquire(0);
      if (!stream.ok()) std::exit(5);
      leases.push_back(*std::move(stream));
    }
  }
  std::fprintf(stderr, "prewarmed=%d idle_after=%d\n", prewarmed,
               static_cast<int>(streams.GetStats(0, {}).idle));
  std::exit(0);
}

TEST(ProcessPoolsConfDeathTest, AppliesOptionsAndPrewarms) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ProcessPoolsWithConf("max_idle_per_key=2,"
                                   "prewarm=sim:0:default:2"),
              ::testing::ExitedWithCode(0), "prewarmed=2 idle_after=2");
}

TEST(ProcessPoolsConfDeathTest, MalformedConfIsInvalidArgument) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ProcessPoolsWithConf("max_idle_per_key=2,max_cached_bytes=2XB"),
              ::testing::ExitedWithCode(3),
              "INVALID_ARGUMENT: GPUPOOL_CONF: token 2 "
              "\"max_cached_bytes=2XB\" \\(column 20\\)");
}

TEST(ProcessPoolsConfDeathTest, FailedPrewarmWarnsButKeepsThePools) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ProcessPoolsWithConf("prewarm=sim:7:default:2"),
              ::testing::ExitedWithCode(0),
              "gpupool: GPUPOOL_CONF: INVALID_ARGUMENT: prewarm=sim:7:"
              "non_blocking:2 on sim(.|\n)*prewarmed=0 idle_after=3");
}

// --- GPUPOOL_STATS and GPUPOOL_BACKEND -----------------------------------

TEST(ParseSwitchTest, OnAndOffWordsInAnyCaseWithSpaces) {
  for (const char* on : {"1", "true", "yes", "on", "TRUE", "On", " yes\t"}) {
    EXPECT_EQ(internal::ParseSwitch(on), true) << on;
  }
  for (const char* off : {"0", "false", "no", "off", "False", "OFF", " 0 "}) {
    EXPECT_EQ(internal::ParseSwitch(off), false) << off;
  }
  for (const char* neither : {"", "  ", "2", "maybe", "truee", "o n"}) {
    EXPECT_EQ(internal::ParseSwitch(neither), std::nullopt) << neither;
  }
}

// "on", "off", or the status when GPUPOOL_STATS=`value` is refused.
std::string Stats(const char* value) {
  absl::StatusOr<bool> on = internal::StatsRequested(value);
  if (!on.ok()) return on.status().ToString();
  return *on ? "on" : "off";
}

TEST(StatsRequestedTest, UnsetOrBlankIsOffAndFalseTurnsItOff) {
  EXPECT_EQ(Stats(nullptr), "off");
  EXPECT_EQ(Stats(""), "off");
  EXPECT_EQ(Stats(" "), "off");
  for (const char* off : {"false", "0", "off", "no"}) {
    EXPECT_EQ(Stats(off), "off") << off;
  }
  for (const char* on : {"1", "true", "on", "yes"}) {
    EXPECT_EQ(Stats(on), "on") << on;
  }
}

TEST(StatsRequestedTest, AnythingElseIsInvalidArgumentNamingTheValue) {
  EXPECT_THAT(internal::StatsRequested("maybe"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("GPUPOOL_STATS=\"maybe\": not a switch")));
  EXPECT_THAT(internal::StatsRequested("2"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(BackendNameTest, SurroundingWhitespaceIsIgnored) {
  EXPECT_EQ(internal::BackendName(nullptr), "");
  EXPECT_EQ(internal::BackendName(""), "");
  EXPECT_EQ(internal::BackendName(" \t "), "");
  EXPECT_EQ(internal::BackendName(" sim"), "sim");
  EXPECT_EQ(internal::BackendName("cuda\n"), "cuda");
  EXPECT_EQ(internal::BackendName(" s im "), "s im");  // not a name: refused
}

// ProcessPools() on sim with GPUPOOL_STATS=`stats`; exits 3 when that is
// InvalidArgument, else 0 (the report, if any, follows at exit).
void ProcessPoolsWithStats(const char* stats) {
  setenv("GPUPOOL_BACKEND", "sim", 1);
  unsetenv("GPUPOOL_CONF");
  setenv("GPUPOOL_STATS", stats, 1);
  absl::StatusOr<Pools*> pools = ProcessPools();
  if (!pools.ok()) {
    std::fprintf(stderr, "ProcessPools: %s\n",
                 pools.status().ToString().c_str());
    std::exit(pools.status().code() == absl::StatusCode::kInvalidArgument ? 3
                                                                          : 4);
  }
  std::exit(0);
}

TEST(ProcessPoolsStatsDeathTest, OnPrintsTheReportAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ProcessPoolsWithStats("on"), ::testing::ExitedWithCode(0),
              HasSubstr("gpupool stats at exit (backend sim)"));
}

TEST(ProcessPoolsStatsDeathTest, FalseTurnsTheReportOff) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ProcessPoolsWithStats("false"), ::testing::ExitedWithCode(0),
              Not(HasSubstr("gpupool stats")));
}

TEST(ProcessPoolsStatsDeathTest, AnUnknownValueIsInvalidArgument) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ProcessPoolsWithStats("verbose"), ::testing::ExitedWithCode(3),
              "INVALID_ARGUMENT: GPUPOOL_STATS=\"verbose\": not a switch");
}

}  // namespace
}  // namespace gpupool
