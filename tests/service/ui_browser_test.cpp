// The status page (/ui) in a real browser: headless Chromium (Debian package) loads it from a
// floodgated under load and the test reads what the page shows from the DOM it dumps, and
// keeps a phone-sized screenshot as an artifact (test-artifacts/ui_phone.png in the build
// dir). Chromium missing is a failure, not a skip: scripts/test installs it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "admin_port.hpp"
#include "child_process.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

// `name` found in PATH, or "".
std::string in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "";
  while (!rest.empty()) {
    const auto colon = rest.find(':');
    const auto dir = rest.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    const auto file = std::string(dir) + "/" + name;
    if (::access(file.c_str(), X_OK) == 0) return file;
  }
  return {};
}

// The number in attribute `attr` ("name=\"...\"") of the first tag starting with `tag_start`
// in the dumped DOM, or -1. (No std::regex: GCC 12 warns inside it under -O1 sanitizers.)
double attribute_of(const std::string& dom, const std::string& tag_start, const std::string& attr) {
  const auto at = dom.find(tag_start);
  if (at == std::string::npos) return -1;
  const auto tag = dom.substr(at, dom.find('>', at) - at);
  const auto value = tag.find(" " + attr + "=\"");
  if (value == std::string::npos) return -1;
  return std::stod(tag.substr(value + attr.size() + 3));
}

// The value of attribute `attr` on the <tr> of rule `rule`, or -1.
double row_value(const std::string& dom, const std::string& rule, const std::string& attr) {
  return attribute_of(dom, "<tr data-rule=\"" + rule + "\"", attr);
}

// The polls the page finished (its data-polls), or -1.
int polls_of(const std::string& dom) {
  return static_cast<int>(attribute_of(dom, "<div id=\"updated\"", "data-polls"));
}

