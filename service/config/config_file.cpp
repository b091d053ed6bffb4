#include "config/config_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "floodgate/errors.hpp"

namespace floodgate::service {
namespace {

// What a non-regular file is, for the message ("a directory").
std::string_view kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a file";
}

[[noreturn]] void fail(const std::string& path, std::string_view what, int error) {
  throw config_error(path + ": " + std::string(what) + ": " + std::strerror(error));
}

[[noreturn]] void not_regular(const std::string& path, mode_t mode) {
  throw config_error(path + ": not a regular file (" + std::string(kind_of(mode)) + ")");
}

class file_descriptor {
 public:
  explicit file_descriptor(int fd) : fd_(fd) {}
  ~file_descriptor() { ::close(fd_); }
  file_descriptor(const file_descriptor&) = delete;
  file_descriptor& operator=(const file_descriptor&) = delete;
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string read_config_file(const std::string& path) {
  // A look first, so a device is never opened (opening one can have effects of its own).
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) not_regular(path, st.st_mode);
  // O_NONBLOCK: if a FIFO took the file's place since, open() returns at once instead of
  // waiting for a writer, and the fstat below refuses it. (It changes nothing for a regular
  // file's reads.)
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) fail(path, "cannot open", errno);
  const file_descriptor file(fd);
  if (::fstat(fd, &st) != 0) fail(path, "cannot read", errno);
  if (!S_ISREG(st.st_mode)) not_regular(path, st.st_mode);
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, "cannot read", errno);
    if (n == 0) return text;
    text.append(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace floodgate::service
