// Per-key overrides: the rules file's `overrides:` (valid and invalid, file:line), which entry
// decides a key (exact before the longest prefix), the run-time table (expiry, precedence over
// the static entries, bounds), and the handler deciding with the override's policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "api/route.hpp"
#include "config/config.hpp"
#include "config/override_table.hpp"
#include "config/runtime_overrides.hpp"
#include "floodgate/errors.hpp"

namespace floodgate::service {
namespace {

using namespace std::chrono_literals;

policy_fields with_limit(std::int64_t n) {
  policy_fields f;
  f.limit = n;
  return f;
}

policy_fields with_burst(std::int64_t n) {
  policy_fields f;
  f.burst = n;
  return f;
}

std::string error_for(const std::string& text) {
  try {
    parse_config(text, "rules.yaml");
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

const char* const two_overrides = R"(rules:
  - name: api
    algorithm: token_bucket
    limit: 10
    window: 1s
    overrides:
      - key: vip
        limit: 100
      - prefix: "free:"
        limit: 2
        burst: 4
      - prefix: "free:trial:"
        window: 1m
        failure_mode: open
  - name: log
    algorithm: sliding_log
    limit: 5
    window: 1m
)";

TEST(overrides, parse_exact_and_prefix_entries_inheriting_the_rule_fields) {
  const auto cfg = parse_config(two_overrides, "rules.yaml");
  const rule& api = *cfg.find("api");
  ASSERT_NE(api.overrides, nullptr);
  EXPECT_EQ(api.overrides->size(), 3u);

  const rule& vip = config::resolve(api, "vip");
  EXPECT_NE(&vip, &api);
  // The rule left burst to its default: the override's limit is its burst.
  EXPECT_EQ(vip.policy, policy("api", algorithm::token_bucket, 100, 1s));
  EXPECT_EQ(vip.name(), "api") << "an override decides under its rule's name";
  EXPECT_EQ(config::resolve(api, "free:1").policy,
            policy("api", algorithm::token_bucket, 2, 1s, 4));
  EXPECT_EQ(config::resolve(api, "free:trial:9").policy,
            policy("api", algorithm::token_bucket, 10, 1min, std::nullopt, failure_mode::open));
  EXPECT_EQ(&config::resolve(api, "other"), &api);
  EXPECT_EQ(&config::resolve(api, "vipx"), &api) << "an exact key is not a prefix";
  EXPECT_EQ(&config::resolve(api, "free"), &api) << "shorter than the prefix";
  EXPECT_EQ(cfg.find("log")->overrides, nullptr);
}

TEST(overrides, an_override_keeps_a_burst_the_rule_wrote) {
  const auto cfg = parse_config(R"(rules:
  - name: g
    algorithm: gcra
    limit: 10
    window: 1s
    burst: 3
    block_for: 1m
    overrides:
      - {key: a, limit: 20}
      - {key: b, burst: 7, block_for: 0s}
)",
                                "r.yaml");
  const rule& g = *cfg.find("g");
  EXPECT_EQ(config::resolve(g, "a").policy,
            policy("g", algorithm::gcra, 20, 1s, 3).with_block_for(1min));
  EXPECT_EQ(config::resolve(g, "b").policy, policy("g", algorithm::gcra, 10, 1s, 7));
}

TEST(overrides, exact_before_the_longest_prefix) {
  const auto cfg = parse_config(R"(rules:
  - name: api
    algorithm: fixed_window
    limit: 10
    window: 1s
    overrides:
      - {prefix: "a", limit: 1}
      - {prefix: "ab", limit: 2}
      - {prefix: "abc", limit: 3}
      - {prefix: "abd", limit: 4}
      - {key: "abc", limit: 5}
      - {prefix: "b", limit: 6}
)",
                                "r.yaml");
  const rule& api = *cfg.find("api");
  const auto limit = [&](std::string_view k) { return config::resolve(api, k).policy.limit(); };
  EXPECT_EQ(limit("abc"), 5) << "the exact key wins over the prefix 'abc' of the same text";
  EXPECT_EQ(limit("abcd"), 3);
  EXPECT_EQ(limit("abdz"), 4);
  EXPECT_EQ(limit("abz"), 2) << "past 'abd' in the sorted table, back to its parent 'ab'";
  EXPECT_EQ(limit("ab"), 2);
  EXPECT_EQ(limit("az"), 1);
  EXPECT_EQ(limit("a"), 1);
  EXPECT_EQ(limit("b"), 6);
  EXPECT_EQ(limit("c"), 10);
  EXPECT_EQ(limit(""), 10);
}

// The sorted table with parents against the definition (every prefix tried), on random
// prefixes over a small alphabet, so that prefixes nest and interleave.
TEST(overrides, the_longest_prefix_agrees_with_trying_every_prefix) {
  std::mt19937 rng(26);
  const rule base{policy("r", algorithm::fixed_window, 1000, 1s), {}};
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> prefixes;
    std::vector<override_spec> specs;
    auto word = [&](std::size_t max) {
      std::string s(1 + rng() % max, 'a');
      for (auto& c : s) c = static_cast<char>('a' + rng() % 3);
      return s;
    };
    for (int i = 0; i < 40; ++i) {
      auto p = word(6);
      if (std::find(prefixes.begin(), prefixes.end(), p) != prefixes.end()) continue;
      prefixes.push_back(p);
      specs.push_back({p, match_kind::prefix, with_limit(static_cast<std::int64_t>(p.size()))});
    }
    const auto table = build_override_table(base, specs);
    for (int k = 0; k < 200; ++k) {
      const auto key = word(8);
      std::size_t best = 0;
      for (const auto& p : prefixes)
        if (key.starts_with(p)) best = std::max(best, p.size());
      const auto* e = table.find(key);
      ASSERT_EQ(e ? e->match.size() : 0, best) << "key " << key << " round " << round;
      if (e) {
        EXPECT_TRUE(key.starts_with(e->match));
      }
    }
  }
}

