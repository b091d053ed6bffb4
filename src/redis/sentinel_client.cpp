#include "redis/sentinel_client.hpp"

#include <hiredis/hiredis.h>

#include <atomic>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "floodgate/errors.hpp"
#include "redis/client.hpp"

namespace floodgate::redis {

using namespace std::chrono_literals;
using steady = request::clock;
using request_ptr = std::unique_ptr<request>;

namespace {

constexpr std::string_view scheme = "redis+sentinel://";
constexpr auto poll_interval = 100ms;
constexpr auto resolve_min_interval = 100ms;

}  // namespace

bool is_sentinel_url(std::string_view url) noexcept {
  return iequals_prefix(url, scheme);
}

sentinel_config parse_sentinel_url(std::string_view url) {
  auto fail = [&](const std::string& why) -> sentinel_config {
    throw config_error("redis+sentinel URL '" + redact_url(url) + "': " + why);
  };
  if (!is_sentinel_url(url))
    return fail("expected redis+sentinel://[user:password@]host:port[,...]/master-name[/db]");
  std::string_view rest = url.substr(scheme.size());
  std::string userinfo;
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    userinfo = std::string(rest.substr(0, at + 1));
    rest = rest.substr(at + 1);
  }
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos) return fail("missing /master-name");
  std::string_view path = rest.substr(slash + 1);
  rest = rest.substr(0, slash);
  const auto db_slash = path.find('/');
  sentinel_config out;
  out.master_name = std::string(path.substr(0, db_slash));
  if (out.master_name.empty()) return fail("missing /master-name");
  for (char c : out.master_name)
    if (std::isspace(static_cast<unsigned char>(c)) || c == '?' || c == '#')
      return fail("invalid character in master name");
  try {
    // The primary's credentials and db, parsed as a redis:// URL on a placeholder host.
    const std::string db = db_slash == std::string_view::npos
                               ? std::string()
                               : "/" + std::string(path.substr(db_slash + 1));
    out.primary = parse_redis_url("redis://" + userinfo + "primary" + db);
    for (;;) {
      const auto comma = rest.find(',');
      const auto hostport = rest.substr(0, comma);
      if (hostport.empty()) return fail("empty host in the sentinel list");
      auto ep = parse_redis_url("redis://" + std::string(hostport));
      ep.port = hostport.find(':') == std::string_view::npos ? 26379 : ep.port;
      out.sentinels.push_back(std::move(ep));
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  } catch (const config_error& e) {
    const std::string what = e.what();
    return fail(what.substr(what.find("': ") + 3));
  }
  return out;
}

// Every submitted call travels in one, so a READONLY (a demoted primary: the script wrote
// nothing) can be re-sent to the new primary, and failures can start a new look-up.
class sentinel_call final : public request {
 public:
  sentinel_call(request_ptr inner, sentinel_client::impl* owner)
      : inner_(std::move(inner)), owner_(owner) {
    take_call(*inner_);
  }

  void complete(std::error_code ec, reply* r) noexcept override;
  // A check decided in a batch: the primary answered, nothing to follow up.
  void complete_part(std::span<reply> decision) noexcept override {
    inner_->complete_part(decision);
  }

  std::unique_ptr<sentinel_call> take() {
    auto c = std::make_unique<sentinel_call>(std::move(inner_), owner_, *this);
    return c;
  }

  void finish(std::error_code ec, reply* r) noexcept { inner_->complete(ec, r); }

  sentinel_call(request_ptr inner, sentinel_client::impl* owner, sentinel_call& from)
      : inner_(std::move(inner)), owner_(owner) {
    take_call(from);
    resent = true;
  }

  bool resent = false;

 private:
  request_ptr inner_;
  sentinel_client::impl* owner_;
};

class sentinel_client::impl : public std::enable_shared_from_this<impl> {
 public:
  impl(sentinel_config config, const redis_options& options, std::vector<const script*> scripts)
      : config_(std::move(config)), options_(options), scripts_(std::move(scripts)) {}

