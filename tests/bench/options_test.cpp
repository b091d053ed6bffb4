#include "options.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <vector>

namespace floodgate::bench {
namespace {

using namespace std::chrono_literals;

bench_options parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv{"floodgate-bench"};
  argv.insert(argv.end(), args);
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

// Why a command line is refused ("(accepted)" if it is not).
std::string refusal(std::initializer_list<const char*> args) {
  try {
    parse(args);
  } catch (const usage_error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(options, durations) {
  EXPECT_EQ(parse_duration("250ms"), 250ms);
  EXPECT_EQ(parse_duration("5s"), 5000ms);
  EXPECT_EQ(parse_duration("2m"), 120000ms);
  EXPECT_EQ(parse_duration("1h"), 3600000ms);
  EXPECT_EQ(parse_duration("1.5"), 1500ms);
  EXPECT_EQ(parse_duration("0.5s"), 500ms);
  EXPECT_FALSE(parse_duration("5 s"));
  EXPECT_FALSE(parse_duration("-1s"));
  EXPECT_FALSE(parse_duration("s"));
  EXPECT_FALSE(parse_duration("fast"));
}

TEST(options, grpc_targets_floodgateds_envoy_api) {
  const auto o =
      parse({"--grpc", "127.0.0.1:8081", "--domain", "edge", "--rule", "remote_address"});
  EXPECT_EQ(o.target, target_kind::grpc);
  EXPECT_EQ(o.url, "127.0.0.1:8081");
  EXPECT_EQ(o.domain, "edge");
  EXPECT_EQ(o.rule, "remote_address");
  EXPECT_EQ(o.h2_streams, 1u);
  EXPECT_EQ(o.inflight, 1u);
}

// Calls multiplexed on each thread's connection, as Envoy sends them: the thread's calls in
// flight; only for --grpc, and up to floodgated's streams per connection.
TEST(options, h2_streams_multiplex_calls_on_each_grpc_connection) {
  const auto o = parse({"--grpc", "127.0.0.1:8081", "--threads", "2", "--h2-streams", "8"});
  EXPECT_EQ(o.h2_streams, 8u);
  EXPECT_EQ(o.inflight, 8u);
  const auto refused = refusal;
  EXPECT_NE(refused({"--http", "http://h:1", "--h2-streams", "2"}).find("is for --grpc"),
            std::string::npos);
  EXPECT_NE(refused({"--grpc", "h:1", "--h2-streams", "101"}).find("--h2-streams"),
            std::string::npos);
  EXPECT_NE(refused({"--grpc", "h:1", "--h2-streams", "2", "--inflight", "2"}).find("drop --inflight"),
            std::string::npos);
}

TEST(options, a_full_command_line) {
  const auto o = parse({"--redis",
                        "redis://127.0.0.1:6379",
                        "--processes",
                        "4",
                        "--threads=8",
                        "--keys",
                        "1000",
                        "--zipf",
                        "1.1",
                        "--duration",
                        "10s",
                        "--algorithm",
                        "token_bucket",
                        "--limit",
                        "50",
                        "--window",
                        "1s",
                        "--burst-size",
                        "80",
                        "--cost",
                        "2",
                        "--connections",
                        "3",
                        "--inflight",
                        "16",
                        "--json"});
  EXPECT_EQ(o.target, target_kind::library);
  EXPECT_EQ(o.processes, 4u);
  EXPECT_EQ(o.threads, 8u);
  EXPECT_EQ(o.keys, 1000u);
  EXPECT_DOUBLE_EQ(o.zipf, 1.1);
  EXPECT_EQ(o.duration, 10s);
  EXPECT_EQ(o.algo, algorithm::token_bucket);
  EXPECT_EQ(o.make_policy().burst(), 80);
  EXPECT_EQ(o.cost, 2);
  EXPECT_EQ(o.connections, 3u);
  EXPECT_EQ(o.inflight, 16u);
  EXPECT_TRUE(o.json);
  EXPECT_FALSE(o.is_burst());
}

TEST(options, naive_is_a_fixed_window_on_redis) {
  const auto o = parse({"--redis", "redis://127.0.0.1:1", "--naive", "--burst", "10"});
  EXPECT_EQ(o.target, target_kind::naive);
  EXPECT_EQ(o.algo, algorithm::fixed_window);
  EXPECT_TRUE(o.is_burst());
}

TEST(options, bad_command_lines_say_why) {
  const auto message = refusal;
  EXPECT_NE(message({}).find("no target"), std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--bogus"}).find("unknown argument '--bogus'"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--threads"}).find("needs a value"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--threads", "0"}).find("--threads"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--processes", "2"}).find("--processes must be 1"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--naive"}).find("needs one plain Redis"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "redis://h:1", "--naive", "--algorithm", "gcra"})
                .find("fixed_window only"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--burst", "5", "--duration", "1s"}).find("not both"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--window", "soon"}).find("--window"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--algorithm", "leaky"}).find("--algorithm"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--algorithm", "sliding_log", "--burst-size", "5"})
                .find("policy"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--limit", "5", "--cost", "6"}).find("capacity"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--http", "http://h:1"}).find("one target"),
            std::string::npos);
  EXPECT_NE(message({"--grpc", "127.0.0.1:1", "--http", "http://h:1"}).find("one target"),
            std::string::npos);
  EXPECT_NE(message({"--grpc", "http://h:1"}).find("--grpc: expected HOST:PORT"),
            std::string::npos);
  EXPECT_NE(message({"--http", "ftp://h:1"}).find("--http"), std::string::npos);
  EXPECT_NE(message({"--http", "http://h:1", "--inflight", "2"}).find("--inflight"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "postgres://h:1"}).find("--redis"), std::string::npos);
  // Every algorithm reserves, but a bucket's grant must outlive its round trip: a refill time
  // of 10 ms (burst 10 at 1000 a second) leaves 1 ms to spend it in.
  EXPECT_NE(message({"--redis", "memory://", "--algorithm", "gcra", "--limit", "1000",
                     "--burst-size", "10", "--reserve", "5"})
                .find("reserve needs a refill time"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--reserve-for", "1s"}).find("needs --reserve"),
            std::string::npos);
  EXPECT_NE(message({"--http", "http://h:1", "--algorithm", "fixed_window", "--reserve", "5"})
                .find("'reserve:' in the rules file"),
            std::string::npos);
  EXPECT_NE(message({"--redis", "memory://", "--algorithm", "fixed_window", "--limit", "10",
                     "--reserve", "11"})
                .find("reserve must be in 0..limit"),
            std::string::npos);
}

