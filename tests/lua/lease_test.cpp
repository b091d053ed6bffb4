// Concurrency limits (lua/acquire.lua, lua/release.lua) against src/core/lease_set.cpp:
// random acquires, releases (of live, released, expired and foreign leases) and renewals on
// the same injected clock must get the same answers (docs/algorithms.md, "Concurrency
// limits"), and the lease set never holds more than the limit.
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "core/lease_set.hpp"
#include "redis/scripts.hpp"
#include "script_client.hpp"

namespace floodgate::test {
namespace {

constexpr std::int64_t start_ms = 1'800'000'000'000;
// Redis expires the set in real time while the injected clock runs far faster: a set whose
// newest lease ends sooner than this may vanish mid-sequence, so the clock is moved past it.
constexpr std::int64_t short_expiry_ms = 5'000;

std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

std::string str(std::int64_t v) {
  return std::to_string(v);
}

TEST(lease, lua_matches_cpp) {
  redis_server server;
  script_client redis{server.port()};
  for (const auto* s : {&redis::acquire_script(), &redis::release_script()})
    ASSERT_EQ(redis.run({"SCRIPT", "LOAD", std::string(s->source)}).str, s->sha1);
  long granted = 0, refused = 0, released = 0, not_live = 0, renewed = 0;
  for (std::uint64_t seq = 0; seq < 100; ++seq) {
    std::mt19937_64 rng(seq ^ 0x1ea5e);
    const std::int64_t limit = uniform(rng, 1, 5), ttl = uniform(rng, 10'000, 120'000);
    const std::string key = "l" + str(static_cast<std::int64_t>(seq));
    core::lease_set model;
    std::vector<std::string> ids;  // every id ever acquired (live or not)
    std::int64_t now = start_ms + uniform(rng, 0, 1'000'000);
    struct expected {
      std::string what;
      std::optional<ints5> decision;  // acquire
      long long done = 0;             // release / renew
    };
    std::vector<expected> all;
    for (int step = 0; step < 200; ++step) {
      now += uniform(rng, 0, 3) == 0 ? 0 : uniform(rng, 1, ttl / 4);
      const std::int64_t x = core::expiry(model, now);
      if (x > 0 && x < short_expiry_ms) now += x;
      std::ostringstream what;
      what << "seq " << seq << " step " << step << " now " << now << " limit " << limit << " lease "
           << ttl;
      const std::int64_t op = uniform(rng, 0, 9);
      if (op < 5 || ids.empty()) {
        const std::string id = "id" + str(static_cast<std::int64_t>(ids.size()));
        const decision d = core::acquire(model, now, limit, ttl, id);
        ids.push_back(id);
        if (static_cast<std::int64_t>(model.leases.size()) > limit)
          FAIL() << what.str() << ": " << model.leases.size() << " leases held";
        (d.allowed ? granted : refused)++;
        all.push_back({what.str() + " acquire " + id, as_ints(d)});
        redis.append({"EVALSHA", std::string(redis::acquire_script().sha1), "1", key, str(limit),
                      str(ttl), id, str(now)});
      } else {
        // A known id (live, released or expired) or a foreign one.
        const std::string id = uniform(rng, 0, 4) == 0
                                   ? "foreign" + str(step)
                                   : ids[static_cast<std::size_t>(uniform(
                                         rng, 0, static_cast<std::int64_t>(ids.size()) - 1))];
        const std::int64_t t = op < 8 ? 0 : ttl;
        const bool done = core::release_or_renew(model, now, id, t);
        (done ? (t == 0 ? released : renewed) : not_live)++;
        all.push_back(
            {what.str() + (t == 0 ? " release " : " renew ") + id, std::nullopt, done ? 1 : 0});
        redis.append(
            {"EVALSHA", std::string(redis::release_script().sha1), "1", key, id, str(t), str(now)});
      }
    }
    for (const auto& e : all) {
      const reply r = redis.read();
      ASSERT_NE(r.kind, reply::error) << e.what << ": " << r.str;
      if (e.decision) {
        const auto got = ints_of(r);
        ASSERT_TRUE(got && *got == *e.decision)
            << e.what << "\n  lua " << (got ? to_string(*got) : "?") << " vs C++ "
            << to_string(*e.decision);
      } else {
        ASSERT_EQ(r.integer, e.done) << e.what;
      }
    }
  }
  std::cout << "[ stats    ] leases: " << granted << " granted, " << refused << " refused, "
            << released << " released, " << renewed << " renewed, " << not_live
            << " releases/renewals of leases not live\n";
  EXPECT_GT(granted, 0);
  EXPECT_GT(refused, 0);
  EXPECT_GT(released, 0);
  EXPECT_GT(renewed, 0);
  EXPECT_GT(not_live, 0);
}

TEST(lease, bad_arguments_are_refused_and_write_nothing) {
  redis_server server;
  script_client redis{server.port()};
  const auto acq = std::string(redis::acquire_script().sha1);
  const auto rel = std::string(redis::release_script().sha1);
  for (const auto* s : {&redis::acquire_script(), &redis::release_script()})
    redis.run({"SCRIPT", "LOAD", std::string(s->source)});
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"0", "1000", "id", ""},
                                             {"5", "0", "id", ""},
                                             {"5", "1e3", "id", ""},
                                             {"5", "1000", "", ""},
                                             {"5", "1000", std::string(65, 'x'), ""},
                                             {"-1", "1000", "id", ""}}) {
    std::vector<std::string> cmd = {"EVALSHA", acq, "1", "k"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    EXPECT_EQ(redis.run(cmd).kind, reply::error) << args[0] << " " << args[1];
  }
  EXPECT_EQ(redis.run({"EVALSHA", rel, "1", "k", "", "0", ""}).kind, reply::error);
  EXPECT_EQ(redis.run({"EVALSHA", rel, "1", "k", "id", "-5", ""}).kind, reply::error);
  EXPECT_EQ(redis.run({"EXISTS", "k"}).integer, 0);
}

}  // namespace
}  // namespace floodgate::test