TEST(overrides, bad_entries_name_the_file_line_and_problem) {
  const std::string head =
      "rules:\n  - name: api\n    algorithm: sliding_log\n    limit: 10\n    window: 1s\n"
      "    overrides:\n";
  EXPECT_EQ(error_for(head + "      - {key: a, limt: 5}\n"),
            "rules.yaml:7: rule 'api': override of key 'a': unknown field 'limt' (expected key "
            "or prefix, limit, window, burst, block_for, failure_mode)");
  EXPECT_EQ(
      error_for(head + "      - key: a\n        limit: 5\n      - key: a\n        limit: 6\n"),
      "rules.yaml:9: rule 'api': override of key 'a': duplicate key (first at line 7)");
  EXPECT_EQ(error_for(head + "      - {prefix: a, limit: 5}\n      - {prefix: a, limit: 6}\n"),
            "rules.yaml:8: rule 'api': override of prefix 'a': duplicate prefix (first at line 7)");
  // A key and a prefix of the same text are different entries.
  EXPECT_EQ(error_for(head + "      - {prefix: a, limit: 5}\n      - {key: a, limit: 6}\n"), "");
  EXPECT_EQ(error_for(head + "      - key: a\n        burst: 5\n"),
            "rules.yaml:8: rule 'api': override of key 'a': burst applies only to token_bucket "
            "and gcra, not sliding_log");
  EXPECT_EQ(error_for(head + "      - key: a\n        algorithm: gcra\n"),
            "rules.yaml:8: rule 'api': override of key 'a': algorithm cannot be set in an "
            "override (it is the rule's; an override sets limit, window, burst, block_for, "
            "failure_mode)");
  EXPECT_EQ(error_for(head + "      - key: a\n        limit: 0\n"),
            "rules.yaml:8: rule 'api': override of key 'a': limit must be at least 1 (got 0)");
  EXPECT_EQ(error_for(head + "      - key: a\n        window: soon\n"),
            "rules.yaml:8: rule 'api': override of key 'a': window must be a duration such as "
            "500ms, 60s, 5m or 1h (got 'soon')");
  EXPECT_EQ(error_for(head + "      - {key: a}\n"),
            "rules.yaml:7: rule 'api': override of key 'a': sets nothing (give limit, window, "
            "burst, block_for or failure_mode)");
  EXPECT_EQ(error_for(head + "      - {limit: 3}\n"),
            "rules.yaml:7: rule 'api': override #1: missing field 'key' (one key) or 'prefix' "
            "(every key starting with it)");
  EXPECT_EQ(error_for(head + "      - {key: a, prefix: b, limit: 3}\n"),
            "rules.yaml:7: rule 'api': override #1: give key or prefix, not both");
  EXPECT_EQ(error_for(head + "      - {key: \"\", limit: 3}\n"),
            "rules.yaml:7: rule 'api': override #1: key must be 1 to 1024 bytes");
  EXPECT_EQ(error_for(head + "      - {key: " + std::string(1025, 'k') + ", limit: 3}\n"),
            "rules.yaml:7: rule 'api': override #1: key must be 1 to 1024 bytes");
  EXPECT_EQ(error_for(head + "      - key: a\n        limit: 2\n        limit: 3\n"),
            "rules.yaml:9: rule 'api': override #1: duplicate field 'limit'");
  EXPECT_EQ(error_for(head + "      key: a\n"),
            "rules.yaml:6: rule 'api': overrides must be a list of {key or prefix, limit, ...}");
  EXPECT_EQ(error_for(head + "      - just-a-key\n"),
            "rules.yaml:7: rule 'api': override #1 must be a map");
  EXPECT_EQ(error_for("rules:\n  - name: c\n    algorithm: concurrency\n    limit: 2\n"
                      "    lease: 30s\n    overrides: []\n"),
            "rules.yaml:6: rule 'c': overrides does not apply to algorithm: concurrency (it "
            "takes limit and lease)");
  // A reservation the rule has must still fit an override's limit: blamed on the override.
  EXPECT_EQ(
      error_for("rules:\n  - name: r\n    algorithm: fixed_window\n    limit: 100\n"
                "    window: 1s\n    reserve: 50\n    overrides:\n      - key: a\n"
                "        limit: 10\n"),
      "rules.yaml:8: rule 'r': override of key 'a': reserve must be in 0..limit (10), got 50");
}