  void start() {
    if (auto ep = ask_sentinels()) switch_to(*ep);
    // The thread holds the impl, so it outlives a client destroyed on that thread.
    thread_ = std::thread([self = shared_from_this()] { self->run(); });
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (std::this_thread::get_id() == thread_.get_id()) {
      // Destroyed from a completion the resolver thread ran (a parked call's deadline): it
      // cannot join itself; run() ends when that completion returns.
      thread_.detach();
    } else {
      thread_.join();
    }
    std::shared_ptr<client> current;
    std::deque<std::pair<steady::time_point, std::shared_ptr<client>>> retired;
    std::vector<std::unique_ptr<sentinel_call>> parked;
    {
      std::lock_guard lock(mutex_);
      current = std::move(current_);
      retired = std::move(retired_);
      parked = std::move(parked_);
    }
    current.reset();  // completes what it holds with shutting_down
    retired.clear();
    for (auto& c : parked) c->finish(errc::shutting_down, nullptr);
  }

  void submit(request_ptr r) {
    auto call = std::make_unique<sentinel_call>(std::move(r), this);
    std::shared_ptr<client> c;
    {
      std::lock_guard lock(mutex_);
      if (!stopping_) c = current_;
    }
    if (!c) {
      suspect();
      return call->finish(stopping() ? errc::shutting_down : errc::not_connected, nullptr);
    }
    c->submit(std::move(call));
  }

  bool healthy() const {
    std::lock_guard lock(mutex_);
    return current_ && current_->healthy();
  }

  std::string last_error() const {
    std::lock_guard lock(mutex_);
    return current_ ? current_->last_error() : std::string();
  }

