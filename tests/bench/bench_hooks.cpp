// The measured program of scripts/bench: `bench_hooks CASE ITERATIONS` runs one case and prints
// `ns_per_op=<float>`; `bench_hooks --list` prints `name budget iterations description` per case.
// `bench_hooks CASE ITERATIONS COUNT` sets the count of a case that has one (guarded_cycle_10k: the other
// guarded files open; exec_inherited: the inherited descriptors), as scripts/bench plot does.
// The same binary runs with and without the preloaded library; only the calls inside
// appendguard_bench_measured() are timed (and counted by callgrind --toggle-collect).
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string g_dir;  // a private directory on tmpfs, removed at exit
long g_count = -1;  // the third argument, when given: the count of a case that has one

std::string path_in_dir(const char* name) {
  return g_dir + "/" + name;
}

[[noreturn]] void fail(const char* what) {
  fprintf(stderr, "bench_hooks: %s: %s\n", what, strerror(errno));
  exit(2);
}

int open_or_fail(const std::string& path, int flags) {
  int fd = open(path.c_str(), flags, 0644);
  if (fd < 0) fail(path.c_str());
  return fd;
}

void create_file(const char* name) {
  close(open_or_fail(path_in_dir(name), O_WRONLY | O_CREAT | O_TRUNC));
}

// One case: `run` performs `n` operations; `rearm` (optional) runs untimed between batches of `batch`.
struct Case {
  const char* name;
  const char* budget;
  long iterations;  // the driver's default per round
  long batch;
  const char* description;
  void (*setup)();
  void (*run)(long n);
  void (*rearm)();
  void (*teardown)();
};

int g_fd = -1;
FILE* g_file = nullptr;
std::string g_open_path;
char g_buffer[64] = {};
std::vector<char> g_big(1 << 20, 'x');

void close_fd() {
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
}

void fail_short(ssize_t written) {
  if (written < 0) fail("write");
  fprintf(stderr, "bench_hooks: short write (%zd)\n", written);
  exit(2);
}

void setup_dev_null() {
  g_fd = open_or_fail("/dev/null", O_WRONLY);
}
void run_write_1(long n) {
  for (long i = 0; i < n; ++i) {
    ssize_t w = write(g_fd, g_buffer, 1);
    if (w != 1) fail_short(w);
  }
}

void setup_plain_read() {
  create_file("plain.bin");
  g_open_path = path_in_dir("plain.bin");
}
void setup_plain_write() {
  create_file("x.bin");
  g_open_path = path_in_dir("x.bin");
}
template <int kFlags>
void run_open_close(long n) {
  const char* path = g_open_path.c_str();
  for (long i = 0; i < n; ++i) {
    int fd = open(path, kFlags);
    if (fd < 0) fail(path);
    close(fd);
  }
}

// A whole guarded file's life: open (matched by the pattern, its site recorded, tracked), one 64 B write,
// close (issue 27).
void setup_guarded_cycle() {
  g_open_path = path_in_dir("cycle.safetensors");
}
void run_guarded_cycle(long n) {
  const char* path = g_open_path.c_str();
  for (long i = 0; i < n; ++i) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) fail(path);
    ssize_t w = write(fd, g_buffer, sizeof g_buffer);
    if (w != static_cast<ssize_t>(sizeof g_buffer)) fail_short(w);
    close(fd);
  }
}

// The same with 10,000 other guarded files open (issue 27: the cost must stay flat as files grow), or
// COUNT of them.
constexpr int kManyFiles = 10'000;
std::vector<int> g_many;
void raise_descriptor_limit(long needed) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < static_cast<rlim_t>(needed) + 100) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}
void setup_guarded_cycle_many() {
  const long files = g_count >= 0 ? g_count : kManyFiles;
  raise_descriptor_limit(files);
  for (long i = 0; i < files; ++i) {
    std::string name = "many-" + std::to_string(i) + ".safetensors";
    g_many.push_back(open_or_fail(path_in_dir(name.c_str()), O_WRONLY | O_CREAT | O_TRUNC));
  }
  setup_guarded_cycle();
}
void teardown_guarded_cycle_many() {
  for (size_t i = 0; i < g_many.size(); ++i) {
    close(g_many[i]);
    unlink(path_in_dir(("many-" + std::to_string(i) + ".safetensors").c_str()).c_str());
  }
  g_many.clear();
}

