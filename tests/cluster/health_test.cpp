// Health and errors read the same on every topology: one suite, run against a single
// redis-server, a Redis Cluster (3 masters + 3 replicas) and a Sentinel set-up (a primary, a
// replica, three sentinels). Each case asserts what a caller and an operator see: the
// decision's outcome and its rule's failure mode, backend::last_error() in the server's own
// words (or naming the node), healthy() (what /readyz says), the stats, and for a wrong
// password, a NOPERM user and a stalled node what floodgated tells its operator, by one check
// (expect_reported): /readyz 503, floodgate_backend_ready 0 and a "backend failing" log line.
//
// Before the shared node pool (src/redis/node.hpp) and breaker (src/redis/breaker.hpp), the
// Cluster client had no last_error() and ignored NOPERM for readiness, and neither a single
// server nor Sentinel had a circuit breaker.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "floodgate/floodgate.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "redis/cluster_protocol.hpp"
#include "redis_cluster.hpp"
#include "redis_sentinel.hpp"
#include "redis_server.hpp"
#include "wait_for.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

enum class topology { single, cluster, sentinel };

std::string name_of(topology t) {
  switch (t) {
    case topology::single:
      return "single";
    case topology::cluster:
      return "cluster";
    case topology::sentinel:
      return "sentinel";
  }
  return "?";
}

void PrintTo(topology t, std::ostream* os) {
  *os << name_of(t);
}

// The Redis behind one topology, started once per test process (ctest runs each test in its
// own).
class deployment {
 public:
  virtual ~deployment() = default;
  // The backend URL, `userinfo` ("user:password@" or empty) for the data nodes.
  virtual std::string url(const std::string& userinfo) const = 0;
  // Every node that serves calls or may be asked the topology (ACLs are per node, also on a
  // Cluster).
  virtual std::vector<redis_server*> data_nodes() = 0;
  // The node that serves `key` now (the master of its slot, the primary).
  virtual redis_server& node_for(const std::string& key) = 0;

  void on_every_node(const std::vector<std::string>& command) {
    for (auto* n : data_nodes()) {
      const auto r = n->command(command);
      if (r.kind == reply::error) throw std::runtime_error(r.str);
    }
  }
};

class single_deployment final : public deployment {
 public:
  std::string url(const std::string& userinfo) const override {
    return "redis://" + userinfo + "127.0.0.1:" + std::to_string(redis_.port());
  }
  std::vector<redis_server*> data_nodes() override { return {&redis_}; }
  redis_server& node_for(const std::string&) override { return redis_; }

 private:
  redis_server redis_;
};

class cluster_deployment final : public deployment {
 public:
  std::string url(const std::string& userinfo) const override {
    const auto plain = cluster_.url();
    const std::string scheme = "redis+cluster://";
    return scheme + userinfo + plain.substr(scheme.size());
  }
  std::vector<redis_server*> data_nodes() override {
    std::vector<redis_server*> out;
    for (int i = 0; i < redis_cluster::node_count; ++i) out.push_back(&cluster_.node(i));
    return out;
  }
  redis_server& node_for(const std::string& key) override {
    return cluster_.node(cluster_.master_of(redis::key_slot(key)));
  }

 private:
  redis_cluster cluster_;
};

class sentinel_deployment final : public deployment {
 public:
  std::string url(const std::string& userinfo) const override {
    const auto plain = sentinel_.url();
    const std::string scheme = "redis+sentinel://";
    // The URL's credentials are the primary's.
    return scheme + userinfo + plain.substr(scheme.size());
  }
  std::vector<redis_server*> data_nodes() override {
    return {&sentinel_.node(0), &sentinel_.node(1)};
  }
  redis_server& node_for(const std::string&) override {
    const int port = sentinel_.primary_port();
    return sentinel_.node(sentinel_.node(0).port() == port ? 0 : 1);
  }

 private:
  redis_sentinel sentinel_;
};

std::string unique_user(const std::string& stem) {
  static int n = 0;
  return stem + std::to_string(::getpid()) + "_" + std::to_string(n++);
}

class health : public ::testing::TestWithParam<topology> {
 protected:
  void SetUp() override {
    switch (GetParam()) {
      case topology::single:
        redis_ = std::make_unique<single_deployment>();
        break;
      case topology::cluster:
        redis_ = std::make_unique<cluster_deployment>();
        break;
      case topology::sentinel:
        redis_ = std::make_unique<sentinel_deployment>();
        break;
    }
  }