  backend_stats stats() const noexcept {
    backend_stats s;
    s.redirections = resent_.load(std::memory_order_relaxed);
    s.failovers_seen = switches_.load(std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    // The current primary's client only: the count starts again after a switch.
    if (current_) s.script_reloads = current_->stats().script_reloads;
    return s;
  }

  void on_complete(sentinel_call& c, std::error_code ec, reply* r) noexcept {
    const bool readonly = r != nullptr && r->is_error() &&
                          (r->error_code() == "READONLY" ||
                           r->str.find("READONLY You can't write") != std::string::npos);
    if (readonly || ec == errc::not_connected || ec == errc::timeout) suspect();
    if (readonly && !c.resent && !stopping() && steady::now() < c.deadline) {
      // Held until the new primary is known (or the deadline passes).
      auto again = c.take();
      {
        std::lock_guard lock(mutex_);
        if (!stopping_) {
          parked_.push_back(std::move(again));
          return;
        }
      }
      return again->finish(errc::shutting_down, nullptr);
    }
    c.finish(ec, r);
  }

 private:
  bool stopping() const {
    std::lock_guard lock(mutex_);
    return stopping_;
  }

  void suspect() {
    {
      std::lock_guard lock(mutex_);
      suspected_ = true;
    }
    cv_.notify_all();
  }

  void run() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      // Parked calls need their deadlines watched; otherwise wake for a suspicion or the poll.
      const auto wait = parked_.empty() ? std::chrono::milliseconds(poll_interval) : 5ms;
      cv_.wait_for(lock, wait, [&] { return stopping_ || suspected_; });
      if (stopping_) break;
      const auto now = steady::now();
      if (now - last_resolve_ >= (suspected_ ? resolve_min_interval : poll_interval)) {
        suspected_ = false;
        last_resolve_ = now;
        lock.unlock();
        const auto ep = ask_sentinels();
        if (ep) switch_to(*ep);
        lock.lock();
      }
      expire(lock);
    }
  }

  // Closes retired clients whose calls have had their time, and fails parked calls past their
  // deadline. Called with the lock held; releases it around completions and destructors.
  void expire(std::unique_lock<std::mutex>& lock) {
    const auto now = steady::now();
    std::vector<std::shared_ptr<client>> closing;
    while (!retired_.empty() && retired_.front().first <= now) {
      closing.push_back(std::move(retired_.front().second));
      retired_.pop_front();
    }
    std::vector<std::unique_ptr<sentinel_call>> expired;
    for (auto it = parked_.begin(); it != parked_.end();) {
      if ((*it)->deadline <= now) {
        expired.push_back(std::move(*it));
        it = parked_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    closing.clear();
    for (auto& c : expired) c->finish(errc::timeout, nullptr);
    lock.lock();
  }

  // A new client when the primary moved; parked calls go to the current primary once it
  // changed.
  void switch_to(const redis_endpoint& address) {
    std::shared_ptr<client> next;
    std::vector<std::unique_ptr<sentinel_call>> resend;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      if (current_ && current_endpoint_ == address) return;
    }
    next = std::make_shared<client>(address, options_, scripts_);
    {
      std::lock_guard lock(mutex_);
      if (current_) {
        retired_.emplace_back(steady::now() + 2 * options_.timeout, std::move(current_));
        switches_.fetch_add(1, std::memory_order_relaxed);
      }
      current_ = next;
      current_endpoint_ = address;
      resend = std::move(parked_);
      parked_.clear();
    }
    resent_.fetch_add(resend.size(), std::memory_order_relaxed);
    for (auto& c : resend) next->submit(std::move(c));
  }

  // SENTINEL get-master-addr-by-name, of each sentinel in turn; the primary's endpoint (with
  // its credentials and db) from the first that knows it.
  // AUTH to a sentinel when redis_options says it has a password; false if refused.
  bool authenticate(redisContext* c) const {
    if (!options_.sentinel_password) return true;
    const auto& user = options_.sentinel_user;
    const auto& password = *options_.sentinel_password;
    auto* r = static_cast<redisReply*>(
        user.empty() ? redisCommand(c, "AUTH %b", password.data(), password.size())
                     : redisCommand(c, "AUTH %b %b", user.data(), user.size(), password.data(),
                                    password.size()));
    const bool ok = r != nullptr && r->type != REDIS_REPLY_ERROR;
    if (r != nullptr) freeReplyObject(r);
    return ok;
  }

  std::optional<redis_endpoint> ask_sentinels() const {
    const auto ms = options_.connect_timeout.count();
    const timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
    for (const auto& s : config_.sentinels) {
      redisContext* c = redisConnectWithTimeout(s.host.c_str(), s.port, tv);
      if (c == nullptr) continue;
      std::optional<redis_endpoint> found;
      if (c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK && authenticate(c)) {
        auto* r = static_cast<redisReply*>(redisCommand(c, "SENTINEL get-master-addr-by-name %b",
                                                        config_.master_name.data(),
                                                        config_.master_name.size()));
        if (r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
            r->element[0]->type == REDIS_REPLY_STRING &&
            r->element[1]->type == REDIS_REPLY_STRING) {
          std::uint16_t port = 0;
          const std::string_view p(r->element[1]->str, r->element[1]->len);
          const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
          if (ec == std::errc{} && end == p.data() + p.size() && port != 0) {
            found = config_.primary;
            found->host.assign(r->element[0]->str, r->element[0]->len);
            found->port = port;
          }
        }
        if (r != nullptr) freeReplyObject(r);
      }
      redisFree(c);
      if (found) return found;
    }
    return std::nullopt;
  }

  const sentinel_config config_;
  const redis_options options_;
  const std::vector<const script*> scripts_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;                                                       // guarded by mutex_
  bool suspected_ = false;                                                      // guarded by mutex_
  std::shared_ptr<client> current_;                                             // guarded by mutex_
  redis_endpoint current_endpoint_;                                             // guarded by mutex_
  std::deque<std::pair<steady::time_point, std::shared_ptr<client>>> retired_;  // mutex_
  std::vector<std::unique_ptr<sentinel_call>> parked_;                          // mutex_
  steady::time_point last_resolve_{};                                           // resolver thread
  std::atomic<std::uint64_t> resent_{0}, switches_{0};
  std::thread thread_;
};

void sentinel_call::complete(std::error_code ec, reply* r) noexcept {
  owner_->on_complete(*this, ec, r);
}

sentinel_client::sentinel_client(sentinel_config config, const redis_options& options,
                                 std::vector<const script*> scripts_to_load) {
  validate_options(options);
  if (config.sentinels.empty()) throw config_error("redis+sentinel: no sentinels");
  impl_ = std::make_shared<impl>(std::move(config), options, std::move(scripts_to_load));
  impl_->start();
}

sentinel_client::~sentinel_client() {
  impl_->stop();
}

void sentinel_client::submit(std::unique_ptr<request> r) {
  impl_->submit(std::move(r));
}

bool sentinel_client::healthy() const noexcept {
  return impl_->healthy();
}

std::string sentinel_client::last_error() const {
  return impl_->last_error();
}

backend_stats sentinel_client::stats() const noexcept {
  return impl_->stats();
}

}  // namespace floodgate::redis
