// The Envoy API on a real Redis Cluster: a request's descriptors have different counter keys,
// which live in different slots, and one script cannot decide them. They are decided one key
// at a time: each holds its own limit exactly, but all-or-nothing across them does not hold
// (docs/envoy.md, "Redis Cluster").
#include <gtest/gtest.h>

#include <future>

#include "envoy_config.hpp"
#include "floodgate/limiter.hpp"
#include "redis_cluster.hpp"
#include "rls_service.hpp"

namespace floodgate::service::envoy {
namespace {

using namespace std::chrono_literals;

TEST(rls_cluster, descriptors_on_different_keys_are_decided_apart) {
  test::redis_cluster cluster;
  backend_options bo;
  bo.redis.timeout = 2s;
  auto limiter = std::make_shared<floodgate::limiter>(cluster.url(), bo);
  ASSERT_TRUE(limiter->get_backend().check_all_needs_one_key());
  std::map<std::string, domain_config, std::less<>> domains;
  parse_envoy_domain(R"(
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: path
    rate_limit: {unit: hour, requests_per_unit: 100}
)",
                     "edge.yaml", domains);
  envoy_config_store store(std::make_shared<const envoy_config>(std::move(domains)));
  rls_service service(limiter, store, {});
  auto call = [&](std::vector<std::pair<std::string, std::string>> entries) {
    request req;
    req.domain = "edge";
    for (auto& [k, v] : entries) req.descriptors.push_back(descriptor{{{k, v}}, {}, {}});
    std::promise<rls_result> p;
    auto f = p.get_future();
    service.async_should_rate_limit(req, rls_service::clock::now() + 5s,
                                    [&p](rls_result r) { p.set_value(std::move(r)); });
    auto r = f.get();
    EXPECT_EQ(r.outcome, rls_result::kind::ok) << r.message;
    return r.response;
  };
  const std::string ip = "ip-" + std::to_string(::getpid());
  EXPECT_EQ(call({{"remote_address", ip}}).overall, code::ok);
  const auto refused = call({{"remote_address", ip}, {"path", "/p"}});
  EXPECT_EQ(refused.overall, code::over_limit);
  EXPECT_EQ(refused.statuses[0].status, code::over_limit);
  EXPECT_EQ(refused.statuses[1].status, code::ok);
  // The path's counter was charged although the request was refused: no all-or-nothing
  // across keys on a cluster. Its own limit still holds exactly.
  EXPECT_EQ(refused.statuses[1].limit_remaining, 99u);
  EXPECT_EQ(call({{"path", "/p"}}).statuses[0].limit_remaining, 98u);
  // The same descriptor twice shares one key: decided together, hits added.
  const auto twice = call({{"path", "/q"}, {"path", "/q"}});
  EXPECT_EQ(twice.statuses[0].limit_remaining, 98u);
}

}  // namespace
}  // namespace floodgate::service::envoy