  // Generous deadlines unless a case is about them: the first call waits for connect, AUTH and
  // SCRIPT LOAD on a loaded 2-core machine.
  backend_options options(std::chrono::milliseconds timeout = 1s) const {
    backend_options o;
    o.redis.key_prefix = "fgh:" + std::to_string(::getpid()) + ":";
    o.redis.timeout = timeout;
    return o;
  }

  // A user allowed everything, then `extra` (e.g. "-evalsha"), on every node.
  std::string make_user(const std::string& stem, const std::vector<std::string>& extra = {}) {
    const auto user = unique_user(stem);
    std::vector<std::string> acl = {"ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all"};
    acl.insert(acl.end(), extra.begin(), extra.end());
    redis_->on_every_node(acl);
    return user;
  }

  std::unique_ptr<deployment> redis_;
};

// Waits until last_error() contains `text`; returns what it said last.
std::string wait_error(const backend& b, std::string_view text, std::chrono::milliseconds limit) {
  std::string said;
  wait_for([&] { return (said = b.last_error()).find(text) != std::string::npos; }, limit);
  return said;
}

// What a rule sees while the backend fails: a closed rule denies, an open one admits as
// degraded; both are backend errors with `code`.
void expect_failure_modes(limiter& l, const std::string& key, std::error_code code) {
  const policy closed{"closed", algorithm::gcra, 100, 1s};
  const policy open{"open", algorithm::gcra, 100, 1s, std::nullopt, failure_mode::open};
  const auto c = l.check(key, closed);
  EXPECT_EQ(c.outcome, outcome::backend_error);
  EXPECT_EQ(c.error, code) << c.error.message();
  EXPECT_FALSE(c.decision.allowed);
  const auto o = l.check(key, open);
  EXPECT_EQ(o.outcome, outcome::backend_error);
  EXPECT_EQ(o.error, code) << o.error.message();
  EXPECT_TRUE(o.decision.allowed);
  EXPECT_TRUE(o.degraded());
}

const policy p{"p", algorithm::gcra, 1000, 1s};

// One rule for floodgated, with room for every call a case makes: a denial would be repeated
// in process (local denials) and never reach the node.
const std::string rules = "rules:\n  - {name: api, algorithm: gcra, limit: 100000, window: 1s}\n";
const std::string check_body = R"({"rule":"api","key":"k"})";

// floodgated on `url` (`query`: redis_options for it, e.g. "timeout=50ms").
floodgated_process::options on_redis(std::string url, const std::string& query = "") {
  if (!query.empty()) url += (url.find('?') == std::string::npos ? "?" : "&") + query;
  floodgated_process::options o;
  o.extra_args = {"--redis", url};
  return o;
}

// Whether a "backend failing" line of the log holds `text`.
bool failing_line_says(const std::string& log, const std::string& text) {
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    if (line.find("msg=\"backend failing\"") != std::string::npos &&
        line.find(text) != std::string::npos)
      return true;
  return false;
}

// What floodgated tells its operator while its backend fails, the same for every fault on every
// topology: /readyz 503, floodgate_backend_ready 0 on /metrics, and a "backend failing" log line
// holding `text` (the server's words, or the node's address). `poke` runs before each look (a
// call: some faults show only to calls); looks are paced, 20 ms apart. Each must be seen within
// `limit` (the log is written at most a second after the backend's error changes).
void expect_reported(
    floodgated_process& fg, const std::string& text, std::chrono::milliseconds limit,
    const std::function<void()>& poke = [] {}) {
  bool unready = false, metric = false, logged = false;
  wait_for(
      [&] {
        poke();
        unready = unready || http_request_once(fg.port(), "GET", "/readyz").status == 503;
        metric = metric || http_request_once(fg.port(), "GET", "/metrics")
                                   .body.find("\nfloodgate_backend_ready 0\n") != std::string::npos;
        logged = logged || failing_line_says(fg.log(), text);
        std::this_thread::sleep_for(20ms);
        return unready && metric && logged;
      },
      limit);
  EXPECT_TRUE(unready) << "/readyz stayed 200";
  EXPECT_TRUE(metric) << "floodgate_backend_ready stayed 1";
  EXPECT_TRUE(logged) << "no \"backend failing\" line with '" << text << "': " << fg.log();
}

// Every node refuses the password at the handshake: calls fail at once with not_connected,
// last_error() quotes WRONGPASS, not ready.
TEST_P(health, a_wrong_password_is_told_in_the_servers_words) {
  const auto user = make_user("wp");
  limiter l{redis_->url(user + ":wrong@"), options()};
  EXPECT_NE(wait_error(l.get_backend(), "WRONGPASS", 10s).find("WRONGPASS"), std::string::npos)
      << name_of(GetParam()) << " said: " << l.get_backend().last_error();
  EXPECT_FALSE(l.get_backend().healthy());
  expect_failure_modes(l, "k", errc::not_connected);

  floodgated_process fg(rules, on_redis(redis_->url(user + ":wrong@")));
  expect_reported(fg, "WRONGPASS", 10s);
  EXPECT_EQ(http_request_once(fg.port(), "POST", "/v1/check", check_body).status, 503);
}