// Many files: one operation opens 10,000 (or COUNT) guarded files (O_WRONLY|O_CREAT|O_TRUNC), writes 64 B
// to each while all are open, then closes them all (issue 27: a job writing many shards at once).
std::vector<std::string> g_many_paths;
void setup_many_files() {
  const long files = g_count >= 0 ? g_count : kManyFiles;
  raise_descriptor_limit(files);
  for (long i = 0; i < files; ++i)
    g_many_paths.push_back(path_in_dir(("f-" + std::to_string(i) + ".safetensors").c_str()));
  g_many.resize(g_many_paths.size());
}
void run_many_files(long n) {
  for (long i = 0; i < n; ++i) {
    for (size_t f = 0; f < g_many_paths.size(); ++f) {
      g_many[f] = open(g_many_paths[f].c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (g_many[f] < 0) fail(g_many_paths[f].c_str());
      ssize_t w = write(g_many[f], g_buffer, sizeof g_buffer);
      if (w != static_cast<ssize_t>(sizeof g_buffer)) fail_short(w);
    }
    for (int fd : g_many) close(fd);
  }
}
void teardown_many_files() {
  for (const std::string& path : g_many_paths) unlink(path.c_str());
  g_many_paths.clear();
  g_many.clear();
}

// fork + exec of /bin/true with 5,000 (or COUNT) inherited descriptors of an unguarded file and one of a
// guarded file (issue 27: the new program's start-up must not grow with the descriptors it inherits).
// BENCH_HOOKS_EXEC, when set, is the program run instead (words split at spaces: scripts/bench counts
// the new program's instructions with `valgrind --tool=callgrind ... /bin/true`).
constexpr long kInheritedDescriptors = 5'000;
std::vector<int> g_inherited;
std::vector<std::string> g_exec_words;
std::vector<char*> g_exec_argv;
void setup_exec_inherited() {
  const long count = g_count >= 0 ? g_count : kInheritedDescriptors;
  raise_descriptor_limit(count);
  if (count > 0) g_inherited.push_back(open_or_fail(path_in_dir("u.bin"), O_WRONLY | O_CREAT));
  for (long i = 1; i < count; ++i) {
    int fd = dup(g_inherited[0]);
    if (fd < 0) fail("dup");
    g_inherited.push_back(fd);
  }
  g_fd = open_or_fail(path_in_dir("t.safetensors"), O_RDWR | O_CREAT);
  const char* words = getenv("BENCH_HOOKS_EXEC");
  std::string text = words && *words ? words : "/bin/true";
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) g_exec_words.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  for (std::string& word : g_exec_words) g_exec_argv.push_back(word.data());
  g_exec_argv.push_back(nullptr);
}
void run_exec_inherited(long n) {
  for (long i = 0; i < n; ++i) {
    pid_t child = fork();
    if (child < 0) fail("fork");
    if (child == 0) {
      execv(g_exec_argv[0], g_exec_argv.data());
      _exit(127);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child) fail("waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "bench_hooks: %s exited with status %d\n", g_exec_argv[0], status);
      exit(2);
    }
  }
}
void teardown_exec_inherited() {
  for (int fd : g_inherited) close(fd);
  g_inherited.clear();
  close_fd();
}

// A write open of an unmatched name given relative to the working directory (issue 27: made absolute
// only when a mount must be looked up).
void setup_plain_write_relative() {
  create_file("x.bin");
  if (chdir(g_dir.c_str()) != 0) fail("chdir");
  g_open_path = "x.bin";
}

void open_tracked() {
  g_fd = open_or_fail(path_in_dir("bench.safetensors"), O_RDWR | O_CREAT | O_TRUNC);
}
void reopen_tracked() {
  close_fd();
  open_tracked();
}
template <size_t kSize>
void run_tracked_write(long n) {
  const char* data = kSize <= sizeof g_buffer ? g_buffer : g_big.data();
  for (long i = 0; i < n; ++i) {
    ssize_t w = write(g_fd, data, kSize);
    if (w != static_cast<ssize_t>(kSize)) fail_short(w);
  }
}

