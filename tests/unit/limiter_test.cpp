// The facade: validation before the backend, failure modes after it.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "floodgate/floodgate.hpp"

namespace floodgate {
namespace {

using namespace std::chrono_literals;

// A backend that fails every call, from another thread, like a Redis that is down.
class failing_backend final : public backend {
 public:
  explicit failing_backend(errc e) : error_(e) {}
  void async_check(std::span<const check_item>, backend_handler h) override {
    ++calls;
    std::thread([h = std::move(h), e = error_] { h({make_error_code(e), {}}); }).detach();
  }
  void async_reset(std::string_view, const policy&, reset_handler h) override { h(error_); }
  bool healthy() const noexcept override { return false; }
  std::string_view kind() const noexcept override { return "failing"; }
  std::atomic<int> calls{0};

 private:
  errc error_;
};

// A backend that throws from async_check: before completing (out of memory building the
// call), or after completing inline.
class throwing_backend final : public backend {
 public:
  explicit throwing_backend(bool complete_first) : complete_first_(complete_first) {}
  void async_check(std::span<const check_item> items, backend_handler h) override {
    if (complete_first_) h({{}, std::vector<decision>(items.size())});
    throw std::bad_alloc();
  }
  void async_reset(std::string_view, const policy&, reset_handler h) override { h({}); }
  bool healthy() const noexcept override { return true; }
  std::string_view kind() const noexcept override { return "throwing"; }

 private:
  bool complete_first_;
};

const policy open_policy{"open", algorithm::gcra, 10, 1s, std::nullopt, failure_mode::open};
const policy closed_policy{"closed", algorithm::sliding_log, 10, 1s};

TEST(limiter, invalid_requests_never_reach_the_backend) {
  auto b = std::make_shared<failing_backend>(errc::timeout);
  limiter_options options;
  options.max_key_size = 16;
  limiter l(b, options);
  struct bad {
    std::string key;
    std::int64_t cost;
    errc expected;
  };
  for (const auto& c : {bad{"", 1, errc::empty_key}, bad{std::string(17, 'k'), 1, errc::key_too_long},
                        bad{"k", -1, errc::invalid_cost}, bad{"k", 11, errc::cost_exceeds_limit}}) {
    const auto r = l.check(c.key, closed_policy, c.cost);
    EXPECT_EQ(r.outcome, outcome::invalid_request) << c.key.size() << " " << c.cost;
    EXPECT_EQ(r.error, c.expected);
    EXPECT_FALSE(r.decision.allowed);
    EXPECT_FALSE(r.error.message().empty());
  }
  EXPECT_EQ(l.check(std::string(16, 'k'), closed_policy).outcome, outcome::backend_error)
      << "a key of exactly max_key_size is valid";
  EXPECT_EQ(b->calls, 1);
}

TEST(limiter, backend_failure_follows_each_policys_failure_mode) {
  auto b = std::make_shared<failing_backend>(errc::timeout);
  limiter l(b);
  const auto open = l.check("k", open_policy);
  EXPECT_EQ(open.outcome, outcome::backend_error);
  EXPECT_EQ(open.error, errc::timeout);
  EXPECT_TRUE(open.decision.allowed);
  EXPECT_TRUE(open.degraded());

  const auto closed = l.check("k", closed_policy);
  EXPECT_EQ(closed.outcome, outcome::backend_error);
  EXPECT_FALSE(closed.decision.allowed);
  EXPECT_FALSE(closed.degraded());
  EXPECT_TRUE(is_backend_error(closed.error));

  const auto both = l.check_all({{"k", &open_policy, 1}, {"k", &closed_policy, 1}});
  EXPECT_EQ(both.outcome, outcome::backend_error);
  EXPECT_FALSE(both.allowed()) << "one policy fails closed: the whole check is denied";
  EXPECT_EQ(l.reset("k", open_policy), errc::timeout);
}

TEST(limiter, check_all_validates_its_items) {
  auto l = limiter("memory://");
  const policy other{"other", algorithm::sliding_log, 10, 1s};
  EXPECT_EQ(l.check_all(std::span<const check_item>{}).error, errc::no_items);
  EXPECT_EQ(l.check_all({{"k", &closed_policy, 1}, {"k", &closed_policy, 1}}).error,
            errc::duplicate_item);
  EXPECT_EQ(l.check_all({{"k", &closed_policy, 1}, {"", &other, 1}}).error, errc::empty_key);
  std::vector<policy> many;
  std::vector<check_item> items;
  for (int i = 0; i < 17; ++i) many.emplace_back("p" + std::to_string(i), algorithm::gcra, 5, 1s);
  for (const auto& p : many) items.push_back({"k", &p, 1});
  EXPECT_EQ(l.check_all(items).error, errc::too_many_items);
  items.pop_back();
  EXPECT_EQ(l.check_all(items).outcome, outcome::allowed);
}

TEST(limiter, async_check_delivers_the_same_result) {
  auto l = limiter("memory://");
  const policy p{"async", algorithm::fixed_window, 2, 10s};
  std::promise<check_result> done;
  l.async_check("k", p, 2, [&](check_result r) { done.set_value(r); });
  const auto r = done.get_future().get();
  EXPECT_EQ(r.outcome, outcome::allowed);
  EXPECT_EQ(r.decision.remaining, 0);
  EXPECT_EQ(l.check("k", p).outcome, outcome::over_limit);
}

TEST(limiter, bad_backend_urls_are_rejected_at_construction) {
  EXPECT_THROW(limiter("mongodb://localhost"), config_error);
  EXPECT_THROW(limiter(""), config_error);
  EXPECT_THROW(limiter(std::shared_ptr<backend>{}), config_error);
}

// A backend exception never escapes: the handler is called exactly once, with an error
// outcome and the policy's failure mode (before: std::bad_alloc reached the caller, and
// floodgated dropped the request without an answer).
TEST(limiter, a_backend_exception_is_a_backend_error_answered_once) {
  for (bool complete_first : {false, true}) {
    limiter l(std::make_shared<throwing_backend>(complete_first));
    int calls = 0;
    check_result got;
    EXPECT_NO_THROW(l.async_check("k", closed_policy, 1, [&](check_result r) {
      ++calls;
      got = r;
    }));
    EXPECT_EQ(calls, 1) << "completed first: " << complete_first;
    if (!complete_first) {
      EXPECT_EQ(got.outcome, outcome::backend_error);
      EXPECT_EQ(got.error, errc::internal_error);
      EXPECT_FALSE(got.decision.allowed);
      EXPECT_EQ(l.check("k", open_policy).outcome, outcome::backend_error);
      EXPECT_TRUE(l.check("k", open_policy).decision.allowed) << "fails open";
    }
    int multi_calls = 0;
    const check_item items[] = {{"k", &closed_policy, 1}, {"k", &open_policy, 1}};
    EXPECT_NO_THROW(l.async_check_all(items, [&](multi_check_result) { ++multi_calls; }));
    EXPECT_EQ(multi_calls, 1) << "completed first: " << complete_first;
  }
}

}  // namespace
}  // namespace floodgate
