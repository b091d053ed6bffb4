// The rate limit service's semantics (upstream's documented behaviour, plus all-or-nothing),
// on the memory backend and on a real redis-server, with time injected.
#include "rls_service.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <limits>

#include "envoy_config.hpp"
#include "floodgate/limiter.hpp"
#include "redis_server.hpp"
#include "rls_metrics.hpp"
#include "test_clock.hpp"

namespace floodgate::service::envoy {
namespace {

using namespace std::chrono_literals;

const char* config_text = R"(
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: /login
    rate_limit: {unit: second, requests_per_unit: 2, name: login}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: user
    descriptors:
      - key: plan
        value: free
        rate_limit: {unit: hour, requests_per_unit: 5, name: free_plan}
      - key: plan
        value: trial
        rate_limit: {unit: hour, requests_per_unit: 1, name: trial, replaces: [{name: login}]}
      - key: plan
        value: paid
        rate_limit: {unlimited: true}
  - key: experiment
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 4, algorithm: token_bucket, failure_mode: open}
)";

std::shared_ptr<const envoy_config> make_config(const std::string& text) {
  std::map<std::string, domain_config, std::less<>> domains;
  parse_envoy_domain(text, "edge.yaml", domains);
  return std::make_shared<const envoy_config>(std::move(domains));
}

descriptor desc(std::vector<descriptor_entry> entries) {
  descriptor d;
  d.entries = std::move(entries);
  return d;
}

std::atomic<int> prefix_counter{0};

class rls_semantics : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_options bo;
    bo.memory.clock = clock_.fn();
    bo.redis.test_clock = clock_.fn();
    // A loaded machine (parallel tests, builds) must not turn a slow first call into a
    // backend error: these tests are about decisions, rls_failures about failures.
    bo.redis.timeout = 5s;
    bo.redis.connect_timeout = 5s;
    bo.redis.key_prefix =
        "rls" + std::to_string(::getpid()) + "_" + std::to_string(++prefix_counter) + ":";
    std::string url = "memory://";
    if (GetParam() == "redis") {
      if (!redis_) redis_ = std::make_unique<test::redis_server>();
      url = redis_->url();
    }
    limiter_options lo;
    lo.clock = clock_.fn();
    limiter_ = std::make_shared<floodgate::limiter>(url, bo, lo);
    store_ = std::make_unique<envoy_config_store>(make_config(config_text));
    make_service({});
  }
  static void TearDownTestSuite() { redis_.reset(); }

  void make_service(rls_options o) {
    service_ = std::make_unique<rls_service>(limiter_, *store_, o, &metrics_);
  }

  rls_result call(request req,
                  rls_service::clock::time_point deadline = rls_service::clock::now() + 5s) {
    std::promise<rls_result> p;
    auto f = p.get_future();
    service_->async_should_rate_limit(std::move(req), deadline,
                                      [&p](rls_result r) { p.set_value(std::move(r)); });
    return f.get();
  }

  response check(std::vector<descriptor> ds, std::uint32_t hits = 0) {
    request req;
    req.domain = "edge";
    req.descriptors = std::move(ds);
    req.hits_addend = hits;
    auto r = call(std::move(req));
    EXPECT_EQ(r.outcome, rls_result::kind::ok) << r.message;
    return r.response;
  }

  test::test_clock clock_;
  inline static std::unique_ptr<test::redis_server> redis_;
  std::shared_ptr<floodgate::limiter> limiter_;
  std::unique_ptr<envoy_config_store> store_;
  rls_metrics metrics_;
  std::unique_ptr<rls_service> service_;
};

