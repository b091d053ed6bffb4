#include "redis/connection.hpp"

#include <algorithm>

#include "floodgate/errors.hpp"
#include "redis/batch.hpp"
#include "redis/node.hpp"
#include "redis/resp_writer.hpp"

namespace floodgate::redis {

void validate_tls_options(const tls_options& o) {
  if (auto made = make_tls_context(o); !made.context) throw config_error("TLS: " + made.error);
}

namespace {

// An error reply that will come back on every call until someone changes the server's
// configuration: an ACL that forbids the scripts or the keys, lost authentication, a command
// renamed away. Others (BUSY, OOM, a key of another type) concern one moment or one key.
bool lasting_error(std::string_view text) noexcept {
  return text.starts_with("NOAUTH") || text.starts_with("WRONGPASS") ||
         text.starts_with("ERR unknown command") || text.find("NOPERM") != std::string_view::npos;
}

stream_config stream_config_for(const connection_config& c) {
  stream_config out = node_stream_config(c.endpoint, c.options, c.tls);
  out.greeting.check_version = true;
  for (const script* s : c.scripts.all) out.greeting.scripts.push_back(s->source);
  if (c.scripts.library != nullptr && c.options.use_functions)
    out.greeting.library = c.scripts.library->source;
  return out;
}

}  // namespace

connection::connection(boost::asio::io_context& io, const connection_config& config, node& owner)
    : config_(config),
      owner_(owner),
      stream_config_(stream_config_for(config)),
      stream_(io, *this),
      state_timer_(io),
      deadline_timer_(io),
      backoff_(config.options.reconnect_backoff_min, config.options.reconnect_backoff_max) {}

// --- connecting -------------------------------------------------------------------------

// The greeting (stream.hpp) loads every script, so a ready connection never meets NOSCRIPT
// unless the scripts are flushed later; calls wait until it is answered: a connection is ready
// only when it is fully usable.
void connection::start() {
  state_ = state::connecting;
  stream_.open(stream_config_);
}

void connection::stream_ready() {
  state_ = state::ready;
  functions_ = stream_.functions_loaded();
  backoff_.reset();
  owner_.readiness_changed(true);
  flush();
}

void connection::stream_closed(const std::string& why, std::error_code ec) {
  if (state_ == state::connecting) return connect_failed(why);
  drop(ec);
}

void connection::stream_written() {
  flush();
}

void connection::stream_read_done() {
  if (deadline_deferred_) {
    on_deadline();
    if (!stream_.is_open()) return;
  }
  flush();  // NOSCRIPT retries, and anything queued while the write was busy
}

void connection::connect_failed(const std::string& why) {
  owner_.problem(why, false);
  close_stream();
  state_ = state::backoff;
  state_timer_.after(backoff_.next(), [this] {
    if (state_ == state::backoff) start();
  });
  // Nothing will be written here for a while: let another connection take them, or fail
  // them now rather than at their deadlines.
  std::vector<request_ptr> waiting;
  take_unsent(waiting);
  owner_.redispatch(std::move(waiting));
}

void connection::close_stream() {
  stream_.close();
  loads_.clear();
  loading_.clear();
  load_library_ = library_loading_ = functions_ = false;
}

void connection::take_unsent(std::vector<request_ptr>& out) {
  for (auto* q : {&retries_, &unsent_}) {
    for (auto& r : *q) out.push_back(std::move(r));
    q->clear();
  }
}

// A ready connection lost: what was in flight may or may not have run, so it fails; what
// was not written yet moves on. Reconnecting starts at once (backoff if that fails).
void connection::drop(std::error_code for_in_flight) {
  const bool was_ready = state_ == state::ready;
  close_stream();
  auto flight = std::move(in_flight_);
  in_flight_.clear();
  in_flight_calls_ = 0;
  writes_in_flight_ = 0;
  std::vector<request_ptr> waiting;
  take_unsent(waiting);
  if (was_ready) owner_.readiness_changed(false);
  start();
  for (auto& f : flight)
    f.each_call([&](request_ptr& r) { request::finish(std::move(r), for_in_flight, nullptr); });
  owner_.redispatch(std::move(waiting));
}

void connection::stop(std::vector<request_ptr>& out) {
  state_ = state::stopped;
  state_timer_.cancel();
  deadline_timer_.cancel();
  stream_.close();
  for (auto& f : in_flight_) f.each_call([&out](request_ptr& r) { out.push_back(std::move(r)); });
  take_unsent(out);
  in_flight_.clear();
  in_flight_calls_ = 0;
  writes_in_flight_ = 0;
}

// --- requests ----------------------------------------------------------------------------

void connection::enqueue(request_ptr r) {
  arm_deadline(r->deadline);
  unsent_.push_back(std::move(r));
}

// How a call whose script met `not_run` replies so far goes out now: as FCALL while the library is
// loaded and it has not met a missing function or script; after one such reply as EVALSHA (the
// script was loaded since); after a second as EVAL: the script was flushed again between our SCRIPT
// LOAD and the retry, and EVAL carries the source itself, so this attempt cannot meet NOSCRIPT.
script_call connection::form_for(std::uint8_t not_run) const noexcept {
  if (not_run >= 2) return script_call::eval;
  return functions_ && not_run == 0 ? script_call::fcall : script_call::evalsha;
}

// Appends `r` as `form` (a request without a script: its command). The command is in the form it
// was encoded in (request::encoded): sent as it is when that is the form wanted, which it is on the
// hot path; otherwise only the header is written anew (FCALL, EVALSHA and EVAL differ in their
// first two arguments).
void connection::append_call(std::string& out, const request& r, script_call form) {
  if (r.script == nullptr || form == r.encoded) {
    out.append(r.command);
    return;
  }
  append_array_header(out, r.argument_count);
  append_script_head(out, *r.script, form);
  out.append(r.command, r.body_offset);
}

void connection::flush() {
  if (state_ != state::ready || stream_.writing()) return;
  if (writes_in_flight_ >= config_.options.max_writes_in_flight) return;
  if (loads_.empty() && !load_library_ &&
      (in_flight_calls_ >= max_in_flight_calls || (retries_.empty() && unsent_.empty())))
    return;
  // Replies owed to calls that timed out count too: a server this far behind gets no more.
  if (in_flight_.size() >= max_in_flight_replies) return;
  const auto now = request::clock::now();
  std::string& out = stream_.out();  // empty: a write is not in progress
  for (const script* s : loads_) {
    append_command(out, {"SCRIPT", "LOAD", s->source});
    in_flight_.push_back({.what = in_flight::kind::load, .loaded = s, .written = now});
    loading_.push_back(s);
  }
  loads_.clear();
  if (load_library_) {
    append_command(out, {"FUNCTION", "LOAD", config_.scripts.library->source});
    in_flight_.push_back({.what = in_flight::kind::load, .written = now});
    load_library_ = false;
    library_loading_ = true;
  }
  // A call that cannot be answered before its deadline (by the recent round-trip time) is
  // not sent: it fails with timeout now, where in flight it would time out too and cost the
  // connection, with every other call on it. Under overload this keeps the pipe alive.
  // (At most half the timeout: a call with half its time left is always worth sending, and
  // an estimate inflated by a stall cannot keep every call from being sent.)
  const auto send_by =
      now + std::min<request::clock::duration>(round_trip_, config_.options.timeout / 2);
  std::vector<request_ptr> expired;
  // Checks join batches; other calls are written as they come. Everything here was queued
  // concurrently (none has been answered), so sending a batch after calls queued behind its
  // first item still orders each key's checks as they were queued.
  std::vector<open_batch> open;
  for (auto* q : {&retries_, &unsent_}) {
    while (!q->empty() && in_flight_calls_ < max_in_flight_calls) {
      request_ptr r = std::move(q->front());
      q->pop_front();
      if (r->deadline <= send_by) {
        expired.push_back(std::move(r));
        continue;
      }
      ++in_flight_calls_;
      if (config_.scripts.batch && r->part.batchable() && !r->asking) {
        add_to_batch(out, open, std::move(r), now);
        continue;
      }
      if (r->asking) {
        // Back to back with the call on this connection: ASKING applies to the next command.
        append_command(out, {"ASKING"});
        in_flight_.push_back({.what = in_flight::kind::asking, .written = now});
      }
      send_call(out, std::move(r), now);
    }
  }
  for (auto& b : open) send_batch(out, b, now);
  if (!out.empty()) {
    in_flight_.back().ends_write = true;
    ++writes_in_flight_;
    stream_.flush();  // stream_written() flushes again
  }
  for (auto& r : expired) request::finish(std::move(r), errc::timeout, nullptr);
}

void connection::add_to_batch(std::string& out, std::vector<open_batch>& open, request_ptr r,
                              request::clock::time_point now) {
  const std::size_t size = batch_item_size(*r);
  auto b = std::find_if(open.begin(), open.end(),
                        [&](const open_batch& o) { return can_share(*o.items.front(), *r); });
  if (b == open.end()) {
    // Few open at once: on one server every check shares (one slot, Redis's clock); on a
    // Cluster each slot has its own.
    constexpr std::size_t max_open = 16;
    if (open.size() == max_open) {
      send_batch(out, open.front(), now);
      open.erase(open.begin());
    }
    b = open.emplace(open.end());
  } else if (b->items.size() >= config_.options.max_batch_items ||
             b->bytes + size > max_batch_bytes) {
    // Full: sent now, so a later batch never carries this key's checks before its own.
    send_batch(out, *b, now);
  }
  b->bytes += size;
  b->items.push_back(std::move(r));
}

void connection::send_call(std::string& out, request_ptr r, request::clock::time_point now) {
  const auto form = form_for(r->noscript_replies);
  append_call(out, *r, form);
  in_flight_.push_back(
      {.what = in_flight::kind::call, .call = std::move(r), .form = form, .written = now});
}

void connection::send_batch(std::string& out, open_batch& b, request::clock::time_point now) {
  if (b.items.size() == 1) {
    send_call(out, std::move(b.items.front()), now);
  } else {
    // As its item that met the most missing scripts would go alone (form_for).
    std::uint8_t not_run = 0;
    for (const auto& r : b.items) not_run = std::max(not_run, r->noscript_replies);
    const auto form = form_for(not_run);
    append_batch(out, *config_.scripts.batch, b.items, form);
    in_flight_.push_back({.what = in_flight::kind::batch,
                          .form = form,
                          .written = now,
                          .batch = std::move(b.items)});
  }
  b.items.clear();
  b.bytes = 0;
}

void connection::stream_reply(reply& r) {
  if (in_flight_.empty()) return drop(errc::protocol_error);  // a reply nobody asked for
  in_flight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  if (f.ends_write) --writes_in_flight_;
  if (f.what == in_flight::kind::asking) return;  // +OK; an error shows up on the call after it
  if (f.what == in_flight::kind::load) {
    if (f.loaded == nullptr) {  // FUNCTION LOAD: calls go as FCALL again once it is back
      library_loading_ = false;
      functions_ = library_loaded(r);
      return;
    }
    // An error here shows up again as NOSCRIPT on the retry, which then falls back to EVAL.
    if (auto it = std::find(loading_.begin(), loading_.end(), f.loaded); it != loading_.end())
      loading_.erase(it);
    return;
  }
  // Smoothed like TCP's SRTT (7/8 old, 1/8 new): steady under jitter, quick to follow load.
  // A late reply counts too: it is how slow the server is.
  round_trip_ += (request::clock::now() - f.written - round_trip_) / 8;
  if (f.what == in_flight::kind::call) {
    if (!f.call) return;  // timed out already: its reply is dropped here, in its place
    --in_flight_calls_;
    return on_call_reply(std::move(f.call), r, f.form);
  }
  // Items that timed out are null: the reply's parts stay matched by position.
  const auto live = static_cast<std::size_t>(std::count_if(
      f.batch.begin(), f.batch.end(), [](const request_ptr& item) { return item != nullptr; }));
  if (live == 0) return;
  in_flight_calls_ -= live;
  on_batch_reply(std::move(f.batch), r, f.form);
}

bool connection::function_missing(const reply& r) {
  const bool flushed = r.str == "ERR Function not found";
  if (!flushed && !(r.str.starts_with("NOPERM") && r.str.find("'fcall'") != std::string::npos))
    return false;
  if (functions_) {
    functions_ = false;
    if (flushed && !library_loading_) {
      load_library_ = true;
      owner_.script_reloaded();
    }
  }
  return true;
}

void connection::on_call_reply(request_ptr call, reply& r, script_call form) {
  if (!r.is_error()) {
    owner_.call_succeeded();
    return request::finish(std::move(call), {}, &r);
  }
  // A missing function did not run either: sent again as EVALSHA.
  if (form == script_call::fcall && function_missing(r)) {
    call->noscript_replies = 1;
    return retry(std::move(call));
  }
  // NOSCRIPT means the script did not run, so sending the call again cannot count it twice.
  if (call->script != nullptr && call->noscript_replies < 2 && r.error_code() == "NOSCRIPT") {
    // The first retry is EVALSHA after a SCRIPT LOAD (one per script, however many calls
    // met NOSCRIPT); the second is EVAL, which needs no load.
    if (++call->noscript_replies == 1) reload(call->script);
    return retry(std::move(call));  // written after the SCRIPT LOAD, by the next flush
  }
  owner_.problem("call: " + r.str, lasting_error(r.str));
  request::finish(std::move(call), error_for(r), &r);
}

void connection::on_batch_reply(std::vector<request_ptr> items, reply& r, script_call form) {
  const bool missing_function = form == script_call::fcall && r.is_error() && function_missing(r);
  if (!missing_function && (!r.is_error() || r.error_code() != "NOSCRIPT")) {
    // An item's error (its key of another type, or one the ACL forbids) is told like a call's.
    const reply* failed = r.is_error() ? &r : nullptr;
    if (!failed && r.kind == reply::type::array)
      for (std::size_t i = 0; i < r.elements.size(); i += 5)
        if (r.elements[i].is_error()) failed = &r.elements[i];
    if (failed)
      owner_.problem("call: " + failed->str, lasting_error(failed->str));
    else
      owner_.call_succeeded();
    return complete_batch(items, r);
  }
  // The batch script did not run: as for one call (on_call_reply), load it and send the
  // items again; they may form other batches, and go as EVAL after a second NOSCRIPT.
  if (!missing_function) reload(config_.scripts.batch);
  for (auto& item : items) {
    if (!item) continue;  // timed out in flight
    item->noscript_replies = static_cast<std::uint8_t>(std::min(item->noscript_replies + 1, 2));
    retry(std::move(item));
  }
}

void connection::reload(const script* s) {
  if (std::find(loads_.begin(), loads_.end(), s) != loads_.end() ||
      std::find(loading_.begin(), loading_.end(), s) != loading_.end())
    return;
  loads_.push_back(s);
  owner_.script_reloaded();
}

void connection::retry(request_ptr call) {
  if (call->deadline <= request::clock::now())
    return request::finish(std::move(call), errc::timeout, nullptr);
  retries_.push_back(std::move(call));
}

// --- deadlines ---------------------------------------------------------------------------

// One timer per connection, set to the earliest deadline it holds, at most once per
// millisecond: a burst of calls has deadlines microseconds apart, and each expiry costs a scan
// of the queues. It is not moved when calls complete: firing early for a call already
// answered costs one scan, and calls are far more frequent than deadlines.
constexpr auto deadline_granularity = std::chrono::milliseconds(1);

void connection::arm_deadline(request::clock::time_point t) {
  deadline_timer_.at_earliest(t, [this] { on_deadline(); });
}

void connection::on_deadline() {
  const auto now = request::clock::now();
  // Replies that reached the socket in time but wait behind this timer (the thread was busy)
  // are read first: the read handler runs this again once it has taken them, or the timer
  // does a millisecond later. A call whose reply is not there by then has timed out.
  bool expiring = false;
  for (auto& f : in_flight_)
    f.each_call([&](request_ptr& r) { expiring = expiring || r->deadline <= now; });
  if (!deadline_deferred_ && state_ == state::ready && stream_.is_open() && expiring &&
      stream_.bytes_waiting()) {
    deadline_deferred_ = true;
    arm_deadline(now + deadline_granularity);
    return;
  }
  deadline_deferred_ = false;
  std::vector<request_ptr> expired;
  for (auto* q : {&retries_, &unsent_}) {
    if (std::none_of(q->begin(), q->end(),
                     [&](const request_ptr& r) { return r->deadline <= now; }))
      continue;
    std::deque<request_ptr> keep;
    for (auto& r : *q)
      (r->deadline <= now ? expired.emplace_back() : keep.emplace_back()) = std::move(r);
    q->swap(keep);
  }
  // A call in flight that times out fails alone. Its entry keeps its place, so its reply,
  // if it comes, is matched to it and dropped (as hiredis and Boost.Redis do), and the calls
  // written after it keep their own deadlines: one slow reply fails only its own call.
  for (auto& f : in_flight_) {
    f.each_call([&](request_ptr& r) {
      if (r->deadline > now) return;
      expired.push_back(std::move(r));
      --in_flight_calls_;
    });
  }
  // But a connection that answers nothing for connect_timeout is taken as broken (a black
  // hole, a half-open TCP connection, a stopped server): it goes, the calls still in flight
  // on it fail with not_connected, and a new one must complete its handshake in that time.
  if (state_ == state::ready && !in_flight_.empty() &&
      now - in_flight_.front().written >= config_.options.connect_timeout) {
    drop(errc::not_connected);
  }

  auto earliest = request::clock::time_point::max();
  for (auto& f : in_flight_)
    f.each_call([&](request_ptr& r) { earliest = std::min(earliest, r->deadline); });
  for (auto* q : {&retries_, &unsent_})
    for (const auto& r : *q) earliest = std::min(earliest, r->deadline);
  if (state_ == state::ready && !in_flight_.empty())
    earliest = std::min(earliest, in_flight_.front().written + config_.options.connect_timeout);
  if (earliest != request::clock::time_point::max())
    arm_deadline(std::max(earliest, now + deadline_granularity));

  for (auto& r : expired) request::finish(std::move(r), errc::timeout, nullptr);
}

}  // namespace floodgate::redis
