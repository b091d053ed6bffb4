#include "redis/sentinel_client.hpp"

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

#include "floodgate/errors.hpp"
#include "redis/backoff.hpp"
#include "redis/node_pool.hpp"
#include "redis/resp_writer.hpp"
#include "redis/sentinel_answer.hpp"
#include "redis/stream.hpp"
#include "redis/timer.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steady = request::clock;

namespace {

// A storm of READONLY replies costs one question per sentinel per resolve_min_interval; the
// recheck catches a +switch-master missed by a subscription that died silently (half-open).
constexpr auto resolve_min_interval = 100ms;
constexpr auto recheck_interval = 1s;

// The router the header describes, on the pool's io thread; callers' threads read the health
// (atomics, pool_health) and the start-up state (mutex_).
class sentinel_client final : public pool_client, public call_router {
 public:
  // The pool's TLS context (rediss+sentinel://) is the sentinels' too.
  sentinel_client(sentinel_config config, const redis_options& options, script_set scripts)
      : pool_client(config.primary.tls, options, std::move(scripts)),
        config_(std::move(config)),
        round_timer_(pool_.context()),
        recheck_timer_(pool_.context()) {
    // The epoch, then the address (sentinel_answer.hpp says why in this order).
    append_command(address_command_, {"SENTINEL", "get-master-addr-by-name", config_.master_name});
    append_command(ask_command_, {"SENTINEL", "MASTER", config_.master_name});
    ask_command_ += address_command_;
    append_command(subscribe_command_, {"SUBSCRIBE", "+switch-master", "+promoted-slave"});
    for (const auto& s : config_.sentinels)
      peers_.push_back(
          std::make_unique<peer>(*this, sentinel_stream_config(s, options, pool_.tls())));
  }

  // The start-up wait the header describes (settle() ends it).
  void run() {
    pool_client::run();
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, pool_.options().connect_timeout,
                 [&] { return have_primary_ || first_round_over_; });
  }

  // With no primary known, failed at once on the caller's thread (the sentinels asked again),
  // as a call the breaker refuses: not after a trip to the io thread, which may be busy.
  void submit(request_ptr r) override {
    if (!have_primary_.load(std::memory_order_acquire)) {
      if (!round_posted_.exchange(true, std::memory_order_acq_rel))
        asio::post(pool_.context(), [this] {
          round_posted_.store(false, std::memory_order_release);
          request_round();
        });
      return r->complete(errc::not_connected, nullptr);
    }
    pool_.submit(std::move(r));
  }

  std::string last_error() const override {
    {
      std::lock_guard lock(mutex_);
      if (!have_primary_.load(std::memory_order_acquire))
        return "no primary known: " + (sentinel_error_.empty()
                                           ? std::string("the sentinels have not answered yet")
                                           : sentinel_error_);
    }
    return pool_.health().last_error();
  }

  void start() override {
    for (auto& p : peers_) subscribe(*p);
    ask_all();
  }

  void stop() override {
    for (auto& p : peers_) {
      p->ask.close();
      p->sub.close();
      p->ask_timer.cancel();
      p->sub_timer.cancel();
    }
    round_timer_.cancel();
    recheck_timer_.cancel();
    healthy_.store(false, std::memory_order_relaxed);
  }

  void route(request_ptr r, bool fresh) override {
    if (fresh)
      r->route = {.by = this};
    else if (r->route.epoch != epoch_)
      pool_.health().redirections.fetch_add(1, std::memory_order_relaxed);  // to a newer primary
    if (primary_ == nullptr) {
      request_round();
      return r->complete(errc::not_connected, nullptr);
    }
    r->route.epoch = epoch_;  // the primary it goes to
    if (!pool_.send(std::move(r), *primary_)) request_round();
  }

  void readiness_changed(node&, bool) override { update_health(); }
  void breaker_changed(node&, breaker::change) override { update_health(); }

  void call_done(request_ptr c, std::error_code ec, reply* r) noexcept override {
    // NOREPLICAS (min-replicas-to-write) is not held: it also means a replica is down, and
    // then every call would wait its whole deadline (docs/operations.md measures both).
    const bool readonly = r != nullptr && r->is_error() &&
                          (r->error_code() == "READONLY" ||
                           r->str.find("READONLY You can't write") != std::string::npos);
    // The primary it was sent to is a replica now, whatever a sentinel says (sentinel_answer.hpp).
    if (readonly) refused_epoch_ = c->route.epoch;
    if (readonly || ec == errc::not_connected || ec == errc::timeout) request_round();
    if (readonly && !pool_.torn_down() && c->route.redirects == 0 && steady::now() < c->deadline) {
      // Held until the new primary is known or its deadline passes; sent there afresh (the
      // primary's node admits it again), on the next turn if it is known already.
      ++c->route.redirects;
      c->observer = nullptr;
      c->probe = false;
      const bool moved = c->route.epoch != epoch_;
      return pool_.hold(std::move(c), moved ? steady::now() : node_pool::until_taken);
    }
    c->complete(ec, r);
  }