TEST(options, reserve_makes_a_reserving_policy) {
  const auto o = parse({"--redis", "memory://", "--algorithm", "sliding_window", "--window",
                        "500ms", "--reserve", "50"});
  EXPECT_EQ(o.make_policy().reserve(), 50);
  EXPECT_EQ(o.make_policy().reserve_for(), std::chrono::milliseconds{500}) << "at most the window";
  const auto longer = parse({"--redis", "memory://", "--algorithm", "fixed_window", "--window",
                             "1h", "--reserve", "50", "--reserve-for", "3s"});
  EXPECT_EQ(longer.make_policy().reserve_for(), std::chrono::seconds{3});
  EXPECT_EQ(parse({"--redis", "memory://", "--algorithm", "fixed_window"}).make_policy().reserve(),
            0);
}

TEST(options, open_loop) {
  auto o = parse({"--redis", "memory://", "--rate", "2500", "--arrivals", "poisson", "--inflight",
                  "16", "--max-lag", "250ms"});
  ASSERT_TRUE(o.is_open_loop());
  EXPECT_EQ(*o.rate, 2500.0);
  EXPECT_EQ(o.arrivals, arrivals::poisson);
  EXPECT_EQ(o.inflight, 16u);
  EXPECT_EQ(o.max_lag, 250ms);
  o = parse({"--redis", "memory://", "--rate", "0.5"});
  EXPECT_EQ(o.arrivals, arrivals::constant);
  EXPECT_EQ(o.max_lag, 1000ms);
  EXPECT_FALSE(parse({"--redis", "memory://"}).is_open_loop());
}

TEST(options, open_loop_rejects_what_it_cannot_do) {
  for (auto args : std::vector<std::vector<const char*>>{
           {"--redis", "memory://", "--rate", "0"},
           {"--redis", "memory://", "--rate", "-5"},
           {"--redis", "memory://", "--rate", "fast"},
           {"--redis", "memory://", "--rate", "100", "--arrivals", "bursty"},
           {"--redis", "memory://", "--arrivals", "poisson"},
           {"--redis", "memory://", "--rate", "100", "--burst", "10"},
           {"--redis", "memory://", "--rate", "100", "--max-lag", "0ms"}}) {
    std::vector<const char*> argv{"floodgate-bench"};
    argv.insert(argv.end(), args.begin(), args.end());
    EXPECT_THROW(parse_options(static_cast<int>(argv.size()), argv.data()), usage_error)
        << args[args.size() - 1];
  }
}

}  // namespace
}  // namespace floodgate::bench