// The same with a second thread alive (blocked on a pipe), as in any threaded program: the library then
// takes the file's lock around each write.
int g_idle_pipe[2] = {-1, -1};
std::thread* g_idle_thread = nullptr;
void open_tracked_with_thread() {
  if (pipe(g_idle_pipe) != 0) fail("pipe");
  g_idle_thread = new std::thread([] {
    char c;
    (void)!read(g_idle_pipe[0], &c, 1);
  });
  open_tracked();
}
void close_tracked_with_thread() {
  close_fd();
  (void)!write(g_idle_pipe[1], "x", 1);
  g_idle_thread->join();
  delete g_idle_thread;
  close(g_idle_pipe[0]);
  close(g_idle_pipe[1]);
}

void setup_fwrite() {
  g_file = fopen("/dev/null", "w");
  if (!g_file) fail("fopen /dev/null");
}
void run_fwrite(long n) {
  for (long i = 0; i < n; ++i) {
    if (fwrite(g_buffer, sizeof g_buffer, 1, g_file) != 1) fail("fwrite");
  }
  if (fflush(g_file) != 0) fail("fflush");
}
void teardown_fwrite() {
  fclose(g_file);
  g_file = nullptr;
}

void setup_lseek() {
  setup_plain_read();
  g_fd = open_or_fail(g_open_path, O_RDONLY);
}
void run_lseek(long n) {
  for (long i = 0; i < n; ++i) {
    if (lseek(g_fd, 0, SEEK_CUR) != 0) fail("lseek");
  }
}

void nothing() {}

constexpr long kNoBatch = 0;

const Case kCases[] = {
    {"write_devnull", "1.02", 800'000, kNoBatch, "untracked write(fd, buf, 1) to /dev/null", setup_dev_null,
     run_write_1, nullptr, close_fd},
    {"open_close_read", "1.03", 60'000, kNoBatch, "untracked open(plain.bin, O_RDONLY) + close on tmpfs",
     setup_plain_read, run_open_close<O_RDONLY>, nullptr, nothing},
    {"open_close_write", "1.03", 60'000, kNoBatch,
     "untracked open(x.bin, O_WRONLY) + close on tmpfs (pattern match on the open path)", setup_plain_write,
     run_open_close<O_WRONLY>, nullptr, nothing},
    {"open_close_write_relative", "1.03", 60'000, kNoBatch,
     "untracked open(x.bin, O_WRONLY) + close, the name relative to the working directory",
     setup_plain_write_relative, run_open_close<O_WRONLY>, nullptr, nothing},
    {"guarded_cycle", "1.10", 20'000, kNoBatch,
     "open(cycle.safetensors, O_WRONLY|O_CREAT|O_TRUNC) + 64 B write + close on tmpfs: a guarded file's life",
     setup_guarded_cycle, run_guarded_cycle, nullptr, nothing},
    {"guarded_cycle_10k", "1.10", 20'000, kNoBatch, "guarded_cycle with 10,000 other guarded files open",
     setup_guarded_cycle_many, run_guarded_cycle, nullptr, teardown_guarded_cycle_many},
    {"many_files", "1.10", 10, kNoBatch,
     "10,000 guarded files opened, 64 B written to each while all are open, all closed (one op: all of them)",
     setup_many_files, run_many_files, nullptr, teardown_many_files},
    {"exec_inherited", "1.50", 40, kNoBatch,
     "fork + exec of /bin/true with 5,000 inherited descriptors of an unguarded file and one guarded",
     setup_exec_inherited, run_exec_inherited, nullptr, teardown_exec_inherited},
    {"tracked_write_64", "1.07", 200'000, 100'000,
     "tracked 64 B writes to bench.safetensors on tmpfs, opened O_RDWR|O_CREAT|O_TRUNC", open_tracked,
     run_tracked_write<64>, reopen_tracked, close_fd},
    {"tracked_write_64_threaded", "1.07", 200'000, 100'000,
     "the same with a second thread alive, so every write takes the file's lock", open_tracked_with_thread,
     run_tracked_write<64>, reopen_tracked, close_tracked_with_thread},
    {"tracked_write_1m", "1.01", 400, 128, "tracked 1 MiB writes to bench.safetensors on tmpfs", open_tracked,
     run_tracked_write<1 << 20>, reopen_tracked, close_fd},
    {"fwrite_untracked", "1.02", 10'000'000, kNoBatch,
     "untracked fwrite of 64 B to a FILE* on /dev/null, fflush at the end", setup_fwrite, run_fwrite, nullptr,
     teardown_fwrite},
    {"lseek_cur", "1.02", 1'000'000, kNoBatch, "untracked lseek(fd, 0, SEEK_CUR) on plain.bin", setup_lseek,
     run_lseek, nullptr, close_fd},
};

}  // namespace