 private:
  // One sentinel: a connection for questions and one subscribed to +switch-master.
  struct peer {
    peer(sentinel_client& owner, const stream_config& at)
        : ask(owner.pool_.context(), at,
              {[&owner, this](reply& r) { owner.on_answer(*this, r); },
               [&owner, this](const std::string& why) { owner.on_ask_closed(*this, why); }}),
          sub(owner.pool_.context(), at,
              {[&owner, this](reply& r) { owner.on_message(*this, r); },
               [&owner, this](const std::string& why) { owner.on_sub_closed(*this, why); }}),
          ask_timer(owner.pool_.context()),
          sub_timer(owner.pool_.context()),
          resubscribe(owner.pool_.options().reconnect_backoff_min,
                      owner.pool_.options().reconnect_backoff_max) {}

    stream_link ask, sub;
    timer ask_timer, sub_timer;
    bool asking = false;        // a question in flight on `ask`
    bool address_only = false;  // refused SENTINEL MASTER (ACL): asked get-master-addr-by-name
    bool epoch_read = false;    // this question's SENTINEL MASTER reply is in: the address next
    std::optional<std::uint64_t> epoch;  // what it said
    std::uint64_t ask_round = 0;         // the round it belongs to
    backoff resubscribe;                 // jittered as a connection's reconnects (backoff.hpp)
  };

  void note_error(const std::string& why) {
    std::lock_guard lock(mutex_);
    sentinel_error_ = why;
  }

  void update_health() {
    healthy_.store(!pool_.torn_down() && primary_ != nullptr && primary_->ready() > 0 &&
                       primary_->breaker_closed(),
                   std::memory_order_relaxed);
  }

  void request_round() {
    if (round_timer_.armed() || pool_.torn_down()) return;
    const auto at = last_round_at_ + resolve_min_interval;
    if (steady::now() >= at) return ask_all();
    round_timer_.at(at, [this] { ask_all(); });
  }

  // Every sentinel at once, on its persistent connection (opened if need be).
  void ask_all() {
    round_timer_.cancel();
    last_round_at_ = steady::now();
    ++round_;
    pool_.sweep();  // a retired primary that holds no calls now stops connecting
    for (auto& p : peers_) {
      if (p->asking) continue;  // still waiting for the last answer: its deadline will tell
      if (!p->ask.is_open()) p->ask.open();
      p->ask.send(p->address_only ? address_command_ : ask_command_);
      p->epoch_read = p->address_only;
      p->asking = true;
      p->ask_round = round_;
      p->ask_timer.after(pool_.options().connect_timeout, [this, q = p.get()] {
        q->ask.close();  // its late answer must not be taken for the next question's
        note_error(endpoint_label(q->ask.endpoint()) + ": no answer within connect_timeout");
        answered(*q);
        settle();
      });
    }
    recheck_timer_.after(recheck_interval, [this] { request_round(); });
  }

  void answered(peer& p) {
    p.asking = false;
    p.ask_timer.cancel();
  }

  // After each sentinel's answer or failure: at start-up, the newest answer once a majority
  // gave one or none is still asked (the header says why); the constructor is released once a
  // primary is known or no sentinel is still asked.
  void settle() {
    const bool all_in =
        std::none_of(peers_.begin(), peers_.end(), [](const auto& q) { return q->asking; });
    const bool majority = 2 * first_answers_.size() > peers_.size();
    if (primary_ == nullptr && !first_answers_.empty() && (majority || all_in)) {
      std::vector<sentinel_answer> answers;
      for (auto& [from, a] : first_answers_) answers.push_back(std::move(a));
      first_answers_.clear();
      const auto best = best_answer(answers);
      if (best && choice_.take(*best, false, false)) learned(best->primary);
    }
    if (first_round_over_ || !all_in) return;
    {
      std::lock_guard lock(mutex_);
      first_round_over_ = true;
    }
    cv_.notify_all();
  }

  void on_answer(peer& p, reply& r) {
    if (!p.asking) return;
    const auto where = endpoint_label(p.ask.endpoint());
    if (!p.epoch_read) {  // SENTINEL MASTER's reply; get-master-addr-by-name's follows
      p.epoch_read = true;
      p.epoch = read_config_epoch(r);
      if (refuses_sentinel_master(r)) {
        // A sentinel whose ACL allows only get-master-addr-by-name: asked that alone from
        // now on. Its answers carry no epoch, so they never move a primary taking writes.
        p.address_only = true;
        note_error(where + ": SENTINEL MASTER refused (" + r.str +
                   "): asking get-master-addr-by-name alone, which cannot tell a stale answer");
      }
      return;
    }
    const auto round = p.ask_round;
    answered(p);
    const auto answer = read_answer(r, p.address_only ? std::nullopt : p.epoch, config_.primary);
    if (!answer) {
      note_error(where + (r.is_error() ? ": " + r.str
                                       : ": does not know master '" + config_.master_name + "'"));
      return settle();
    }
    if (primary_ == nullptr) {
      first_answers_.insert_or_assign(&p, *answer);
      return settle();
    }
    // An answer to a question asked before the last switch may predate it: ignored.
    if (round <= switch_round_) return;
    const bool refused = refused_epoch_ == epoch_;
    if (choice_.take(*answer, true, refused)) learned(answer->primary);
  }

