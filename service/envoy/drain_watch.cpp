#include "drain_watch.hpp"

#include <signal.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <thread>

namespace floodgate::service::envoy {

namespace asio = boost::asio;

struct drain_watch::impl {
  explicit impl(std::function<void()> f) : on_signal(std::move(f)) {
    signals.async_wait([this](const boost::system::error_code& ec, int) {
      if (!ec) on_signal();
      work.reset();  // once: the thread ends
    });
    thread = std::thread([this] { io.run(); });
  }
  ~impl() {
    // On the watch's thread (a signal_set is not thread-safe): the wait ends, aborted, if no
    // signal came; after one, the thread has ended already.
    asio::post(io, [this] {
      boost::system::error_code ec;
      signals.cancel(ec);
    });
    thread.join();
  }

  std::function<void()> on_signal;
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  asio::signal_set signals{io, SIGTERM, SIGINT};
  std::thread thread;
};

drain_watch::drain_watch(std::function<void()> on_signal)
    : impl_(std::make_unique<impl>(std::move(on_signal))) {}

drain_watch::~drain_watch() = default;

}  // namespace floodgate::service::envoy
