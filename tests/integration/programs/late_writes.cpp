// Writes to a guarded file from a static destructor and from an atexit handler, after main returned,
// and from a signal handler: appendguard must still check them (its state is never destroyed).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int g_fd = -1;

void say(const char* what, long result) {
  char line[96];
  int n = std::snprintf(line, sizeof line, "%s=%ld errno=%d\n", what, result, result < 0 ? errno : 0);
  (void)!write(STDOUT_FILENO, line, static_cast<size_t>(n));
}

void backward(const char* what) {
  lseek(g_fd, 0, SEEK_SET);
  say(what, write(g_fd, "b", 1));
}

struct WritesWhenDestroyed {
  ~WritesWhenDestroyed() { backward("static_destructor"); }
} g_static;

void at_exit() {
  backward("atexit");
}

void on_signal(int) {
  say("signal_append", (lseek(g_fd, 0, SEEK_END), write(g_fd, "s", 1)));
  backward("signal_backward");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  g_fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  say("main_append", write(g_fd, "0123456789", 10));
  std::signal(SIGUSR1, on_signal);
  raise(SIGUSR1);
  std::atexit(at_exit);
  return 0;
}
