#include "cli/timeline.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <unordered_map>

#include "cli/json_value.h"

namespace appendguard {
namespace {

constexpr std::string_view kTrace = "appendguard: trace: ";
constexpr std::string_view kSummary = "appendguard: summary: ";

// One trace line, from either format.
struct TraceLine {
  std::string pid;
  std::string tid;
  std::string operation;
  int fd = -1;
  std::string path;
  std::string detail;
  std::string result;
  double time = -1;
};

uint64_t to_unsigned(std::string_view text) {
  uint64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

double to_double(std::string_view text) {
  // "S.UUUUUU": whole seconds and a fraction, without locale-dependent parsing.
  size_t dot = text.find('.');
  double value = static_cast<double>(to_unsigned(text.substr(0, dot)));
  if (dot == std::string_view::npos) return value;
  std::string_view fraction = text.substr(dot + 1);
  double scale = 0.1;
  for (char c : fraction) {
    if (c < '0' || c > '9') break;
    value += (c - '0') * scale;
    scale /= 10;
  }
  return value;
}

// The value of `name=` in a detail ("bytes=64 offset=0 ..."), as written, or nullopt.
std::optional<std::string_view> field(std::string_view detail, std::string_view name) {
  size_t at = 0;
  while ((at = detail.find(name, at)) != std::string_view::npos) {
    if ((at == 0 || detail[at - 1] == ' ') && detail.substr(at + name.size(), 1) == "=") {
      size_t start = at + name.size() + 1;
      size_t end = detail.find(' ', start);
      return detail.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    }
    at += name.size();
  }
  return std::nullopt;
}

// A value after `key=` of a summary line ("pid=1 rank=0 host=h ...").
std::string summary_field(std::string_view line, std::string_view name) {
  std::optional<std::string_view> value = field(line, name);
  return value ? std::string(*value) : std::string();
}

std::optional<TraceLine> text_trace(std::string_view line) {
  if (!line.starts_with(kTrace)) return std::nullopt;
  std::string_view rest = line.substr(kTrace.size());
  TraceLine t;
  auto word = [&]() {
    size_t space = rest.find(' ');
    std::string_view w = rest.substr(0, space);
    rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    return w;
  };
  std::string_view pid = word();
  std::string_view tid = word();
  if (!pid.starts_with("pid=") || !tid.starts_with("tid=")) return std::nullopt;
  t.pid = std::string(pid.substr(4));
  t.tid = std::string(tid.substr(4));
  t.operation = std::string(word());
  std::string_view fd = word();
  if (!fd.starts_with("fd=")) return std::nullopt;
  std::from_chars(fd.data() + 3, fd.data() + fd.size(), t.fd);
  size_t used = read_escaped_path(rest, t.path);
  if (used == 0 && !rest.starts_with(' ')) return std::nullopt;
  rest = rest.substr(std::min(rest.size(), used + 1));
  if (rest.starts_with("time=")) {
    std::string_view time = word().substr(5);
    t.time = to_double(time);
  }
  size_t arrow = rest.rfind(" -> ");
  if (arrow == std::string_view::npos) return std::nullopt;
  t.detail = std::string(rest.substr(0, arrow));
  t.result = std::string(rest.substr(arrow + 4));
  return t;
}

std::optional<TraceLine> json_trace(const JsonValue& v) {
  TraceLine t;
  t.pid = v.text_of("pid");
  t.tid = v.text_of("tid");
  t.operation = v.text_of("operation");
  std::string fd = v.text_of("fd");
  std::from_chars(fd.data(), fd.data() + fd.size(), t.fd);
  t.path = v.text_of("path");
  t.detail = v.text_of("detail");
  t.result = v.text_of("result");
  if (std::string error = v.text_of("errno"); !error.empty()) t.result += " " + error;
  if (std::string time = v.text_of("time"); !time.empty()) t.time = to_double(time);
  return t;
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

FileEvent event_of(const TraceLine& t) {
  FileEvent e;
  e.operation = t.operation;
  e.pid = t.pid;
  e.tid = t.tid;
  e.fd = t.fd;
  e.time = t.time;
  e.detail = t.detail;
  e.result = t.result;
  bool failed = t.result.starts_with("-1");
  std::string_view d = t.detail;
  auto number = [&](std::string_view name) {
    std::optional<std::string_view> value = field(d, name);
    return value ? to_unsigned(*value) : uint64_t{0};
  };
  if (contains(t.operation, "seek")) {
    e.kind = EventKind::kSeek;
    e.offset = failed ? 0 : to_unsigned(t.result);
    e.end_of_file = number("end_of_file");
    e.has_end = field(d, "end_of_file").has_value();
  } else if (field(d, "bytes") && field(d, "offset") && field(d, "end_of_file")) {
    e.kind = failed || contains(d, "(refused)") ? EventKind::kRefused : EventKind::kWrite;
    e.offset = number("offset");
    e.bytes = e.kind == EventKind::kWrite ? to_unsigned(t.result) : number("bytes");
    e.end_of_file = number("end_of_file");
    e.has_end = e.kind == EventKind::kWrite;
  } else if (t.operation == "prealloc-fill") {
    e.kind = EventKind::kFill;
    e.offset = number("at");
    e.bytes = number("zeros");
    e.end_of_file = e.offset + e.bytes;
    e.has_end = !failed;
  } else if (contains(d, "(deferred: not sent)")) {
    e.kind = EventKind::kDeferred;
    std::optional<std::string_view> size = field(d, "size");  // "before->after"
    if (size) {
      size_t arrow = size->find("->");
      e.offset = to_unsigned(size->substr(0, arrow));
      e.end_of_file = arrow == std::string_view::npos ? e.offset : to_unsigned(size->substr(arrow + 2));
      e.bytes = e.end_of_file > e.offset ? e.end_of_file - e.offset : 0;
    }
  } else if (d.starts_with("flags=")) {
    e.kind = field(d, "effective") ? EventKind::kOpen : EventKind::kOther;
    e.end_of_file = number("size");
    e.has_end = e.kind == EventKind::kOpen && !failed;
  } else if (contains(t.operation, "truncate") || contains(t.operation, "fallocate")) {
    e.kind = EventKind::kTruncate;
    e.offset = number("offset") + number("length");
    if (contains(t.operation, "truncate")) e.offset = number("length");
    e.end_of_file = e.offset;
    e.has_end = !failed && !contains(d, "not sent") && contains(t.operation, "truncate");
    if (failed) e.kind = EventKind::kRefused;
  } else if (contains(d, "held session committed")) {
    e.kind = EventKind::kCommit;
  } else if (d.starts_with("held:")) {
    e.kind = EventKind::kHeld;
  } else if (t.operation == "close" || t.operation == "fclose") {
    e.kind = EventKind::kClose;
  }
  return e;
}

FileTimeline& file_of(Timelines& out, const std::string& path) {
  auto [it, added] = out.index.emplace(path, out.files.size());
  if (added) {
    out.files.push_back(FileTimeline{});
    out.files.back().path = path;
  }
  return out.files[it->second];
}

constexpr size_t kLogStride = size_t{1} << 40;  // a log's place in `order`: beyond any log's size

}  // namespace

const char* kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::kWrite:
      return "write";
    case EventKind::kRefused:
      return "refused";
    case EventKind::kSeek:
      return "seek";
    case EventKind::kOpen:
      return "open";
    case EventKind::kTruncate:
      return "truncate";
    case EventKind::kDeferred:
      return "deferred";
    case EventKind::kFill:
      return "fill";
    case EventKind::kCommit:
      return "commit";
    case EventKind::kHeld:
      return "held";
    case EventKind::kClose:
      return "close";
    case EventKind::kOther:
      return "other";
  }
  return "other";
}

std::optional<BadRecord> add_log(std::string_view log, std::string_view log_name, size_t log_index,
                                 Timelines& out) {
  size_t first_report = out.reports.size();
  std::optional<BadRecord> bad = collect_violations(log, out.groups, log_name, &out.reports);
  // (place in the log, time) of each timed line, for the reports' times.
  std::vector<std::pair<size_t, double>> times;
  size_t at = 0;
  while (at < log.size()) {
    size_t end = log.find('\n', at);
    std::string_view line = log.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    size_t line_start = at;
    at = end == std::string_view::npos ? log.size() : end + 1;
    std::optional<TraceLine> trace;
    if (line.size() > kMaxRecordLine)
      continue;  // not a record (collect_violations said so if it looked like one)
    if (line.starts_with('{')) {
      std::optional<JsonValue> v = parse_json(line);
      if (!v || v->kind != JsonValue::Kind::kObject) continue;
      std::string type = v->text_of("type");
      if (type == "trace") {
        trace = json_trace(*v);
      } else if (type == "summary") {
        Writer& w = out.processes[v->text_of("pid")];
        w.rank = v->text_of("rank");
        w.host = v->text_of("host");
      }
    } else if (line.starts_with(kSummary)) {
      std::string_view fields = line.substr(kSummary.size());
      Writer& w = out.processes[summary_field(fields, "pid")];
      w.rank = summary_field(fields, "rank");
      w.host = summary_field(fields, "host");
    } else {
      trace = text_trace(line);
    }
    if (!trace || trace->path.empty()) continue;
    trace->path = bounded_field(trace->path);
    trace->detail = bounded_field(trace->detail);
    trace->result = bounded_field(trace->result);
    FileEvent e = event_of(*trace);
    e.order = log_index * kLogStride + line_start;
    if (e.time >= 0) times.emplace_back(line_start, e.time);
    file_of(out, trace->path).events.push_back(std::move(e));
  }
  for (size_t i = first_report; i < out.reports.size(); ++i) {
    ViolationReport& r = out.reports[i];
    Writer& w = out.processes[r.pid];
    if (w.rank.empty()) w.rank = r.rank;
    FileEvent e;
    e.kind = EventKind::kRefused;
    e.operation = r.operation;
    e.pid = r.pid;
    e.offset = to_unsigned(r.offset);
    e.bytes = to_unsigned(r.bytes);
    e.end_of_file = to_unsigned(r.end_of_file);
    e.report = static_cast<long>(i);
    e.order = log_index * kLogStride + r.at;
    // The time of the last timed line before it in this log (its trace line, when the write was traced).
    auto later = std::upper_bound(times.begin(), times.end(), std::make_pair(r.at, 1e300));
    if (later != times.begin()) e.time = std::prev(later)->second;
    // Kept aside: matched with a traced refusal by finish(), else drawn by itself.
    file_of(out, r.path).events.push_back(std::move(e));
  }
  return bad;
}

namespace {

// Whether a traced call of `kind` can be the one a report with `outcome` is about: a refused call's trace
// line says "(refused)" (a write of the same offset that went through is another call); a call let
// through, or allowed in audit mode, was traced as carried out.
bool traced_as(EventKind kind, std::string_view outcome) {
  const bool refused = outcome == "refused" || outcome == "aborted" || outcome == "kernel_refuses";
  switch (kind) {
    case EventKind::kRefused:
      return refused || outcome.empty();
    case EventKind::kWrite:
    case EventKind::kDeferred:
      return !refused;
    case EventKind::kOpen:
    case EventKind::kTruncate:
      return true;
    default:
      return false;
  }
}

uint64_t distance(size_t a, size_t b) {
  return a > b ? a - b : b - a;
}

// Whether `e` is nearer the report `r` in the logs than `best` (a report is written just before its
// call's trace line).
bool closer(const FileEvent& e, const FileEvent& best, const FileEvent& r) {
  return distance(e.order, r.order) < distance(best.order, r.order);
}

}  // namespace

void finish(Timelines& out) {
  std::vector<FileTimeline> kept;
  for (FileTimeline& f : out.files) {
    // A report joins the traced call it is about (same process, operation and offset), when there is one.
    std::vector<FileEvent> events;
    std::vector<FileEvent> reports;
    for (FileEvent& e : f.events) (e.report >= 0 ? reports : events).push_back(std::move(e));
    // The candidates of a report, looked up by process and operation (and offset): linear in the events.
    std::unordered_map<std::string, std::vector<size_t>> by_call;
    std::unordered_map<std::string, std::vector<size_t>> by_offset;
    auto call_key = [](const FileEvent& e) { return e.pid + '\0' + e.operation; };
    auto offset_key = [](const FileEvent& e) {
      return e.pid + '\0' + e.operation + '\0' + std::to_string(e.offset);
    };
    if (!reports.empty()) {
      for (size_t i = 0; i < events.size(); ++i) {
        by_offset[offset_key(events[i])].push_back(i);
        if (events[i].kind == EventKind::kOpen) by_call[call_key(events[i])].push_back(i);
      }
    }
    std::vector<size_t> all_of_call;
    const size_t traced = events.size();
    for (FileEvent& r : reports) {
      const ViolationReport& report = out.reports[static_cast<size_t>(r.report)];
      FileEvent* match = nullptr;
      auto consider = [&](size_t i) {
        FileEvent& e = events[i];
        if (e.report < 0 && e.pid == r.pid && e.operation == r.operation &&
            (report.offset.empty() || e.offset == r.offset || e.kind == EventKind::kOpen) &&
            traced_as(e.kind, report.outcome) && (!match || closer(e, *match, r))) {
          match = &e;
        }
      };
      if (report.offset.empty()) {
        for (size_t i = 0; i < traced; ++i) consider(i);  // a report without an offset: rare, any call
      } else {
        if (auto it = by_offset.find(offset_key(r)); it != by_offset.end())
          for (size_t i : it->second) consider(i);
        if (auto it = by_call.find(call_key(r)); it != by_call.end())
          for (size_t i : it->second) consider(i);
      }
      if (match) {
        match->report = r.report;
      } else {
        events.push_back(std::move(r));
      }
    }
    f.events = std::move(events);
    bool guarded = false;
    f.timed = !f.events.empty();
    for (const FileEvent& e : f.events) {
      guarded = guarded || e.kind == EventKind::kWrite || e.kind == EventKind::kRefused ||
                e.kind == EventKind::kOpen || e.kind == EventKind::kTruncate ||
                e.kind == EventKind::kDeferred || e.report >= 0;
      f.timed = f.timed && e.time >= 0;
    }
    if (!guarded) {
      ++out.read_only_files;
      continue;
    }
    std::stable_sort(f.events.begin(), f.events.end(), [&](const FileEvent& a, const FileEvent& b) {
      if (f.timed && a.time != b.time) return a.time < b.time;
      return a.order < b.order;
    });
    std::unordered_map<std::string, size_t> writer_index;
    for (const FileEvent& e : f.events) {
      if (e.kind == EventKind::kRefused || e.report >= 0) ++f.refusals;
      bool wrote = e.kind == EventKind::kWrite;  // as the summary at exit counts: a zero fill is not a write
      if (!wrote && e.kind != EventKind::kRefused) continue;
      // A writer: a process that wrote, or tried to.
      auto [known, added] = writer_index.emplace(e.pid, f.writers.size());
      if (added) f.writers.push_back(Writer{e.pid, "", "", 0, 0});
      auto w = f.writers.begin() + static_cast<std::ptrdiff_t>(known->second);
      if (!wrote) continue;
      ++f.writes;
      f.bytes += e.bytes;
      ++w->writes;
      w->bytes += e.bytes;
    }
    for (Writer& w : f.writers) {
      auto p = out.processes.find(w.pid);
      if (p != out.processes.end()) {
        w.rank = p->second.rank;
        w.host = p->second.host;
      }
    }
    kept.push_back(std::move(f));
  }
  out.files = std::move(kept);
  out.index.clear();
}

}  // namespace appendguard