// Everything timed runs inside this function: callgrind counts it alone with --toggle-collect.
extern "C" __attribute__((noinline)) void appendguard_bench_measured(const Case* c, long n) {
  c->run(n);
}

namespace {

const Case* find_case(const char* name) {
  for (const Case& c : kCases) {
    if (strcmp(c.name, name) == 0) return &c;
  }
  return nullptr;
}

double now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

void make_dir() {
  const char* base =
      access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  std::string pattern = std::string(base) + "/appendguard-bench-XXXXXX";
  if (!mkdtemp(pattern.data())) fail("mkdtemp");
  g_dir = pattern;
}

void remove_dir() {
  for (const char* name :
       {"plain.bin", "x.bin", "bench.safetensors", "cycle.safetensors", "u.bin", "t.safetensors"})
    unlink(path_in_dir(name).c_str());
  rmdir(g_dir.c_str());
}

struct SliceTimes {
  double median_ns_per_op;
  double mean_ns_per_op;
};

// The iterations run in kSlices timed slices; the median slice is what the child reports, so that a
// preemption by another process costs one slice, not the round. `rearm` runs, untimed, before a slice
// that would take the file past `batch` operations.
constexpr long kSlices = 10;

SliceTimes run_slices(const Case& c, long iterations) {
  std::vector<double> per_op;
  double total_ns = 0;
  long since_rearm = 0;
  for (long done = 0; done < iterations;) {
    long remaining = iterations - done;
    long n = std::min(remaining, std::max(1L, iterations / kSlices));
    if (remaining - n < n) n = remaining;  // fold a short tail into the last slice
    if (c.rearm && c.batch > 0 && since_rearm > 0 && since_rearm + n > c.batch) {
      c.rearm();
      since_rearm = 0;
    }
    double start = now_ns();
    appendguard_bench_measured(&c, n);
    double elapsed = now_ns() - start;
    total_ns += elapsed;
    per_op.push_back(elapsed / static_cast<double>(n));
    done += n;
    since_rearm += n;
  }
  std::sort(per_op.begin(), per_op.end());
  size_t mid = per_op.size() / 2;
  double median = per_op.size() % 2 ? per_op[mid] : (per_op[mid - 1] + per_op[mid]) / 2;
  return {median, total_ns / static_cast<double>(iterations)};
}

int usage(FILE* out, int status) {
  fprintf(out, "usage: bench_hooks CASE ITERATIONS [COUNT] | bench_hooks --list\ncases:\n");
  for (const Case& c : kCases) fprintf(out, "  %-18s %s\n", c.name, c.description);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (const Case& c : kCases) printf("%s %s %ld %s\n", c.name, c.budget, c.iterations, c.description);
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--help") == 0) return usage(stdout, 0);
  if (argc != 3 && argc != 4) return usage(stderr, 2);
  const Case* c = find_case(argv[1]);
  long iterations = strtol(argv[2], nullptr, 10);
  if (!c || iterations <= 0) return usage(stderr, 2);
  if (argc == 4) {
    char* end = nullptr;
    g_count = strtol(argv[3], &end, 10);
    if (*argv[3] == '\0' || *end != '\0' || g_count < 0) return usage(stderr, 2);
  }

  make_dir();
  c->setup();
  c->run(iterations / 20 + 1);  // warm-up: resolve symbols, fault in buffers, settle the CPU clock
  if (c->rearm) c->rearm();
  SliceTimes times = run_slices(*c, iterations);
  c->teardown();
  remove_dir();
  printf("ns_per_op=%.3f\nmean_ns_per_op=%.3f\n", times.median_ns_per_op, times.mean_ns_per_op);
  return 0;
}
