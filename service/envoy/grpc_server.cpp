#include "grpc_server.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "grpc_acceptor.hpp"
#include "grpc_connection.hpp"
#include "rls_metrics.hpp"

namespace floodgate::service::envoy {
namespace {
namespace asio = boost::asio;
using boost::system::error_code;
using work_guard = asio::executor_work_guard<asio::io_context::executor_type>;
}  // namespace

struct grpc_server::impl {
  impl(const grpc_options& options, rls_service& s, rls_metrics& m)
      : shared(s, m, options.streams),
        tls(options.tls ? make_grpc_tls_context(*options.tls) : nullptr),
        acceptor(
            options.address, options.caps,
            [this](int fd, const std::string& peer) { serve(fd, peer); },
            [&m](connection_table::verdict v) { m.record_connection_refused(v); }) {
    shared.limits = {.max_streams = static_cast<std::uint32_t>(options.max_streams_per_connection),
                     .max_message_bytes = options.max_message_bytes,
                     .max_header_bytes = options.max_header_bytes};
    shared.write_timeout = options.write_timeout;
    if (options.tls) {
      shared.handshake_timeout = options.tls->handshake_timeout;
      shared.tls_failures = &tls_failures;
    }
    const auto n = options.threads != 0
                       ? options.threads
                       : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 2, 8);
    for (std::size_t i = 0; i < n; ++i) {
      ios.push_back(std::make_unique<asio::io_context>(1));
      works.emplace_back(ios.back()->get_executor());
    }
    sweep_timer.emplace(*ios.front());
    sweep_period = std::clamp(options.streams.message_timeout / 8, std::chrono::milliseconds(10),
                              std::chrono::milliseconds(250));
  }

  // From the accept loop: an admitted connection, to the next I/O thread.
  void serve(int fd, const std::string& peer) {
    if (stopping) {
      ::close(fd);
      return;
    }
    auto& io = *ios[next++ % ios.size()];
    start_grpc_connection(io, fd, peer, tls.get(), shared);
  }

  // Ends the calls whose message is late, and reports TLS failures not logged yet.
  void sweep() {
    for (void* w : shared.guard.expire(std::chrono::steady_clock::now())) {
      auto* waiting = static_cast<waiting_call*>(w);
      shared.metrics.record_stream_ended(rls_metrics::stream_end::timeout);
      if (auto c = waiting->connection.lock())
        c->end_waiting(waiting->stream, grpc_status::deadline_exceeded,
                       "the request message did not arrive in time");
      delete waiting;
    }
    tls_failures.flush();
    if (stopping) return;
    sweep_timer->expires_after(sweep_period);
    sweep_timer->async_wait([this](const error_code& ec) {
      if (!ec) sweep();
    });
  }

  std::vector<std::shared_ptr<grpc_connection>> live() {
    std::vector<std::shared_ptr<grpc_connection>> out;
    std::lock_guard lock(shared.live_mutex);
    for (auto& [ptr, weak] : shared.live)
      if (auto c = weak.lock()) out.push_back(std::move(c));
    return out;
  }

  std::size_t live_count() {
    std::lock_guard lock(shared.live_mutex);
    return shared.live.size();
  }

  grpc_shared shared;
  tls_failure_log tls_failures;
  std::shared_ptr<asio::ssl::context> tls;  // reads the files first (throws for a bad one)
  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::vector<work_guard> works;
  std::vector<std::thread> threads;
  std::optional<asio::steady_timer> sweep_timer;
  std::chrono::milliseconds sweep_period{100};
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stopping{false};
  bool stopped = false;
  grpc_acceptor acceptor;  // binds (it throws if it cannot); started once the threads run
};

grpc_server::grpc_server(const grpc_options& options, rls_service& service, rls_metrics& metrics)
    : impl_(std::make_unique<impl>(options, service, metrics)) {
  if (impl_->acceptor.port() == 0)
    throw std::runtime_error("--grpc-listen: cannot listen on " + options.address);
  for (auto& io : impl_->ios) impl_->threads.emplace_back([&io = *io] { io.run(); });
  asio::post(*impl_->ios.front(), [i = impl_.get()] { i->sweep(); });
  impl_->acceptor.start();
}

grpc_server::~grpc_server() {
  shutdown(std::chrono::milliseconds{0});
}

void grpc_server::begin_drain() {
  impl_->shared.serving = false;
}

int grpc_server::port() const noexcept {
  return impl_->acceptor.port();
}

void grpc_server::shutdown(std::chrono::milliseconds drain) {
  auto& i = *impl_;
  if (i.stopped) return;
  i.stopped = true;
  i.stopping = true;
  {
    std::lock_guard lock(i.shared.live_mutex);
    i.shared.stopping = true;  // a connection not started yet closes rather than join `live`
  }
  i.acceptor.stop();  // no new connection; those open finish their calls below
  i.shared.serving = false;
  for (auto& c : i.live()) c->go_away();
  const auto deadline = std::chrono::steady_clock::now() + drain;
  while (i.live_count() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (auto& c : i.live()) c->close();
  // The backend answers every call within its own timeouts; their handlers post to the I/O
  // threads, which must still run then. Bounded all the same.
  const auto answered_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (i.shared.deciding > 0 && std::chrono::steady_clock::now() < answered_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (i.shared.deciding > 0)
    spdlog::error(
        "msg=\"grpc shutdown: decisions still unanswered by the backend after 30 s\" "
        "count={}",
        i.shared.deciding.load());
  asio::post(*i.ios.front(), [&i] { i.sweep_timer->cancel(); });
  i.works.clear();  // each thread returns once its connections' operations have ended
  for (auto& t : i.threads) t.join();
  i.tls_failures.flush(true);
}

}  // namespace floodgate::service::envoy