TEST_P(rls_semantics, key_only_rules_count_each_value_apart_up_to_the_limit) {
  for (int i = 0; i < 3; ++i) {
    const auto r = check({desc({{"remote_address", "10.0.0.1"}})});
    EXPECT_EQ(r.overall, code::ok);
    ASSERT_EQ(r.statuses.size(), 1u);
    EXPECT_EQ(r.statuses[0].limit_remaining, static_cast<std::uint32_t>(2 - i));
    ASSERT_TRUE(r.statuses[0].current_limit);
    EXPECT_EQ(r.statuses[0].current_limit->requests_per_unit, 3u);
    EXPECT_EQ(r.statuses[0].current_limit->per, unit::minute);
  }
  const auto over = check({desc({{"remote_address", "10.0.0.1"}})});
  EXPECT_EQ(over.overall, code::over_limit);
  EXPECT_EQ(over.statuses[0].status, code::over_limit);
  EXPECT_EQ(over.statuses[0].limit_remaining, 0u);
  // Fixed windows aligned to the epoch, as upstream: the clock starts on a minute boundary.
  EXPECT_EQ(over.statuses[0].duration_until_reset, 60s);
  EXPECT_EQ(check({desc({{"remote_address", "10.0.0.2"}})}).overall, code::ok);
  clock_.advance(60s);
  EXPECT_EQ(check({desc({{"remote_address", "10.0.0.1"}})}).overall, code::ok);
}

TEST_P(rls_semantics, key_and_value_wins_over_the_key_alone) {
  const auto r = check({desc({{"path", "/login"}}), desc({{"path", "/home"}})});
  EXPECT_EQ(r.statuses[0].current_limit->requests_per_unit, 2u);
  EXPECT_EQ(r.statuses[0].current_limit->name, "login");
  EXPECT_EQ(r.statuses[1].current_limit->requests_per_unit, 100u);
}

TEST_P(rls_semantics, no_match_or_unknown_domain_is_ok_without_a_limit) {
  auto r = check({desc({{"nothing", "here"}}), desc({{"user", "alice"}})});  // user: no leaf limit
  EXPECT_EQ(r.overall, code::ok);
  for (const auto& s : r.statuses) {
    EXPECT_EQ(s.status, code::ok);
    EXPECT_FALSE(s.current_limit);
    EXPECT_EQ(s.limit_remaining, 0u);
  }
  request req;
  req.domain = "elsewhere";
  req.descriptors = {desc({{"remote_address", "x"}})};
  const auto other = call(req);
  EXPECT_EQ(other.outcome, rls_result::kind::ok);
  EXPECT_FALSE(other.response.statuses[0].current_limit);
}

TEST_P(rls_semantics, nested_rules_apply_at_the_last_entry_and_unlimited_reports_max) {
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(check({desc({{"user", "bob"}, {"plan", "free"}})}).overall, code::ok);
  EXPECT_EQ(check({desc({{"user", "bob"}, {"plan", "free"}})}).overall, code::over_limit);
  const auto paid = check({desc({{"user", "bob"}, {"plan", "paid"}})});
  EXPECT_EQ(paid.overall, code::ok);
  EXPECT_FALSE(paid.statuses[0].current_limit);
  EXPECT_EQ(paid.statuses[0].limit_remaining, 4294967295u);
}

TEST_P(rls_semantics, all_or_nothing_when_one_descriptor_is_over_none_consumes) {
  // /login allows 2 a second; remote_address 3 a minute.
  EXPECT_EQ(check({desc({{"path", "/login"}})}, 2).overall, code::ok);  // /login used up
  for (int i = 0; i < 4; ++i) {
    const auto r = check({desc({{"remote_address", "10.9.9.9"}}), desc({{"path", "/login"}})});
    EXPECT_EQ(r.overall, code::over_limit);
    EXPECT_EQ(r.statuses[0].status, code::ok);
    EXPECT_EQ(r.statuses[0].limit_remaining, 3u) << "reports what it still has";
    EXPECT_EQ(r.statuses[1].status, code::over_limit);
  }
  // remote_address was never charged by the refused requests: all 3 are still there.
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(check({desc({{"remote_address", "10.9.9.9"}})}).overall, code::ok) << i;
  EXPECT_EQ(check({desc({{"remote_address", "10.9.9.9"}})}).overall, code::over_limit);
}

