#include "progress_bar.hpp"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "clock.hpp"

namespace floodgate::bench {

progress_bar::progress_bar(bool enabled) : enabled_(enabled && ::isatty(STDOUT_FILENO)) {}

void progress_bar::update(double fraction, std::uint64_t decisions) {
  if (!enabled_) return;
  const auto now = now_us();
  if (started_us_ == 0) started_us_ = now;
  if (now - last_draw_us_ < 100'000 && fraction < 1) return;
  last_draw_us_ = now;
  constexpr int width = 30;
  const int filled = static_cast<int>(fraction * width);
  const double seconds = static_cast<double>(now - started_us_) / 1e6;
  std::printf("\r[%s%s] %3d%%  %llu decisions  %.0f/s ", std::string(filled, '#').c_str(),
              std::string(width - filled, ' ').c_str(), static_cast<int>(fraction * 100),
              static_cast<unsigned long long>(decisions),
              seconds > 0 ? static_cast<double>(decisions) / seconds : 0.0);
  std::fflush(stdout);
  drawn_ = true;
}

void progress_bar::clear() {
  if (!drawn_) return;
  std::printf("\r\033[2K");
  std::fflush(stdout);
  drawn_ = false;
}

}  // namespace floodgate::bench