std::string many_overrides(const std::string& rule, std::size_t n) {
  std::string s = "  - name: " + rule +
                  "\n    algorithm: fixed_window\n    limit: 10\n    window: 1s\n"
                  "    overrides:\n";
  for (std::size_t i = 0; i < n; ++i) s += "      - {key: k" + std::to_string(i) + ", limit: 5}\n";
  return s;
}

TEST(overrides, the_number_of_overrides_is_bounded) {
  EXPECT_EQ(error_for("rules:\n" + many_overrides("a", max_overrides_per_rule)), "");
  EXPECT_EQ(error_for("rules:\n" + many_overrides("a", max_overrides_per_rule + 1)),
            "rules.yaml:6: rule 'a': at most 10000 overrides per rule (got 10001)");
  // In total: ten full rules, then one more entry. Counted before the entries are read.
  std::string text = "rules:\n";
  for (int r = 0; r < 10; ++r)
    text += many_overrides("r" + std::to_string(r), max_overrides_per_rule);
  text += many_overrides("last", 1);
  const auto err = error_for(text);
  EXPECT_NE(err.find("rule 'last': more than 100000 overrides in the file"), std::string::npos)
      << err;
}

// --- the run-time table ---

std::shared_ptr<const config> rules_with_static(const char* text = two_overrides) {
  return std::make_shared<const config>(parse_config(text, "rules.yaml"));
}