  void on_ask_closed(peer& p, const std::string& why) {
    note_error(why);
    if (!p.asking) return;
    answered(p);
    settle();
  }

  void subscribe(peer& p) {
    p.sub.open();
    p.sub.send(subscribe_command_);
    // A sentinel that accepts and never confirms is tried again later.
    p.sub_timer.after(pool_.options().connect_timeout, [this, q = &p] {
      q->sub.close();
      on_sub_closed(*q, endpoint_label(q->sub.endpoint()) +
                            ": SUBSCRIBE not confirmed within connect_timeout");
    });
  }

  void on_sub_closed(peer& p, const std::string& why) {
    note_error(why);
    p.sub_timer.after(p.resubscribe.next(), [this, q = &p] { subscribe(*q); });
  }

  // ["subscribe", channel, n], or ["message", channel, text] where text is
  //   +switch-master:  "<master> <old host> <old port> <new host> <new port>"
  //   +promoted-slave: "slave <host>:<port> <host> <port> @ <master> <old host> <old port>"
  // A sentinel names the promoted replica (get-master-addr-by-name) from +promoted-slave on,
  // and announces +switch-master only once the other replicas are reconfigured (~100 ms later
  // in the tests): both are taken.
  void on_message(peer& p, reply& r) {
    if (r.kind != reply::type::array || r.elements.size() != 3) return;
    const std::string& kind = r.elements[0].str;
    if (kind == "subscribe") {
      if (r.elements[1].str != "+switch-master") return;
      p.resubscribe.reset();
      p.sub_timer.cancel();
      return request_round();  // a switch may have been missed while not subscribed
    }
    if (kind != "message") return;
    std::vector<std::string_view> words;
    std::string_view text = r.elements[2].str;
    while (!text.empty()) {
      const auto space = text.find(' ');
      words.push_back(text.substr(0, space));
      text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
    }
    std::optional<redis_endpoint> ep;
    if (r.elements[1].str == "+switch-master" && words.size() == 5 &&
        words[0] == config_.master_name)
      ep = primary_at(config_.primary, words[3], words[4]);
    if (r.elements[1].str == "+promoted-slave" && words.size() == 8 && words[0] == "slave" &&
        words[4] == "@" && words[5] == config_.master_name)
      ep = primary_at(config_.primary, words[2], words[3]);
    if (ep && learned(*ep)) choice_.pushed();
  }

  // The pool's node for a new primary; the old one retired (kept while its calls in flight
  // finish), held calls on to the new one. False: no move.
  bool learned(const redis_endpoint& address) {
    if (pool_.torn_down() || (primary_ != nullptr && primary_->config().endpoint == address))
      return false;
    node* next = pool_.node_for(address);  // connects in background
    if (primary_ != nullptr) {
      pool_.retire(*primary_, steady::now() + 2 * pool_.options().timeout);
      pool_.health().failovers_seen.fetch_add(1, std::memory_order_relaxed);
    }
    primary_ = next;
    ++epoch_;
    update_health();
    {
      std::lock_guard lock(mutex_);
      have_primary_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
    switch_round_ = round_;
    first_answers_.clear();
    for (auto& c : pool_.take_held()) route(std::move(c), false);
    pool_.flush();
    return true;
  }

  const sentinel_config config_;
  std::string ask_command_, address_command_, subscribe_command_;
  std::vector<std::unique_ptr<peer>> peers_;
  timer round_timer_, recheck_timer_;

  // io thread
  node* primary_ = nullptr;  // the pool's node for it; null until a sentinel names one
  std::uint64_t epoch_ = 0;  // primaries named so far
  // The epoch_ of the last primary that answered READONLY (~0: none yet).
  std::uint64_t refused_epoch_ = ~std::uint64_t{0};
  steady::time_point last_round_at_{};
  std::uint64_t round_ = 0, switch_round_ = 0;
  primary_choice choice_;
  std::map<const peer*, sentinel_answer> first_answers_;  // start-up: each sentinel's latest

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool first_round_over_ = false;  // guarded by mutex_
  // Set (under mutex_, for the constructor's wait) once a primary is known; read anywhere.
  std::atomic<bool> have_primary_{false};
  std::atomic<bool> round_posted_{false};  // submit()'s request_round() is on its way
  std::string sentinel_error_;             // guarded by mutex_
};

}  // namespace

std::unique_ptr<transport> make_sentinel_client(sentinel_config config,
                                                const redis_options& options, script_set scripts) {
  validate_options(options);
  if (config.sentinels.empty()) throw config_error("redis+sentinel: no sentinels");
  if (config.primary.tls) validate_tls_options(options.tls);
  return start_client<sentinel_client>(std::move(config), options, std::move(scripts));
}

}  // namespace floodgate::redis