TEST_P(rls_semantics, hits_addend_request_and_per_descriptor) {
  auto r = check({desc({{"remote_address", "h"}})}, 2);
  EXPECT_EQ(r.statuses[0].limit_remaining, 1u);
  auto peek = desc({{"remote_address", "h"}});
  peek.hits_addend = 0;  // looks without consuming
  for (int i = 0; i < 3; ++i) {
    r = check({peek});
    EXPECT_EQ(r.overall, code::ok);
    EXPECT_EQ(r.statuses[0].limit_remaining, 1u);
  }
  auto big = desc({{"remote_address", "h"}});
  big.hits_addend = 1'000'000'000'000ULL;  // more than the limit could ever admit
  auto other = desc({{"remote_address", "other"}});
  r = check({other, big});
  EXPECT_EQ(r.overall, code::over_limit);
  EXPECT_EQ(r.statuses[1].status, code::over_limit);
  EXPECT_EQ(r.statuses[0].status, code::ok);
  EXPECT_EQ(r.statuses[0].limit_remaining, 3u) << "the other descriptor was only looked at";
  EXPECT_EQ(check({desc({{"remote_address", "h"}})}).statuses[0].limit_remaining, 0u);
  // The same counter twice with the largest hits: no wrap-around to a small sum.
  auto most = desc({{"remote_address", "w"}});
  most.hits_addend = std::numeric_limits<std::uint64_t>::max();
  r = check({most, most});
  EXPECT_EQ(r.overall, code::over_limit);
  EXPECT_EQ(check({desc({{"remote_address", "w"}})}).statuses[0].limit_remaining, 2u);
}

// A client's hits_addend is a uint64: the per-rule counters must not wrap to a small number
// (Prometheus reads a counter that goes down as a restart, and rate() would show garbage).
// Calls count at most a rule's capacity each (below), so only the counters' own sum can reach
// the top: it stays there rather than wrapping to a small number that reads as a reset.
TEST_P(rls_semantics, hit_counters_saturate_instead_of_wrapping) {
  const auto most = std::numeric_limits<std::uint64_t>::max() - 1;
  for (int i = 0; i < 2; ++i)
    metrics_.record("edge", "remote_address", most, verdict::over_limit, false);
  std::string text;
  metrics_.append(text);
  for (const char* family : {"total_hits", "over_limit"})
    EXPECT_NE(text.find("floodgate_envoy_" + std::string(family) +
                        "_total{domain=\"edge\",rule=\"remote_address\"} 18446744073709551615"),
              std::string::npos)
        << family << "\n"
        << text;
}