runtime_override raise(std::string rule, std::string key, std::int64_t limit,
                       std::int64_t expires_at, match_kind kind = match_kind::exact) {
  return {std::move(rule), {std::move(key), kind, with_limit(limit), expires_at}};
}

TEST(runtime_overrides, an_entry_decides_until_its_expiry_then_the_static_ones_again) {
  const auto cfg = rules_with_static();
  const rule& api = *cfg->find("api");
  runtime_overrides live;
  ASSERT_EQ(live.set(*cfg, raise("api", "vip", 500, 2'000), 1'000), std::nullopt);
  auto snap = live.current();
  ASSERT_NE(snap->resolve(api, "vip", 1'999), nullptr);
  EXPECT_EQ(snap->resolve(api, "vip", 1'999)->policy.limit(), 500);
  EXPECT_EQ(snap->resolve(api, "vip", 2'000), nullptr) << "expired at its expiry";
  EXPECT_EQ(config::resolve(api, "vip").policy.limit(), 100) << "the static override again";
  EXPECT_EQ(live.list(1'999).size(), 1u);
  EXPECT_TRUE(live.list(2'000).empty());
}

TEST(runtime_overrides, take_precedence_over_static_overrides_and_fall_through_when_expired) {
  const auto cfg = rules_with_static();
  const rule& api = *cfg->find("api");
  runtime_overrides live;
  // A run-time prefix beats the static exact key; a longer run-time prefix beats it, until it
  // expires.
  ASSERT_EQ(live.set(*cfg, raise("api", "v", 7, 10'000, match_kind::prefix), 0), std::nullopt);
  ASSERT_EQ(live.set(*cfg, raise("api", "vi", 8, 5'000, match_kind::prefix), 0), std::nullopt);
  const auto snap = live.current();
  EXPECT_EQ(snap->resolve(api, "vip", 4'999)->policy.limit(), 8);
  EXPECT_EQ(snap->resolve(api, "vip", 5'000)->policy.limit(), 7) << "the shorter live prefix";
  EXPECT_EQ(snap->resolve(api, "vip", 10'000), nullptr);
  EXPECT_EQ(snap->resolve(*cfg->find("log"), "vip", 0), nullptr) << "another rule";
}

TEST(runtime_overrides, set_replaces_remove_removes_and_bad_entries_are_refused) {
  const auto cfg = rules_with_static();
  runtime_overrides live;
  ASSERT_EQ(live.set(*cfg, raise("api", "k", 5, 100), 0), std::nullopt);
  ASSERT_EQ(live.set(*cfg, raise("api", "k", 6, 200), 0), std::nullopt);
  const auto l = live.list(0);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].spec.fields.limit, 6);
  EXPECT_EQ(l[0].spec.expires_at, 200);
  EXPECT_FALSE(live.remove("api", match_kind::prefix, "k")) << "a prefix 'k' was never set";
  EXPECT_TRUE(live.remove("api", match_kind::exact, "k"));
  EXPECT_EQ(live.current()->resolve(*cfg->find("api"), "k", 0), nullptr);

  EXPECT_EQ(live.set(*cfg, raise("nope", "k", 5, 100), 0), "no rule named 'nope'");
  EXPECT_EQ(live.set(*cfg, raise("api", "k", 5, 100), 100),
            "override of rule 'api' key 'k': its expiry must be in the future");
  EXPECT_EQ(live.set(*cfg, raise("api", "k", 0, 100), 0),
            "override of rule 'api' key 'k': policy 'api': limit must be at least 1 (got 0)");
  runtime_override burst{"log", {"k", match_kind::exact, with_burst(3), 100}};
  EXPECT_EQ(live.set(*cfg, burst, 0),
            "override of rule 'log' key 'k': policy 'log': burst "
            "applies only to token_bucket and gcra, not sliding_log");
  EXPECT_EQ(live.set(*cfg, {"api", {"k", match_kind::exact, {}, 100}}, 0),
            "override of rule 'api' key 'k' sets nothing (give limit, window, burst, block_for "
            "or failure_mode)");
  EXPECT_TRUE(live.list(0).empty());
}

TEST(runtime_overrides, the_table_is_bounded_and_expired_entries_make_room) {
  const auto cfg = rules_with_static();
  runtime_overrides live(3);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(live.set(*cfg, raise("api", "k" + std::to_string(i), 5, 100 + i), 0), std::nullopt);
  EXPECT_EQ(live.set(*cfg, raise("api", "k3", 5, 1'000), 0),
            "the run-time override table is full (3 entries); remove some or wait for them to "
            "expire");
  ASSERT_EQ(live.set(*cfg, raise("api", "k1", 9, 1'000), 0), std::nullopt) << "a replacement fits";
  EXPECT_EQ(live.set(*cfg, raise("api", "k3", 5, 1'000), 100), std::nullopt) << "k0 expired at 100";
  EXPECT_EQ(live.list(100).size(), 3u);
}

TEST(runtime_overrides, a_reload_rebinds_entries_and_a_stale_one_is_never_used) {
  const auto old_cfg = rules_with_static();
  runtime_overrides live;
  ASSERT_EQ(live.set(*old_cfg, raise("api", "k", 50, 1'000), 0), std::nullopt);
  runtime_override burst{"api", {"b", match_kind::exact, with_burst(3), 1'000}};
  ASSERT_EQ(live.set(*old_cfg, burst, 0), std::nullopt);

  // The reload makes api a sliding_log rule (no burst) with another limit.
  const auto new_cfg = rules_with_static(R"(rules:
  - {name: api, algorithm: sliding_log, limit: 20, window: 1s}
)");
  const rule& api = *new_cfg->find("api");
  EXPECT_EQ(live.current()->resolve(api, "k", 0), nullptr)
      << "built on the old rule: not used under the new one";
  const auto dropped = live.rebind(*new_cfg, 0);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0],
            "override of rule 'api' key 'b' dropped: policy 'api': burst applies only to "
            "token_bucket and gcra, not sliding_log");
  const rule* k = live.current()->resolve(api, "k", 0);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->policy, policy("api", algorithm::sliding_log, 50, 1s));

  const auto gone =
      rules_with_static("rules:\n  - {name: other, algorithm: gcra, limit: 1, window: 1s}\n");
  EXPECT_EQ(live.rebind(*gone, 0),
            std::vector<std::string>{"override of rule 'api' key 'k' dropped: its rule is gone"});
  EXPECT_TRUE(live.list(0).empty());
}

// --- the handler decides with the override's policy ---

check_plan plan_of(const route_result& r) {
  if (auto* plan = std::get_if<check_plan>(&r)) return *plan;
  if (auto* res = std::get_if<http_response>(&r)) ADD_FAILURE() << res->status << " " << res->body;
  return {};
}

http_request post_check(std::string body) {
  return {"POST", "/v1/check", {{"Content-Type", "application/json"}}, std::move(body), "10.0.0.9"};
}

TEST(overrides, every_check_path_decides_with_the_override) {
  const auto cfg = rules_with_static(R"(rules:
  - name: api
    algorithm: gcra
    limit: 10
    window: 1s
    key: header:X-Key
    overrides:
      - {key: vip, limit: 100}
      - {prefix: "free:", limit: 2}
  - {name: ip, algorithm: fixed_window, limit: 5, window: 1s}
groups:
  - {name: both, rules: [api, ip]}
)");
  auto one = plan_of(route(post_check(R"({"rule":"api","key":"vip","cost":50})"), cfg));
  ASSERT_EQ(one.items.size(), 1u);
  EXPECT_EQ(one.items[0].rule->policy.limit(), 100);
  EXPECT_EQ(one.check_items()[0].policy->limit(), 100);

  // The cost is bounded by the override's capacity, not the rule's.
  const auto too_much = route(post_check(R"({"rule":"api","key":"free:1","cost":3})"), cfg);
  ASSERT_TRUE(std::holds_alternative<http_response>(too_much));
  EXPECT_EQ(std::get<http_response>(too_much).status, 400);

  auto multi = plan_of(route(
      post_check(R"({"rules":[{"rule":"api","key":"free:x"},{"rule":"api","key":"y"}]})"), cfg));
  ASSERT_EQ(multi.items.size(), 2u);
  EXPECT_EQ(multi.items[0].rule->policy.limit(), 2);
  EXPECT_EQ(multi.items[1].rule->policy.limit(), 10);

  auto grouped = plan_of(route(post_check(R"({"group":"both","key":"vip"})"), cfg));
  ASSERT_EQ(grouped.items.size(), 2u);
  EXPECT_EQ(grouped.items[0].rule->policy.limit(), 100);
  EXPECT_EQ(grouped.items[1].rule->policy.limit(), 5);

  auto refund =
      plan_of(route({"POST", "/v1/refund", {}, R"({"rule":"api","key":"vip"})", "::1"}, cfg));
  EXPECT_EQ(refund.items.at(0).rule->policy.limit(), 100)
      << "a refund gives back where the check took";

  auto auth = plan_of(route({"GET", "/v1/auth/api", {{"X-Key", "free:7"}}, "", "::1"}, cfg));
  EXPECT_EQ(auth.items.at(0).rule->policy.limit(), 2);

  // A run-time entry decides before the static one, and the plan keeps it alive.
  runtime_overrides live;
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  ASSERT_EQ(live.set(*cfg, raise("api", "vip", 1000, now + 3'600'000), now), std::nullopt);
  auto raised =
      plan_of(route(post_check(R"({"rule":"api","key":"vip"})"), cfg, {}, live.current()));
  live.remove("api", match_kind::exact, "vip");
  EXPECT_EQ(raised.items.at(0).rule->policy.limit(), 1000);
  EXPECT_EQ(plan_of(route(post_check(R"({"rule":"api","key":"vip"})"), cfg, {}, live.current()))
                .items.at(0)
                .rule->policy.limit(),
            100);
}

// What floodgated does with the list read from Redis: one call, one snapshot.
TEST(runtime_overrides, replace_keeps_what_set_would_take_and_names_the_rest) {
  const auto cfg = rules_with_static();
  runtime_overrides live(2);
  ASSERT_EQ(live.set(*cfg, raise("api", "old", 5, 100), 0), std::nullopt);
  const auto refused = live.replace(
      *cfg,
      {raise("api", "k", 5, 100), raise("nope", "k", 5, 100), raise("api", "k", 7, 200),
       raise("api", "late", 5, 100), raise("api", "third", 5, 100)},
      50);
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_EQ(refused[0], "no rule named 'nope'");
  EXPECT_EQ(refused[1], "override of rule 'api' key 'third': the run-time override table is full");
  const auto l = live.list(50);
  ASSERT_EQ(l.size(), 2u) << "'old' is gone: not in the list";
  EXPECT_EQ(l[0].spec.match, "k");
  EXPECT_EQ(l[0].spec.fields.limit, 7) << "the last of two equal entries wins";
  EXPECT_EQ(l[1].spec.match, "late");
  EXPECT_NE(live.current()->resolve(*cfg->find("api"), "late", 50), nullptr);
  EXPECT_EQ(live.current()->resolve(*cfg->find("api"), "old", 50), nullptr);
  EXPECT_TRUE(live.replace(*cfg, {}, 50).empty());
  EXPECT_TRUE(live.list(50).empty());
}

}  // namespace
}  // namespace floodgate::service