// A user that may connect but not run the scripts (neither FCALL nor EVALSHA: each FCALL
// refused goes again as EVALSHA): every call fails with NOPERM, which will not heal by itself, so
// the backend is not ready (floodgated: /readyz 503 and a log line in the server's words) until the
// ACL is fixed.
TEST_P(health, a_noperm_user_is_not_ready_until_the_acl_is_fixed) {
  const auto user = make_user("np", {"-evalsha", "-fcall"});
  limiter l{redis_->url(user + ":pw@"), options()};
  ASSERT_TRUE(wait_for([&] { return l.get_backend().healthy(); }, 10s)) << "it connects";
  expect_failure_modes(l, "k", errc::server_error);
  EXPECT_FALSE(l.get_backend().healthy()) << name_of(GetParam());
  EXPECT_NE(l.get_backend().last_error().find("NOPERM"), std::string::npos)
      << name_of(GetParam()) << " said: " << l.get_backend().last_error();

  floodgated_process fg(rules, on_redis(redis_->url(user + ":pw@")));
  const auto ready = [&] { return http_request_once(fg.port(), "GET", "/readyz").status == 200; };
  ASSERT_TRUE(wait_for(ready, 10s)) << "it connects: " << fg.log();
  EXPECT_EQ(http_request_once(fg.port(), "POST", "/v1/check", check_body).status, 503);
  expect_reported(fg, "NOPERM", 5s);

  redis_->on_every_node({"ACL", "SETUSER", user, "+evalsha"});
  EXPECT_EQ(l.check("k", p).outcome, outcome::allowed) << l.get_backend().last_error();
  EXPECT_TRUE(l.get_backend().healthy());
  EXPECT_EQ(l.get_backend().last_error(), "");
  EXPECT_EQ(http_request_once(fg.port(), "POST", "/v1/check", check_body).status, 200);
  EXPECT_TRUE(wait_for(ready, 5s));
  EXPECT_TRUE(fg.wait_for_log("backend answering again", 5s)) << fg.log();
}

// The node serving the key stops answering writes (CLIENT PAUSE WRITE: its connections stay,
// and neither the cluster bus nor the sentinels see it down, so nothing fails over). After
// breaker_failures calls in a row time out, its breaker opens: calls fail at once with
// not_connected instead of each waiting out its deadline, the backend is not ready, and
// last_error() names the node. When it answers again, so do the calls.
TEST_P(health, a_stalled_node_opens_its_breaker) {
  auto o = options(50ms);
  o.redis.connect_timeout = 5s;  // the stall is not taken for a broken connection
  limiter l{redis_->url(""), o};
  const std::string key = "stall";
  ASSERT_TRUE(wait_for([&] { return l.check(key, p).outcome == outcome::allowed; }, 10s));
  redis_server& node = redis_->node_for(key);
  const auto port = std::to_string(node.port());
  const auto before = l.get_backend().stats().breaker_opens;

  ASSERT_EQ(node.command({"CLIENT", "PAUSE", "2000", "WRITE"}).str, "OK");
  const auto start = clock_type::now();
  int timeouts = 0, refused = 0, other = 0;
  bool seen_unready = false;
  std::string said;
  while (clock_type::now() - start < 1500ms) {
    const auto r = l.check(key, p);
    if (r.error == errc::timeout)
      ++timeouts;
    else if (r.error == errc::not_connected)
      ++refused;
    else
      ++other;
    if (!l.get_backend().healthy()) seen_unready = true;
    if (said.empty()) said = l.get_backend().last_error();
    std::this_thread::sleep_for(5ms);  // paced: a refused call returns at once
  }
  node.command({"CLIENT", "UNPAUSE"});
  const auto stats = l.get_backend().stats();
  std::cout << name_of(GetParam()) << ": " << timeouts << " timeouts, " << refused
            << " refused at once, " << other << " other in 1.5 s; last_error: " << said << "\n";
  EXPECT_EQ(other, 0);
  EXPECT_GE(refused, 1) << "the breaker never opened";
  // 1.5 s of 50 ms deadlines is 30 timeouts without a breaker; with it, 5 then a probe every
  // 500 ms (each probe failing, 2-3 of them).
  EXPECT_LE(timeouts, 15);
  EXPECT_GE(stats.breaker_opens, before + 1);
  EXPECT_TRUE(seen_unready);
  EXPECT_NE(said.find(port), std::string::npos) << said;
  EXPECT_NE(said.find("breaker"), std::string::npos) << said;

  // Answering again: decisions within a breaker period and a probe, and ready.
  EXPECT_TRUE(wait_for([&] { return l.check(key, p).outcome == outcome::allowed; }, 5s));
  EXPECT_TRUE(wait_for([&] { return l.get_backend().healthy(); }, 5s));
  EXPECT_EQ(l.get_backend().stats().breakers_open, 0u);
  EXPECT_EQ(l.get_backend().last_error(), "");

  // floodgated, the same stall (cut short once reported): its checks open the breaker.
  floodgated_process fg(rules, on_redis(redis_->url(""), "timeout=50ms&connect_timeout=5s"));
  const auto ready = [&] { return http_request_once(fg.port(), "GET", "/readyz").status == 200; };
  ASSERT_TRUE(wait_for(ready, 10s)) << fg.log();
  const auto check = [&] { http_request_once(fg.port(), "POST", "/v1/check", check_body); };
  redis_server& node_k = redis_->node_for("k");
  ASSERT_EQ(node_k.command({"CLIENT", "PAUSE", "5000", "WRITE"}).str, "OK");
  expect_reported(fg, std::to_string(node_k.port()), 4500ms, check);
  node_k.command({"CLIENT", "UNPAUSE"});
  EXPECT_TRUE(wait_for(
      [&] {
        check();
        return ready();
      },
      5s));
  EXPECT_TRUE(fg.wait_for_log("backend answering again", 5s)) << fg.log();
}