// One call counts at most the rule's capacity (issue 28, item 8): a hits_addend of 2^64 - 1
// would otherwise pin the counters at their most for good, and rate() over them read 0 from
// then on. The next ordinary call still moves them.
TEST_P(rls_semantics, one_call_counts_at_most_the_rules_capacity) {
  auto most = desc({{"remote_address", "pinned"}});
  most.hits_addend = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(check({most}).overall, code::over_limit);
  EXPECT_EQ(check({desc({{"remote_address", "other"}})}).overall, code::ok);
  std::string text;
  metrics_.append(text);
  // The rule allows 3 a minute: 3 for the flood, then 1.
  const std::string series = "{domain=\"edge\",rule=\"remote_address\"} ";
  EXPECT_NE(text.find("floodgate_envoy_total_hits_total" + series + "4\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("floodgate_envoy_over_limit_total" + series + "3\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("floodgate_envoy_within_limit_total" + series + "1\n"), std::string::npos)
      << text;
}

TEST_P(rls_semantics, the_request_may_override_the_limit) {
  auto d = desc({{"remote_address", "o"}});
  d.limit = limit_override{1, unit::hour};
  auto r = check({d});
  EXPECT_EQ(r.overall, code::ok);
  EXPECT_EQ(r.statuses[0].current_limit->requests_per_unit, 1u);
  EXPECT_EQ(r.statuses[0].current_limit->per, unit::hour);
  EXPECT_EQ(check({d}).overall, code::over_limit);
  // Without the override, the configured counter is its own.
  EXPECT_EQ(check({desc({{"remote_address", "o"}})}).statuses[0].limit_remaining, 2u);
  // An override of 0 refuses everything; a descriptor no rule matches may be overridden too.
  auto zero = desc({{"anything", "z"}});
  zero.limit = limit_override{0, unit::second};
  EXPECT_EQ(check({zero}).overall, code::over_limit);
}

TEST_P(rls_semantics, shadow_mode_reports_but_never_refuses) {
  EXPECT_EQ(check({desc({{"experiment", "a"}})}).overall, code::ok);
  const auto r = check({desc({{"experiment", "a"}}), desc({{"remote_address", "s"}})});
  EXPECT_EQ(r.overall, code::ok);
  EXPECT_EQ(r.statuses[0].status, code::ok);
  EXPECT_EQ(r.statuses[0].limit_remaining, 0u);
  EXPECT_EQ(r.statuses[1].limit_remaining, 2u) << "the enforced rule consumed";
  std::string text;
  metrics_.append(text);
  EXPECT_NE(text.find("floodgate_envoy_shadow_mode_total{domain=\"edge\",rule=\"experiment\"} 1"),
            std::string::npos)
      << text;
}

TEST_P(rls_semantics, global_shadow_mode_answers_ok_with_statuses_unchanged) {
  rls_options o;
  o.shadow_mode = true;
  make_service(o);
  check({desc({{"path", "/login"}})}, 2);
  const auto r = check({desc({{"path", "/login"}})});
  EXPECT_EQ(r.overall, code::ok);
  EXPECT_EQ(r.statuses[0].status, code::over_limit);
}

TEST_P(rls_semantics, replaces_drops_the_named_limit) {
  check({desc({{"path", "/login"}})}, 2);  // login used up
  const auto r = check({desc({{"path", "/login"}}), desc({{"user", "t"}, {"plan", "trial"}})});
  EXPECT_EQ(r.overall, code::ok) << "login is replaced by trial";
  EXPECT_FALSE(r.statuses[0].current_limit);
  EXPECT_EQ(r.statuses[1].current_limit->name, "trial");
}

// Two overrides of one descriptor in one unit share its counter (upstream keys the counter by
// the entries and the unit alone): the request's hits must fit the smaller limit too, and no
// status may report more remaining than its own limit.
TEST_P(rls_semantics, the_same_counter_under_two_overrides_keeps_the_smaller_limit) {
  auto loose = desc({{"remote_address", "two"}});
  loose.limit = limit_override{10, unit::minute};
  auto tight = desc({{"remote_address", "two"}});
  tight.limit = limit_override{1, unit::minute};
  const auto r = check({loose, tight});
  EXPECT_EQ(r.overall, code::over_limit) << "2 hits on a counter limited to 1";
  EXPECT_EQ(r.statuses[1].status, code::over_limit);
  for (const auto& st : r.statuses)
    EXPECT_LE(st.limit_remaining, st.current_limit->requests_per_unit);
  EXPECT_EQ(check({tight}).overall, code::ok) << "the refused request consumed nothing";
}

TEST_P(rls_semantics, the_same_counter_twice_in_one_request_adds_up) {
  const auto r = check({desc({{"remote_address", "dup"}}), desc({{"remote_address", "dup"}})});
  EXPECT_EQ(r.overall, code::ok);
  EXPECT_EQ(r.statuses[0].limit_remaining, 1u);
  EXPECT_EQ(r.statuses[1].limit_remaining, 1u);
  EXPECT_EQ(check({desc({{"remote_address", "dup"}}), desc({{"remote_address", "dup"}})}).overall,
            code::over_limit);
}

TEST_P(rls_semantics, response_headers_come_from_the_most_constrained_status) {
  rls_options o;
  o.response_headers = true;
  make_service(o);
  const auto r = check({desc({{"path", "/home"}}), desc({{"remote_address", "hd"}})});
  ASSERT_EQ(r.response_headers_to_add.size(), 3u);
  EXPECT_EQ(r.response_headers_to_add[0].key, "RateLimit-Limit");
  EXPECT_EQ(r.response_headers_to_add[0].value, "3");
  EXPECT_EQ(r.response_headers_to_add[1].key, "RateLimit-Remaining");
  EXPECT_EQ(r.response_headers_to_add[1].value, "2");
  EXPECT_EQ(r.response_headers_to_add[2].key, "RateLimit-Reset");
  EXPECT_EQ(r.response_headers_to_add[2].value, "60");
  make_service({});
  EXPECT_TRUE(check({desc({{"path", "/home"}})}).response_headers_to_add.empty());
}

TEST_P(rls_semantics, bad_requests_are_invalid_arguments) {
  auto invalid = [&](request req, const std::string& message) {
    const auto r = call(std::move(req));
    EXPECT_EQ(r.outcome, rls_result::kind::invalid_argument);
    EXPECT_EQ(r.message, message);
  };
  request req;
  req.descriptors = {desc({{"a", "b"}})};
  invalid(req, "domain must not be empty");
  req.domain = "edge";
  req.descriptors.clear();
  invalid(req, "a request needs at least one descriptor");
  req.descriptors = {desc({})};
  invalid(req, "descriptor 0 has no entries");
  req.descriptors = {desc({{"a", "b"}}), desc({{"", "b"}})};
  invalid(req, "descriptor 1 entry 0 has an empty key");
  req.descriptors.assign(257, desc({{"a", "b"}}));
  invalid(req, "too many descriptors: 257 (at most 256)");
  auto d = desc({{"a", "b"}});
  d.limit = limit_override{5, unit::unknown};
  req.descriptors = {d};
  invalid(req, "descriptor 0: the limit override has no valid unit");
}

TEST_P(rls_semantics, a_passed_deadline_is_not_sent_to_the_backend) {
  request req;
  req.domain = "edge";
  req.descriptors = {desc({{"remote_address", "late"}})};
  const auto r = call(req, rls_service::clock::now() - 1ms);
  EXPECT_EQ(r.outcome, rls_result::kind::deadline_exceeded);
  EXPECT_EQ(check({desc({{"remote_address", "late"}})}).statuses[0].limit_remaining, 2u);
}

TEST_P(rls_semantics, a_reload_swaps_rules_for_later_requests) {
  store_->set(
      make_config("domain: edge\ndescriptors:\n  - key: remote_address\n"
                  "    rate_limit: {unit: minute, requests_per_unit: 10}\n"));
  EXPECT_EQ(check({desc({{"remote_address", "r"}})}).statuses[0].limit_remaining, 9u);
}

// Issue 24: a 1,100-byte value (a long :path) made the call INVALID_ARGUMENT, so the per-IP
// descriptor beside it went uncounted (and Envoy, failing open, skipped every limit); so did a
// 17th descriptor. Values are the attacker's: they are keyed by a digest when long, and every
// descriptor is decided.
TEST_P(rls_semantics, a_long_value_or_many_descriptors_never_fail_the_call) {
  const std::string long_path = "/" + std::string(1100, 'p');
  auto r = check({desc({{"path", long_path}}), desc({{"remote_address", "ip-long"}})});
  EXPECT_EQ(r.overall, code::ok);
  ASSERT_EQ(r.statuses.size(), 2u);
  EXPECT_EQ(r.statuses[0].limit_remaining, 99u);
  EXPECT_EQ(r.statuses[1].limit_remaining, 2u) << "the per-IP descriptor is charged";
  // Two long values that differ only at their end count apart.
  EXPECT_EQ(check({desc({{"path", long_path + "x"}})}).statuses[0].limit_remaining, 99u);
  EXPECT_EQ(check({desc({{"path", long_path}})}).statuses[0].limit_remaining, 98u);
  // More entries than the config is deep match nothing (upstream's rule), without an error.
  std::vector<descriptor_entry> deep(40, {"user", "u"});
  r = check({desc(deep), desc({{"remote_address", "ip-long"}})});
  EXPECT_FALSE(r.statuses[0].current_limit.has_value());
  EXPECT_EQ(r.statuses[1].limit_remaining, 1u);

  // 40 counters: more than one check_all holds (16), all decided and charged.
  std::vector<descriptor> many;
  for (int i = 0; i < 40; ++i)
    many.push_back(desc({{"remote_address", "many-" + std::to_string(i)}}));
  r = check(many);
  ASSERT_EQ(r.statuses.size(), 40u);
  for (const auto& st : r.statuses) EXPECT_EQ(st.limit_remaining, 2u);
  r = check(many);
  for (const auto& st : r.statuses) EXPECT_EQ(st.limit_remaining, 1u);
}

// A counter's key is its entries, ',', '=' and '%' escaped (percent_escape): pinned, since
// Redis holds counters under it. Forty counters with shadow ones among them: the enforced in
// check_alls of 16 at most, each shadow one alone, every status where its descriptor was.
TEST_P(rls_semantics, counter_keys_are_escaped_entries_and_groups_keep_their_order) {
  const std::vector<descriptor_entry> odd{{"remote_address", "a,b=c%"}};
  EXPECT_EQ(check({desc(odd)}).statuses[0].limit_remaining, 2u);
  const auto* rule = store_->get()->match("edge", odd).limit;
  ASSERT_TRUE(rule && rule->policy);
  EXPECT_EQ(limiter_->check("remote_address=a%2Cb%3Dc%25", *rule->policy, 0).decision.remaining, 2);

  std::vector<descriptor> many;
  for (int i = 0; i < 40; ++i)
    many.push_back(i % 7 == 3 ? desc({{"experiment", "g-" + std::to_string(i)}})
                              : desc({{"remote_address", "g-" + std::to_string(i)}}));
  for (const std::uint32_t left : {2u, 1u, 0u}) {
    const auto r = check(many);
    ASSERT_EQ(r.statuses.size(), 40u);
    for (int i = 0; i < 40; ++i) {
      ASSERT_TRUE(r.statuses[i].current_limit) << i;
      EXPECT_EQ(r.statuses[i].current_limit->requests_per_unit, i % 7 == 3 ? 1u : 3u) << i;
      EXPECT_EQ(r.statuses[i].limit_remaining, i % 7 == 3 ? 0u : left) << i;
      EXPECT_EQ(r.statuses[i].status, code::ok) << i;  // shadow ones never refuse
    }
  }
  EXPECT_EQ(check(many).overall, code::over_limit);
}

// Upstream's block-list idiom (README example 3): every request over the limit, no counter.
TEST_P(rls_semantics, a_limit_of_zero_refuses_every_request_and_charges_nothing_else) {
  store_->set(make_config(R"(
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 3}
)"));
  for (int round = 0; round < 2; ++round) {
    const auto r = check({desc({{"remote_address", "50.0.0.5"}}), desc({{"path", "/a"}})});
    EXPECT_EQ(r.overall, code::over_limit);
    EXPECT_EQ(r.statuses[0].status, code::over_limit);
    ASSERT_TRUE(r.statuses[0].current_limit.has_value());
    EXPECT_EQ(r.statuses[0].current_limit->requests_per_unit, 0u);
    EXPECT_EQ(r.statuses[0].current_limit->per, unit::second);
    EXPECT_EQ(r.statuses[0].limit_remaining, 0u);
    ASSERT_TRUE(r.statuses[0].duration_until_reset.has_value());
    EXPECT_GT(*r.statuses[0].duration_until_reset, 0ms);
    EXPECT_LE(*r.statuses[0].duration_until_reset, 1000ms) << "the end of the second";
    EXPECT_EQ(r.statuses[1].status, code::ok);
    EXPECT_EQ(r.statuses[1].limit_remaining, 3u) << "refused whole: the path is not charged";
  }
  EXPECT_EQ(check({desc({{"remote_address", "50.0.0.6"}})}).statuses[0].limit_remaining, 2u);
  EXPECT_EQ(check({desc({{"remote_address", "50.0.0.5"}})}, 0).overall, code::over_limit);
}

TEST_P(rls_semantics, wildcards_anywhere_and_share_threshold) {
  store_->set(make_config(R"(
domain: edge
descriptors:
  - key: files
    value: files/*/raw
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: files
    value: docs/*.pdf
    rate_limit: {unit: minute, requests_per_unit: 3}
)"));
  auto remaining = [&](const char* value) {
    const auto r = check({desc({{"files", value}})});
    return r.statuses[0].current_limit ? static_cast<int>(r.statuses[0].limit_remaining) : -1;
  };
  EXPECT_EQ(remaining("files/a/raw"), 2);
  EXPECT_EQ(remaining("files/b/c/raw"), 1) << "share_threshold: one counter for the pattern";
  EXPECT_EQ(remaining("files/b"), -1) << "no match";
  EXPECT_EQ(remaining("docs/a.pdf"), 2);
  EXPECT_EQ(remaining("docs/b.pdf"), 2) << "without share_threshold each value counts apart";
  EXPECT_EQ(remaining("docs/b.txt"), -1);
}

TEST_P(rls_semantics, detailed_and_value_to_metric_name_series_by_the_request) {
  store_->set(make_config(R"(
domain: edge
descriptors:
  - key: user
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: route
    value: api/*
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
)"));
  check({desc({{"user", "alice"}})}, 2);
  check({desc({{"user", "bob"}})});
  check({desc({{"route", "api/x"}})});
  std::string out;
  metrics_.append(out);
  for (const char* line :
       {"floodgate_envoy_total_hits_total{domain=\"edge\",rule=\"user_alice\"} 2",
        "floodgate_envoy_total_hits_total{domain=\"edge\",rule=\"user_bob\"} 1",
        "floodgate_envoy_total_hits_total{domain=\"edge\",rule=\"route_api/x\"} 1"})
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
}

// floodgate's reservations through Envoy's API: a rule with `reserve` is answered from this
// process's reserved units, and a request refused for another of its descriptors spends none
// of them (all-or-nothing: the set-aside units go back to their grant).
TEST_P(rls_semantics, reserving_rules_are_answered_from_reservations_all_or_nothing) {
  store_ = std::make_unique<envoy_config_store>(make_config(R"(
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 1000, reserve: 100, reserve_for: 10s}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2}
)"));
  make_service({});
  auto both = [&](const std::string& user) {
    return check({desc({{"tenant", "acme"}}), desc({{"user", user}})});
  };
  for (int i = 0; i < 40; ++i) ASSERT_EQ(both("u" + std::to_string(i)).overall, code::ok);
  EXPECT_GT(limiter_->stats().reserved_decisions, 0u);
  EXPECT_EQ(both("bob").overall, code::ok);
  EXPECT_EQ(both("bob").overall, code::ok);
  const auto before = both("carol");
  ASSERT_EQ(before.overall, code::ok);
  const auto spent = limiter_->stats().reserved_decisions;
  const auto refused = both("bob");  // bob is over: nothing is charged, the tenant included
  EXPECT_EQ(refused.overall, code::over_limit);
  EXPECT_EQ(refused.statuses[1].status, code::over_limit);
  EXPECT_EQ(limiter_->stats().reserved_decisions, spent);
  const auto after = both("dave");
  ASSERT_EQ(after.overall, code::ok);
  EXPECT_EQ(limiter_->stats().reserved_decisions, spent + 1);
  // What the tenant has left moved by dave's unit only. (On Redis an earlier grant's give-back
  // may land in between and raise it: the memory backend applies give-backs at once.)
  if (GetParam() == "memory") {
    EXPECT_EQ(after.statuses[0].limit_remaining + 1, before.statuses[0].limit_remaining);
  }
}

TEST(envoy_config_reserve, bad_reserve_fields_name_their_line) {
  std::map<std::string, domain_config, std::less<>> domains;
  auto error_of = [&](const std::string& limit) -> std::string {
    try {
      domains.clear();
      parse_envoy_domain("domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + limit + "\n",
                         "d.yaml", domains);
      return {};
    } catch (const std::exception& e) {
      return e.what();
    }
  };
  EXPECT_EQ(error_of("{unit: hour, requests_per_unit: 100, reserve: 10, reserve_for: 5s}"), "");
  EXPECT_NE(error_of("{unit: hour, requests_per_unit: 100, reserve: 0}").find(
                "d.yaml:4: "),
            std::string::npos);
  EXPECT_NE(error_of("{unit: hour, requests_per_unit: 100, reserve: 101}").find("reserve must be"),
            std::string::npos);
  EXPECT_NE(error_of("{unit: hour, requests_per_unit: 100, reserve_for: 1s}")
                .find("reserve_for applies only with reserve"),
            std::string::npos);
  EXPECT_NE(error_of("{unit: hour, requests_per_unit: 100, reserve: 5, reserve_for: 2}")
                .find("reserve_for must be a duration"),
            std::string::npos);
  EXPECT_NE(error_of("{unlimited: true, reserve: 5}").find("contradicts 'reserve'"),
            std::string::npos);
  EXPECT_NE(error_of("{unit: hour, requests_per_unit: 0, reserve: 5}")
                .find("reserve needs requests_per_unit of at least 1"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(backends, rls_semantics, ::testing::Values("memory", "redis"));

// A client chooses the values, so series named by them are bounded apart from the rules'.
TEST(rls_metrics_bounds, series_named_by_requests_are_bounded_apart) {
  rls_metrics m;
  const auto named = rls_metrics::max_request_named_series;
  for (std::size_t i = 0; i < named + 10; ++i)
    m.record("d", "user", 1, verdict::within_limit, false, "user_" + std::to_string(i));
  m.record("d", "user", 1, verdict::within_limit, false,
           "user_" + std::string(rls_metrics::max_request_named_bytes, 'x'));
  m.record("d", "path", 1, verdict::within_limit, false);
  std::string out;
  m.append(out);
  std::size_t series = 0;
  for (auto at = out.find("floodgate_envoy_total_hits_total{"); at != std::string::npos;
       at = out.find("floodgate_envoy_total_hits_total{", at + 1))
    ++series;
  EXPECT_EQ(series, named + 2) << "the named ones, the rule's own and the other rule";
  EXPECT_NE(out.find("floodgate_envoy_total_hits_total{domain=\"d\",rule=\"user\"} 11"),
            std::string::npos);
  EXPECT_NE(out.find("floodgate_envoy_total_hits_total{domain=\"d\",rule=\"path\"} 1"),
            std::string::npos);
}

// Each call on a fresh service with `mode`, against a Redis that `redis` can stop.
struct failing_redis {
  test::redis_server redis;
  // Generous: a loaded machine must not fail the calls made before the outage (those after it
  // fail at once: the connection is refused).
  std::shared_ptr<floodgate::limiter> limiter = [this] {
    backend_options bo;
    bo.redis.timeout = 2s;
    bo.redis.connect_timeout = 2s;
    return std::make_shared<floodgate::limiter>(redis.url(), bo);
  }();
  envoy_config_store store{make_config(config_text)};

  rls_result call(backend_failure mode, std::vector<descriptor> ds) {
    rls_options o;
    o.on_backend_failure = mode;
    rls_service service(limiter, store, o);
    request req;
    req.domain = "edge";
    req.descriptors = std::move(ds);
    std::promise<rls_result> p;
    auto f = p.get_future();
    service.async_should_rate_limit(req, rls_service::clock::now() + 5s,
                                    [&p](rls_result r) { p.set_value(std::move(r)); });
    return f.get();
  }
};

// Upstream's contract, the default: whatever the rules' failure_mode, the call fails.
TEST(rls_failures, redis_down_fails_the_call_unavailable_by_default) {
  failing_redis f;
  EXPECT_EQ(f.call(rls_options{}.on_backend_failure, {desc({{"bucket", "b"}})}).outcome,
            rls_result::kind::ok);
  f.redis.kill();
  for (const char* key : {"bucket", "remote_address"}) {
    const auto r = f.call(rls_options{}.on_backend_failure, {desc({{key, "b"}})});
    EXPECT_EQ(r.outcome, rls_result::kind::unavailable) << key;
    EXPECT_NE(r.message.find("the rate limit backend failed: "), std::string::npos) << r.message;
  }
  // A request with no counter asks nothing of the backend: still answered.
  EXPECT_EQ(f.call(backend_failure::error, {desc({{"unknown", "b"}})}).outcome,
            rls_result::kind::ok);
}

TEST(rls_failures, redis_down_follows_each_rules_failure_mode) {
  failing_redis f;
  auto call = [&f](std::vector<descriptor> ds) {
    return f.call(backend_failure::rule, std::move(ds)).response;
  };
  EXPECT_EQ(call({desc({{"bucket", "b"}})}).overall, code::ok);
  f.redis.kill();
  // bucket fails open, remote_address (the default) closed.
  auto open = call({desc({{"bucket", "b"}})});
  EXPECT_EQ(open.overall, code::ok);
  EXPECT_EQ(open.statuses[0].status, code::ok);
  auto closed = call({desc({{"remote_address", "x"}})});
  EXPECT_EQ(closed.overall, code::over_limit);
  EXPECT_EQ(closed.statuses[0].status, code::over_limit);
  auto both = call({desc({{"bucket", "b"}}), desc({{"remote_address", "x"}})});
  EXPECT_EQ(both.overall, code::over_limit);
  EXPECT_EQ(both.statuses[0].status, code::ok);
  EXPECT_EQ(both.statuses[1].status, code::over_limit);
}

}  // namespace
}  // namespace floodgate::service::envoy