// Keys are callers' data: one that is HTML must show as text. A thread keeps checking it
// (gcra, 10 a minute: most are denied) beside three ordinary keys while Chromium loads the
// page, so rates and denial ratios are nonzero over the page's own polls.
TEST(ui, browser_shows_rules_hot_keys_and_backend) {
  const auto chromium = in_path("chromium");
  ASSERT_FALSE(chromium.empty()) << "chromium is not installed (scripts/test installs it: "
                                    "FLOODGATE_PACKAGES in scripts/lib.sh)";
  redis_server redis;
  floodgated_process::options o;
  o.extra_args = {"--redis", redis.url(), "--admin-listen", "127.0.0.1:0", "--top-keys", "16"};
  floodgated_process fg(
      "rules:\n  - {name: api, algorithm: sliding_log, limit: 5, window: 1h}\n"
      "  - {name: login, algorithm: gcra, limit: 10, window: 1m}\n",
      o);
  const auto admin = admin_port_of(fg);
  wait_ready(fg);
  const std::string evil = "<img src=x onerror=alert(1)>";

  std::atomic<bool> stop{false};
  std::atomic<int> checks{0};
  std::thread load([&] {
    http_connection c(fg.port());
    for (int i = 0; !stop; ++i) {
      const auto key = i % 4 == 3 ? "u-" + std::to_string(i % 3) : evil;
      c.request("POST", "/v1/check", R"({"rule":"login","key":")" + key + R"("})");
      ++checks;
      std::this_thread::sleep_for(20ms);
    }
  });
  http_connection c(fg.port());
  for (int i = 0; i < 7; ++i) c.request("POST", "/v1/check", R"({"rule":"api","key":"user-1"})");
  // 40 decoys, one check each, past the 16 counters: the late ones take over a counter and
  // start from its count, so their counts are ranges (error > 0).
  for (int i = 0; i < 40; ++i)
    c.request("POST", "/v1/check", R"({"rule":"api","key":"decoy-)" + std::to_string(i) + "\"}");

  const std::string artifacts = FLOODGATE_TEST_ARTIFACTS;
  std::filesystem::create_directories(artifacts);
  const auto screenshot = artifacts + "/ui_phone.png";
  std::filesystem::remove(screenshot);
  const auto dir = make_temp_dir("floodgate-ui-");
  const auto dom_path = dir + "/dom.html";
  const int out = ::open(dom_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int err = ::open((dir + "/chromium.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(out, 0);
  ASSERT_GE(err, 0);
  // 4 s of the page's time (virtual: timers run as fast as the fetches allow): two polls 2 s
  // apart, at least. Real time is bounded by wait_exit below.
  child_process browser(
      {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
       "--user-data-dir=" + dir + "/profile", "--window-size=412,915", "--virtual-time-budget=4500",
       "--screenshot=" + screenshot, "--dump-dom",
       "http://127.0.0.1:" + std::to_string(admin) + "/ui"},
      {.output = {}, .out_fd = out, .err_fd = err, .max_open_files = 0});
  ::close(out);
  ::close(err);
  const auto code = browser.wait_exit(25s);
  stop = true;
  load.join();
  ASSERT_TRUE(code.has_value()) << "chromium did not finish within 25 s";
  ASSERT_EQ(*code, 0) << read_file(dir + "/chromium.log");
  const auto dom = read_file(dom_path);
  ASSERT_GT(checks.load(), 0);

  EXPECT_GE(polls_of(dom), 2) << dom;
  EXPECT_NE(dom.find("<td>api</td>"), std::string::npos) << dom;
  // api: 7 checks of a 5 an hour (2 denied) and 40 decoys, all before the page loaded.
  EXPECT_NEAR(row_value(dom, "api", "data-denial-ratio"), 2.0 / 47, 1e-9) << dom;
  EXPECT_GT(row_value(dom, "login", "data-rate"), 0) << dom;
  EXPECT_GT(row_value(dom, "login", "data-denial-ratio"), 0.3) << dom;  // 10 of 50+ admitted
  EXPECT_NE(dom.find(R"(id="backend-health" class="ok">redis: healthy<)"), std::string::npos)
      << dom;
  // The key as text in the hot-keys table, escaped by the DOM serializer; never as an element.
  EXPECT_NE(dom.find(R"(<td class="key denied-key">&lt;img src=x onerror=alert(1)&gt;</td>)"),
            std::string::npos)
      << dom;
  EXPECT_EQ(dom.find("<img"), std::string::npos) << dom;
  // Hot-key counts show their error bound: an exact count as it is, a decoy's as the range
  // count - error .. count, so it does not look hotter than a key counted from the start.
  EXPECT_NE(dom.find(R"(data-count="7" data-error="0" title="exact">7<)"), std::string::npos)
      << dom;
  const auto ranged = dom.find(R"(class="num count" data-count=")");
  bool some_range = false;
  for (auto at = ranged; at != std::string::npos;
       at = dom.find(R"(class="num count" data-count=")", at + 1)) {
    const auto error = attribute_of(dom.substr(at - 4), "<td ", "data-error");
    if (error <= 0) continue;
    const auto count = attribute_of(dom.substr(at - 4), "<td ", "data-count");
    const auto text_at = dom.find('>', at) + 1;
    const auto text = dom.substr(text_at, dom.find('<', text_at) - text_at);
    EXPECT_EQ(text, std::to_string(static_cast<int>(count - error)) + "–" +
                        std::to_string(static_cast<int>(count)))
        << text;
    some_range = true;
  }
  EXPECT_TRUE(some_range) << "no count with an error bound shown\n" << dom;
  EXPECT_NE(dom.find("127.0.0.1:" + std::to_string(redis.port())), std::string::npos);  // skew

  // The screenshot: a PNG of the phone-sized window (IHDR: width and height, big-endian).
  const auto png = read_file(screenshot);
  ASSERT_GT(png.size(), 1000u) << "no screenshot at " << screenshot;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  auto be32 = [&](std::size_t at) {
    return (static_cast<unsigned char>(png[at]) << 24) |
           (static_cast<unsigned char>(png[at + 1]) << 16) |
           (static_cast<unsigned char>(png[at + 2]) << 8) | static_cast<unsigned char>(png[at + 3]);
  };
  EXPECT_EQ(be32(16), 412u);
  EXPECT_EQ(be32(20), 915u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace floodgate::test
