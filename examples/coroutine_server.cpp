// A small Beast HTTP server that rate-limits its own requests with C++20 coroutines: each
// request co_awaits floodgate::async_check (floodgate/asio.hpp) on the server's own
// io_context, keyed by the client's address.
//
//   floodgate_coroutine_server 8080                          # in-process memory backend
//   floodgate_coroutine_server 8080 redis://127.0.0.1:6379   # a limit shared by every server
//   curl -i localhost:8080/             # 200 "hello", then 429 with Retry-After past 5 a minute
//
// One thread runs everything: the listener, every session and every check's completion.
// SIGINT or SIGTERM stops it.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <exception>
#include <floodgate/asio.hpp>
#include <floodgate/floodgate.hpp>
#include <string>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

// 5 requests a minute per client address.
const floodgate::policy per_client{"hello", floodgate::algorithm::sliding_log, 5, 1min};

// The reply to one request, given the limiter's answer.
http::response<http::string_body> reply_to(const http::request<http::string_body>& req,
                                           const floodgate::check_result& r) {
  http::response<http::string_body> res;
  res.version(req.version());
  res.keep_alive(req.keep_alive());
  res.set(http::field::content_type, "text/plain");
  const auto& d = r.decision;
  res.set("RateLimit-Remaining", std::to_string(d.remaining));
  if (d.allowed) {
    res.result(http::status::ok);
    res.body() = "hello (" + std::to_string(d.remaining) + " left this minute)\n";
  } else if (r.outcome == floodgate::outcome::over_limit) {
    res.result(http::status::too_many_requests);
    res.set(http::field::retry_after, std::to_string((d.retry_after.count() + 999) / 1000));
    res.body() = "too many requests\n";
  } else {  // the backend failed and the policy fails closed
    res.result(http::status::service_unavailable);
    res.body() = "rate limiter unavailable: " + r.error.message() + "\n";
  }
  res.prepare_payload();
  return res;
}

asio::awaitable<void> session(tcp::socket socket, floodgate::limiter& limiter) {
  const std::string client = socket.remote_endpoint().address().to_string();
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    stream.expires_after(30s);  // every read has a deadline
    http::request<http::string_body> req;
    auto [read_error, read] =
        co_await http::async_read(stream, buffer, req, asio::as_tuple(asio::use_awaitable));
    if (read_error) break;
    // Completes on this coroutine's executor, never on floodgate's thread.
    const auto r =
        co_await floodgate::async_check(limiter, client, per_client, 1, asio::use_awaitable);
    std::printf("%s %s %s -> %s (remaining %lld)\n", client.c_str(),
                std::string(req.method_string()).c_str(), std::string(req.target()).c_str(),
                floodgate::to_string(r.outcome), static_cast<long long>(r.decision.remaining));
    std::fflush(stdout);
    auto res = reply_to(req, r);
    auto [write_error, written] =
        co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    if (write_error || !res.keep_alive()) break;
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> listen(tcp::acceptor& acceptor, floodgate::limiter& limiter) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) continue;
    asio::co_spawn(acceptor.get_executor(), session(std::move(socket), limiter), asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: floodgate_coroutine_server PORT [BACKEND-URL]\n");
    return 2;
  }
  const auto port = static_cast<unsigned short>(std::stoi(argv[1]));
  floodgate::limiter limiter{argc > 2 ? argv[2] : "memory://"};

  asio::io_context io{1};
  tcp::acceptor acceptor{io, {asio::ip::make_address("127.0.0.1"), port}};
  asio::signal_set signals{io, SIGINT, SIGTERM};
  signals.async_wait([&](const beast::error_code&, int) {
    acceptor.close();
    io.stop();
  });
  asio::co_spawn(io, listen(acceptor, limiter), asio::detached);
  std::printf("listening on 127.0.0.1:%u (%s backend)\n", acceptor.local_endpoint().port(),
              std::string(limiter.get_backend().kind()).c_str());
  std::fflush(stdout);
  io.run();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "floodgate_coroutine_server: %s\n", e.what());
  return 1;
}