// The node serving the key restarts (and comes back empty: no scripts, no keys). Calls fail
// meanwhile with their failure mode, then are decided again, and the backend is ready with
// nothing left to tell.
TEST_P(health, a_restarted_node_is_served_again) {
  limiter l{redis_->url(""), options()};
  const std::string key = "restart";
  ASSERT_TRUE(wait_for([&] { return l.check(key, p).outcome == outcome::allowed; }, 10s));
  redis_server& node = redis_->node_for(key);
  node.kill();
  const policy closed{"closed", algorithm::gcra, 100, 1s};
  const auto r = l.check(key, closed);
  EXPECT_EQ(r.outcome, outcome::backend_error);
  EXPECT_FALSE(r.decision.allowed);
  node.restart();
  EXPECT_TRUE(wait_for([&] { return l.check(key, p).outcome == outcome::allowed; }, 10s))
      << l.get_backend().last_error();
  EXPECT_TRUE(wait_for([&] { return l.get_backend().healthy(); }, 5s))
      << l.get_backend().last_error();
  EXPECT_TRUE(wait_for([&] { return l.get_backend().last_error().empty(); }, 5s))
      << l.get_backend().last_error();
}

// FUNCTION FLUSH and SCRIPT FLUSH on the node: the next call meets a missing function (then
// NOSCRIPT), the library and the script are loaded again and the call answered, invisibly but
// for the script_reloads counter.
TEST_P(health, a_flushed_script_cache_is_reloaded_and_counted) {
  limiter l{redis_->url(""), options()};
  const std::string key = "flush";
  ASSERT_TRUE(wait_for([&] { return l.check(key, p).outcome == outcome::allowed; }, 10s));
  // Healthy first: a Cluster's first answer can come before every master's connection is
  // ready (it was not yet, 1 run in 6 on a loaded machine), and the flush must not change it.
  ASSERT_TRUE(wait_for([&] { return l.get_backend().healthy(); }, 10s))
      << l.get_backend().last_error();
  const auto before = l.get_backend().stats().script_reloads;
  ASSERT_EQ(redis_->node_for(key).command({"FUNCTION", "FLUSH"}).str, "OK");
  ASSERT_EQ(redis_->node_for(key).command({"SCRIPT", "FLUSH"}).str, "OK");
  const auto r = l.check(key, p);
  EXPECT_EQ(r.outcome, outcome::allowed) << r.error.message();
  EXPECT_GE(l.get_backend().stats().script_reloads, before + 1);
  EXPECT_TRUE(l.get_backend().healthy());
  EXPECT_EQ(l.get_backend().last_error(), "");
}

INSTANTIATE_TEST_SUITE_P(topologies, health,
                         ::testing::Values(topology::single, topology::cluster, topology::sentinel),
                         [](const auto& param_info) { return name_of(param_info.param); });

}  // namespace
}  // namespace floodgate::test
