// floodgate-bench's HTTP target against the real floodgated (on a real redis-server): the
// same burst from several processes, through the service, admits exactly the rule's limit.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "bench_process.hpp"
#include "floodgated_process.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;

TEST(bench_http, a_burst_through_floodgated_admits_exactly_the_limit) {
  redis_server redis;
  floodgated_process service(R"(rules:
  - name: bench
    algorithm: sliding_log
    limit: 20
    window: 60s
)",
                             {.extra_args = {"--redis", redis.url()}});
  const auto r =
      run_bench({"--http", "http://127.0.0.1:" + std::to_string(service.port()), "--rule", "bench",
                 "--algorithm", "sliding_log", "--limit", "20", "--window", "60s", "--burst", "15",
                 "--processes", "3", "--threads", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto o = json::parse(r.out).as_object();
  EXPECT_EQ(o.at("decisions").to_number<std::int64_t>(), 90);
  EXPECT_EQ(o.at("allowed").to_number<std::int64_t>(), 20);
  EXPECT_EQ(o.at("errors").to_number<std::int64_t>(), 0);
  EXPECT_EQ(o.at("over_admitted").to_number<std::int64_t>(), 0);
}

TEST(bench_http, an_unknown_rule_fails_clearly_before_the_run) {
  floodgated_process service(R"(rules:
  - name: other
    algorithm: gcra
    limit: 5
    window: 1s
)");
  const auto r = run_bench({"--http", "http://127.0.0.1:" + std::to_string(service.port()),
                            "--rule", "bench", "--burst", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot reach the target: http: status 4"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace floodgate::test
