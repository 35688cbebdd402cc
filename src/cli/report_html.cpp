#include "cli/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "cli/printable.h"

namespace appendguard {
namespace {

// The plot area of a timeline, in SVG units.
constexpr double kWidth = 960;
constexpr double kHeight = 258;
constexpr double kLeft = 78;
constexpr double kRight = 944;
constexpr double kTop = 14;
constexpr double kBottom = 214;
constexpr size_t kMaxRefusalRows = 100;  // per file, in the table under its timeline

constexpr const char* kStyle = R"css(
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 4px;word-break:break-all}
.muted{color:#667085}table{border-collapse:collapse;margin:8px 0 12px}
th,td{border:1px solid #d0d5dd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f2f4f7}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;word-break:break-all}
.bad{color:#b42318;font-weight:600}.ok{color:#067647;font-weight:600}
section.file{border-top:1px solid #eaecf0;margin-top:18px}
svg.timeline{display:block;width:100%;max-width:960px;height:auto;border:1px solid #eaecf0;background:#fcfcfd}
svg .axis{stroke:#98a2b3;stroke-width:1}svg text{font:11px system-ui,sans-serif;fill:#475467}
svg .span.write{fill:#2e90fa;fill-opacity:.85}svg .span.write.w1{fill:#12b76a}svg .span.write.w2{fill:#7a5af8}
svg .span.write.w3{fill:#f79009}svg .span.fill{fill:#98a2b3}
svg .span.refused{fill:#f04438;stroke:#912018;stroke-width:1}
svg .eof{fill:none;stroke:#101828;stroke-width:1.5;stroke-dasharray:5 3}
svg .seek{fill:#fff;stroke:#344054;stroke-width:1.5}svg .open{stroke:#667085;stroke-width:1;stroke-dasharray:2 3}
svg .open.reopen{stroke:#344054;stroke-dasharray:6 3}svg .truncate{stroke:#dc6803;stroke-width:2.5}
svg .deferred{fill:url(#hatch);stroke:#dc6803;stroke-width:1}svg .commit{stroke:#079455;stroke-width:2}
svg .held{fill:#079455}svg .refusal-mark{fill:#f04438}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:14px;height:10px;
margin-right:4px;vertical-align:middle}
details{margin:6px 0}pre{white-space:pre-wrap;margin:2px 0}
)css";

std::string number(uint64_t value) {
  return std::to_string(value);
}

std::string human_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  }
  return text;
}

std::string fixed(double value, int decimals) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// "+12.345 ms" below a second, "+1.234567 s" above.
std::string since(double seconds) {
  return seconds < 1 ? "+" + fixed(seconds * 1000, 3) + " ms" : "+" + fixed(seconds, 6) + " s";
}

// A mark of the timeline: one event, or a run of writes merged into one span.
struct Mark {
  const FileEvent* first = nullptr;
  double time_start = 0;  // x position source: seconds, or the ordinal
  double time_end = 0;
  uint64_t low = 0;  // the offsets it covers
  uint64_t high = 0;
  size_t writes = 1;
  bool contiguous = true;  // a run of adjacent appends (else merged to keep the page usable)
};

bool is_write(const FileEvent& e) {
  return (e.kind == EventKind::kWrite || e.kind == EventKind::kFill) && e.report < 0;
}

bool is_refusal(const FileEvent& e) {
  return e.kind == EventKind::kRefused || e.report >= 0;
}

// A seek that asks where the position is (lseek(fd, 0, SEEK_CUR), tell()): not drawn.
bool is_query(const FileEvent& e) {
  return e.kind == EventKind::kSeek && e.detail.starts_with("offset=0 whence=1");
}

bool drawn_kind(const FileEvent& e) {
  switch (e.kind) {
    case EventKind::kClose:
    case EventKind::kOther:
      return e.report >= 0;
    default:
      return !is_query(e);
  }
}

struct Layout {
  std::vector<Mark> marks;
  size_t merged_appends = 0;   // writes drawn as part of another's span (adjacent appends)
  size_t merged_for_cap = 0;   // further merged to stay under the cap
  size_t queries = 0;          // position queries not drawn
  size_t not_drawn_other = 0;  // closes, fsyncs, dups... (in the trace, not drawn)
  size_t left_out = 0;         // seeks and opens left out by the cap
  std::map<std::string, size_t> other_names;
};

Layout lay_out(const FileTimeline& f, size_t max_drawn) {
  Layout layout;
  for (size_t i = 0; i < f.events.size(); ++i) {
    const FileEvent& e = f.events[i];
    double t = f.timed ? e.time : static_cast<double>(i);
    if (!drawn_kind(e)) {
      if (is_query(e)) {
        ++layout.queries;
      } else {
        ++layout.not_drawn_other;
        ++layout.other_names[e.operation];
      }
      continue;
    }
    if (is_write(e) && !layout.marks.empty()) {
      Mark& last = layout.marks.back();
      const FileEvent& prev = *last.first;
      if (is_write(prev) && prev.pid == e.pid && prev.fd == e.fd && last.contiguous &&
          last.high == e.offset && e.kind == prev.kind) {
        last.high = e.offset + e.bytes;
        last.time_end = t;
        ++last.writes;
        ++layout.merged_appends;
        continue;
      }
    }
    Mark m;
    m.first = &e;
    m.time_start = m.time_end = t;
    m.low = e.offset;
    m.high = e.offset + e.bytes;
    layout.marks.push_back(m);
  }
  if (layout.marks.size() <= max_drawn) return layout;
  // Over the cap: runs of write marks become one mark each of `per` writes at most, and seeks and opens
  // beyond what is left of the cap are left out. Refusals are always drawn.
  size_t refusals = 0;
  size_t writes = 0;
  for (const Mark& m : layout.marks) {
    refusals += is_refusal(*m.first);
    writes += is_write(*m.first);
  }
  size_t write_budget = std::max<size_t>(1, max_drawn / 2);
  size_t per = (writes + write_budget - 1) / write_budget;
  size_t other_budget = max_drawn > write_budget + refusals ? max_drawn - write_budget - refusals : 0;
  std::vector<Mark> kept;
  size_t others = 0;
  size_t in_run = 0;
  for (const Mark& m : layout.marks) {
    if (is_write(*m.first)) {
      if (!kept.empty() && is_write(*kept.back().first) && in_run < per) {
        Mark& last = kept.back();
        last.low = std::min(last.low, m.low);
        last.high = std::max(last.high, m.high);
        last.time_end = m.time_end;
        last.writes += m.writes;
        last.contiguous = false;
        layout.merged_for_cap += m.writes;
        ++in_run;
        continue;
      }
      in_run = 1;
      kept.push_back(m);
      continue;
    }
    in_run = 0;
    if (is_refusal(*m.first) || others++ < other_budget) {
      kept.push_back(m);
    } else {
      ++layout.left_out;
    }
  }
  layout.marks = std::move(kept);
  return layout;
}

// Marks side by side in time order, one slot each (x), so that a burst of writes and a pause of seconds
// both stay readable; ticks under the axis give the times. Offsets upwards (y).
class Plot {
 public:
  Plot(size_t marks, uint64_t top)
      : slot_((kRight - kLeft) / static_cast<double>(marks ? marks : 1)), top_(top ? top : 1) {}
  double x(size_t mark) const { return kLeft + (static_cast<double>(mark) + 0.5) * slot_; }
  double slot() const { return slot_; }
  double y(uint64_t offset) const {
    return kBottom - static_cast<double>(offset) / static_cast<double>(top_) * (kBottom - kTop);
  }

 private:
  double slot_;
  uint64_t top_;
};

std::string writer_name(const Timelines& t, const std::string& pid) {
  auto p = t.processes.find(pid);
  std::string rank = p == t.processes.end() ? "" : p->second.rank;
  return (rank.empty() ? std::string("rank ?") : "rank " + rank) + " pid " + pid;
}

std::string event_text(const Timelines& t, const FileTimeline& f, const Mark& m, double t0) {
  const FileEvent& e = *m.first;
  std::string text;
  if (m.writes > 1) {
    text = number(m.writes) + (m.contiguous ? " adjacent appends" : " writes merged") + ", offsets " +
           number(m.low) + " to " + number(m.high) + " (" + human_bytes(m.high - m.low) + ")";
  } else {
    text = e.operation + " fd=" + std::to_string(e.fd) + (e.detail.empty() ? "" : " " + e.detail) +
           (e.result.empty() ? "" : " -> " + e.result);
  }
  text += "; " + writer_name(t, e.pid);
  if (f.timed) text += "; at " + since(m.time_start - t0);
  if (e.report >= 0) {
    const ViolationReport& r = t.reports[static_cast<size_t>(e.report)];
    text += "\n" + r.first_line;
    if (!r.site.empty()) text += "\nat: " + r.site;
  }
  return text;
}

void add_title(std::string& out, const std::string& text) {
  out += "<title>" + html_escape(text) + "</title>";
}

void draw_mark(std::string& out, const Timelines& t, const FileTimeline& f, const Layout& layout,
               const Plot& plot, size_t i, double t0, std::map<std::string, size_t>& writer_class,
               size_t& opens);

std::string svg_of(const Timelines& t, const FileTimeline& f, const Layout& layout, size_t index) {
  double t0 = f.timed && !f.events.empty() ? f.events.front().time : 0;
  uint64_t top = 1;
  for (const FileEvent& e : f.events) top = std::max({top, e.offset + e.bytes, e.end_of_file});
  Plot plot(layout.marks.size(), top);
  std::string out;
  out += "<svg class=\"timeline\" data-path=\"" + html_escape(f.path) + "\" data-index=\"" +
         std::to_string(index) + "\" viewBox=\"0 0 " + fixed(kWidth, 0) + " " + fixed(kHeight, 0) +
         "\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">";
  out +=
      "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"6\" fill=\"#fec84b\"/></pattern></defs>";
  // Axes: offsets up, time to the right.
  out += "<line class=\"axis\" x1=\"" + fixed(kLeft, 1) + "\" y1=\"" + fixed(kTop, 1) + "\" x2=\"" +
         fixed(kLeft, 1) + "\" y2=\"" + fixed(kBottom, 1) + "\"/>";
  out += "<line class=\"axis\" x1=\"" + fixed(kLeft, 1) + "\" y1=\"" + fixed(kBottom, 1) + "\" x2=\"" +
         fixed(kRight, 1) + "\" y2=\"" + fixed(kBottom, 1) + "\"/>";
  out +=
      "<text x=\"" + fixed(kLeft - 6, 1) + "\" y=\"" + fixed(kBottom, 1) + "\" text-anchor=\"end\">0</text>";
  out += "<text x=\"" + fixed(kLeft - 6, 1) + "\" y=\"" + fixed(kTop + 8, 1) + "\" text-anchor=\"end\">" +
         html_escape(human_bytes(top)) + "</text>";
  out += "<text x=\"" + fixed(kLeft - 6, 1) + "\" y=\"" + fixed((kTop + kBottom) / 2, 1) +
         "\" text-anchor=\"end\">offset</text>";
  // Up to seven ticks: the time of the mark there (seconds since the file's first event), else its place.
  size_t ticks = std::min<size_t>(7, layout.marks.size());
  bool milliseconds = f.timed && !layout.marks.empty() && layout.marks.back().time_end - t0 < 1;
  for (size_t k = 0; k < ticks; ++k) {
    size_t i = ticks == 1 ? 0 : k * (layout.marks.size() - 1) / (ticks - 1);
    const Mark& m = layout.marks[i];
    std::string label = !f.timed       ? "#" + number(i + 1)
                        : milliseconds ? "+" + fixed((m.time_start - t0) * 1000, 3) + " ms"
                                       : "+" + fixed(m.time_start - t0, 3) + " s";
    const char* anchor = k == 0 ? "start" : k + 1 == ticks ? "end" : "middle";
    out += "<line class=\"axis\" x1=\"" + fixed(plot.x(i), 1) + "\" y1=\"" + fixed(kBottom, 1) + "\" x2=\"" +
           fixed(plot.x(i), 1) + "\" y2=\"" + fixed(kBottom + 4, 1) + "\"/>";
    out += "<text x=\"" + fixed(plot.x(i), 1) + "\" y=\"" + fixed(kBottom + 24, 1) + "\" text-anchor=\"" +
           anchor + "\">" + html_escape(label) + "</text>";
  }
  out += "<text x=\"" + fixed((kLeft + kRight) / 2, 1) + "\" y=\"" + fixed(kBottom + 38, 1) +
         "\" text-anchor=\"middle\">" +
         (f.timed ? "operations in time order (ticks: time since the file's first operation)"
                  : "operations in the order of the logs (no time in these trace lines)") +
         "</text>";
  // The end of file, as a step line through every event that says where it is.
  std::string points;
  bool started = false;
  double last_y = 0;
  for (size_t i = 0; i < layout.marks.size(); ++i) {
    const Mark& m = layout.marks[i];
    const FileEvent& e = *m.first;
    if (!e.has_end) continue;
    uint64_t end = m.writes > 1 ? std::max(m.high, e.end_of_file) : e.end_of_file;
    double x = plot.x(i) + std::max(0.75, std::min(plot.slot() * 0.4, 14.0));  // a span's right edge
    double y = plot.y(end);
    if (started) points += fixed(x, 1) + "," + fixed(last_y, 1) + " ";
    points += fixed(x, 1) + "," + fixed(y, 1) + " ";
    started = true;
    last_y = y;
  }
  if (started) {
    points += fixed(kRight, 1) + "," + fixed(last_y, 1);
    out += "<polyline class=\"eof\" points=\"" + points + "\"><title>end of file</title></polyline>";
  }
  size_t opens = 0;
  std::map<std::string, size_t> writer_class;
  for (const Writer& w : f.writers) writer_class.emplace(w.pid, writer_class.size() % 4);
  // Three layers: seeks, opens and the like; the writes over them; the refusals on top.
  for (int layer = 0; layer < 3; ++layer) {
    for (size_t i = 0; i < layout.marks.size(); ++i) {
      const Mark& m = layout.marks[i];
      const FileEvent& e = *m.first;
      int layer_of = is_refusal(e) && e.kind != EventKind::kOpen                 ? 2
                     : e.kind == EventKind::kWrite || e.kind == EventKind::kFill ? 1
                                                                                 : 0;
      if (layer_of == layer) draw_mark(out, t, f, layout, plot, i, t0, writer_class, opens);
    }
  }
  out += "</svg>\n";
  return out;
}

void draw_mark(std::string& out, const Timelines& t, const FileTimeline& f, const Layout& layout,
               const Plot& plot, size_t i, double t0, std::map<std::string, size_t>& writer_class,
               size_t& opens) {
  {
    const Mark& m = layout.marks[i];
    const FileEvent& e = *m.first;
    double x = plot.x(i);
    std::string title = event_text(t, f, m, t0);
    if (is_refusal(e) && e.kind != EventKind::kOpen) {
      double y_high = plot.y(std::max(m.high, m.low + 1));
      double height = std::max(4.0, plot.y(m.low) - y_high);
      out += "<rect class=\"span refused\" data-offset=\"" + number(e.offset) + "\" data-bytes=\"" +
             number(e.bytes) + "\" data-operation=\"" + html_escape(e.operation) + "\" x=\"" +
             fixed(x - 2, 1) + "\" y=\"" + fixed(std::min(y_high, plot.y(m.low) - height), 1) +
             "\" width=\"5\" height=\"" + fixed(height, 1) + "\">";
      add_title(out, title);
      out += "</rect>";
      out += "<path class=\"refusal-mark\" d=\"M" + fixed(x, 1) + " " + fixed(kBottom + 2, 1) +
             " l-5 9 h10 z\"/>";
      return;
    }
    switch (e.kind) {
      case EventKind::kWrite:
      case EventKind::kFill: {
        double half = std::max(0.75, std::min(plot.slot() * 0.4, 14.0));
        x -= half;
        double x_end = x + 2 * half;
        double y_high = plot.y(m.high);
        double height = std::max(3.0, plot.y(m.low) - y_high);
        std::string cls =
            e.kind == EventKind::kFill ? "span fill" : "span write w" + std::to_string(writer_class[e.pid]);
        out += "<rect class=\"" + cls + "\" data-writes=\"" + number(m.writes) + "\" data-offset=\"" +
               number(m.low) + "\" data-end=\"" + number(m.high) + "\" data-pid=\"" + html_escape(e.pid) +
               "\" x=\"" + fixed(x, 1) + "\" y=\"" + fixed(std::min(y_high, plot.y(m.low) - height), 1) +
               "\" width=\"" + fixed(x_end - x, 1) + "\" height=\"" + fixed(height, 1) + "\">";
        add_title(out, title);
        out += "</rect>";
        break;
      }
      case EventKind::kSeek:
        out += "<circle class=\"seek\" cx=\"" + fixed(x, 1) + "\" cy=\"" + fixed(plot.y(e.offset), 1) +
               "\" r=\"2.5\">";
        add_title(out, title);
        out += "</circle>";
        break;
      case EventKind::kOpen: {
        bool reopen = opens++ > 0;
        out += std::string("<line class=\"open") + (reopen ? " reopen" : "") + "\" x1=\"" + fixed(x, 1) +
               "\" y1=\"" + fixed(kTop, 1) + "\" x2=\"" + fixed(x, 1) + "\" y2=\"" + fixed(kBottom, 1) +
               "\">";
        add_title(out, (reopen ? "reopen: " : "open: ") + title);
        out += "</line>";
        break;
      }
      case EventKind::kTruncate:
        out += "<line class=\"truncate\" x1=\"" + fixed(x - 6, 1) + "\" y1=\"" + fixed(plot.y(e.offset), 1) +
               "\" x2=\"" + fixed(x + 6, 1) + "\" y2=\"" + fixed(plot.y(e.offset), 1) + "\">";
        add_title(out, title);
        out += "</line>";
        break;
      case EventKind::kDeferred: {
        double y_high = plot.y(e.end_of_file);
        out += "<rect class=\"deferred\" x=\"" + fixed(x - 4, 1) + "\" y=\"" + fixed(y_high, 1) +
               "\" width=\"8\" height=\"" + fixed(std::max(1.5, plot.y(e.offset) - y_high), 1) + "\">";
        add_title(out, "deferred preallocation: " + title);
        out += "</rect>";
        break;
      }
      case EventKind::kCommit:
        out += "<line class=\"commit\" x1=\"" + fixed(x, 1) + "\" y1=\"" + fixed(kTop, 1) + "\" x2=\"" +
               fixed(x, 1) + "\" y2=\"" + fixed(kBottom, 1) + "\">";
        add_title(out, "held session committed: " + title);
        out += "</line>";
        break;
      case EventKind::kHeld:
        out += "<rect class=\"held\" x=\"" + fixed(x - 3, 1) + "\" y=\"" + fixed(kBottom - 6, 1) +
               "\" width=\"6\" height=\"6\">";
        add_title(out, "close held: " + title);
        out += "</rect>";
        break;
      default:
        break;
    }
  }
}

const char* kLegend =
    "<p class=\"legend muted\"><span><i style=\"background:#2e90fa\"></i>write (one colour per writer)</span>"
    "<span><i style=\"background:#f04438\"></i>refused / violation</span>"
    "<span><i style=\"border-top:2px dashed #101828;height:0\"></i>end of file</span>"
    "<span><i style=\"border:1.5px solid #344054;border-radius:6px;width:8px;height:8px\"></i>seek</span>"
    "<span><i style=\"border-left:1px dashed #344054;width:0\"></i>open / reopen</span>"
    "<span><i style=\"background:#dc6803;height:3px\"></i>truncation</span>"
    "<span><i style=\"background:#fec84b\"></i>deferred preallocation</span>"
    "<span><i style=\"background:#98a2b3\"></i>zero fill</span>"
    "<span><i style=\"background:#079455;width:3px\"></i>held session committed</span></p>\n";

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    auto byte = static_cast<unsigned char>(c);
    if (direction_control(text, i)) {
      out += printable(text.substr(i, 3));
      i += 2;
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if ((byte < 0x20 && c != '\n' && c != '\t') || byte == 0x7f) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", byte);
          out += hex;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string render_html(const Timelines& t, const HtmlOptions& options) {
  size_t writes = 0;
  uint64_t bytes = 0;
  size_t violations = 0;
  size_t fixed_by_enforce = 0;
  for (const FileTimeline& f : t.files) {
    writes += f.writes;
    bytes += f.bytes;
  }
  std::map<std::string, size_t> by_operation;
  for (const ViolationGroup& g : t.groups) {
    (g.fixed_by_enforce ? fixed_by_enforce : violations) += g.count;
    if (!g.fixed_by_enforce) by_operation[g.operation] += g.count;
  }
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
      "<title>appendguard report</title><style>";
  out += kStyle;
  out += "</style></head><body>\n<h1>appendguard report</h1>\n<p class=\"muted\">from ";
  for (size_t i = 0; i < options.logs.size(); ++i) {
    out += (i ? ", " : "") + std::string("<code>") + html_escape(options.logs[i]) + "</code>";
  }
  out +=
      "</p>\n<table class=\"summary\"><tr><th>files</th><th>writes</th><th>bytes</th><th>violations</th>"
      "<th>audit findings fixed by enforce mode</th></tr><tr>";
  out += "<td class=\"n\">" + number(t.files.size()) + "</td><td class=\"n\">" + number(writes) +
         "</td><td class=\"n\">" + html_escape(human_bytes(bytes)) + " (" + number(bytes) + ")</td>";
  out += std::string("<td class=\"n ") + (violations ? "bad" : "ok") + "\">" + number(violations) +
         "</td><td class=\"n\">" + number(fixed_by_enforce) + "</td></tr></table>\n";
  if (!by_operation.empty()) {
    out += "<p>violations by operation: ";
    bool first = true;
    for (const auto& [operation, count] : by_operation) {
      out +=
          (first ? "" : ", ") + std::string("<code>") + html_escape(operation) + "</code> " + number(count);
      first = false;
    }
    out += "</p>\n";
  }
  if (!t.groups.empty()) {
    out +=
        "<h2>Violations, grouped by call site (as <code>appendguard report</code>)</h2>\n"
        "<table class=\"groups\"><tr><th>count</th><th>operation</th><th>file</th><th>call site</th>"
        "<th>ranks</th><th>first report</th></tr>\n";
    for (size_t row = 0; row < t.groups.size() && row < options.max_group_rows; ++row) {
      const ViolationGroup& g = t.groups[row];
      std::string ranks;
      for (const std::string& r : g.ranks) ranks += (ranks.empty() ? "" : ",") + r;
      out += std::string("<tr><td class=\"n") + (g.fixed_by_enforce ? "" : " bad") + "\">" + number(g.count) +
             (g.fixed_by_enforce ? " (fixed by enforce mode)" : "") + "</td><td><code>" +
             html_escape(g.operation) + "</code></td><td class=\"mono\">" + html_escape(g.path) +
             (g.files > 1 ? " (+" + number(g.files - 1) + " files)" : "") + "</td><td class=\"mono\">" +
             html_escape(g.site) +
             (g.seek_call.empty() ? ""
                                  : "<br>seek at: " + html_escape(g.seek_site) +
                                        (g.seek_site.empty() ? "" : ": ") + html_escape(g.seek_call)) +
             "</td><td>" + html_escape(ranks) + "</td><td class=\"mono\">" + html_escape(g.first_line) +
             "</td></tr>\n";
    }
    out += "</table>\n";
    if (t.groups.size() > options.max_group_rows) {
      out += "<p class=\"note muted\">" + number(t.groups.size() - options.max_group_rows) +
             " more groups not listed (the page stays bounded; <code>appendguard report</code> lists them "
             "all).</p>\n";
    }
  }
  // The timelines drawn: files with refusals first, each list in order of appearance, up to the bound.
  std::vector<bool> drawn(t.files.size(), false);
  size_t timelines = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < t.files.size() && timelines < options.max_timelines; ++i) {
      if (!drawn[i] && (pass == 1 || t.files[i].refusals > 0)) {
        drawn[i] = true;
        ++timelines;
      }
    }
  }
  out +=
      "<h2>Files</h2>\n<table class=\"files\"><tr><th>file</th><th>writes</th><th>bytes</th>"
      "<th>refusals</th><th>writers (rank, pid)</th></tr>\n";
  for (size_t i = 0; i < t.files.size() && i < options.max_file_rows; ++i) {
    const FileTimeline& f = t.files[i];
    std::string writers;
    for (const Writer& w : f.writers) writers += (writers.empty() ? "" : "; ") + writer_name(t, w.pid);
    out += "<tr><td class=\"mono\">" +
           (drawn[i] ? "<a href=\"#file-" + number(i + 1) + "\">" + html_escape(f.path) + "</a>"
                     : html_escape(f.path)) +
           "</td><td class=\"n\">" + number(f.writes) + "</td><td class=\"n\">" +
           html_escape(human_bytes(f.bytes)) + "</td><td class=\"n" + (f.refusals ? " bad" : "") + "\">" +
           number(f.refusals) + "</td><td>" + html_escape(writers) + "</td></tr>\n";
  }
  out += "</table>\n";
  if (t.files.size() > options.max_file_rows) {
    out += "<p class=\"note muted\">" + number(t.files.size() - options.max_file_rows) +
           " more files not listed (the page stays bounded).</p>\n";
  }
  if (timelines < t.files.size()) {
    out += "<p class=\"note muted\">" + number(t.files.size() - timelines) + " of " + number(t.files.size()) +
           " files have no timeline here: the page draws at most " + number(options.max_timelines) +
           " (files with refusals first).</p>\n";
  }
  if (t.read_only_files) {
    out += "<p class=\"muted\">" + number(t.read_only_files) +
           " file(s) only opened for reading in the traces: not drawn.</p>\n";
  }
  if (t.files.empty()) {
    out +=
        "<p>No guarded file in these logs: were they written with <code>APPENDGUARD_TRACE=1</code>? Without "
        "it, only violations are in a log.</p>\n";
  }
  out += kLegend;
  for (size_t i = 0; i < t.files.size(); ++i) {
    if (!drawn[i]) continue;
    const FileTimeline& f = t.files[i];
    Layout layout = lay_out(f, options.max_drawn);
    out += "<section class=\"file\" id=\"file-" + number(i + 1) + "\"><h2 class=\"mono\">" +
           html_escape(f.path) + "</h2>\n<p>" + number(f.writes) + " write" + (f.writes == 1 ? "" : "s") +
           ", " + html_escape(human_bytes(f.bytes)) + "; " + "<span class=\"" + (f.refusals ? "bad" : "ok") +
           "\">" + number(f.refusals) + " refusal" + (f.refusals == 1 ? "" : "s") + "</span>; writers: ";
    std::string writers;
    for (const Writer& w : f.writers) {
      writers += (writers.empty() ? "" : "; ") + writer_name(t, w.pid) +
                 (w.host.empty() ? "" : " on " + w.host) + ": " + number(w.writes) + " write" +
                 (w.writes == 1 ? "" : "s") + ", " + human_bytes(w.bytes);
    }
    out += html_escape(writers.empty() ? "none" : writers) + "</p>\n";
    out += svg_of(t, f, layout, i + 1);
    std::string note;
    if (layout.merged_appends)
      note += number(layout.merged_appends) + " adjacent appends drawn with the write before them; ";
    if (layout.merged_for_cap)
      note += number(layout.merged_for_cap) + " more writes merged into spans to draw at most " +
              number(options.max_drawn) + " marks; ";
    if (layout.left_out) note += number(layout.left_out) + " seeks and opens left out for the same reason; ";
    if (layout.queries) note += number(layout.queries) + " position queries (lseek 0, SEEK_CUR) not drawn; ";
    if (layout.not_drawn_other) {
      note += number(layout.not_drawn_other) + " other operations not drawn (";
      bool first = true;
      for (const auto& [name, count] : layout.other_names) {
        note += (first ? "" : ", ") + name + " " + number(count);
        first = false;
      }
      note += "); ";
    }
    note += "hover a mark for its trace line.";
    out += "<p class=\"note muted\">" + html_escape(note) + "</p>\n";
    if (f.refusals) {
      out +=
          "<table "
          "class=\"refusals\"><tr><th>#</th><th>when</th><th>operation</th><th>offset</th><th>bytes</th>"
          "<th>end of file</th><th>writer</th><th>report</th></tr>\n";
      size_t n = 0;
      double t0 = f.events.empty() ? 0 : f.events.front().time;
      for (const FileEvent& e : f.events) {
        if (!is_refusal(e)) continue;
        if (++n > kMaxRefusalRows) continue;
        out += "<tr><td class=\"n\">" + number(n) + "</td><td class=\"n\">" +
               (f.timed ? since(e.time - t0) : std::string("-")) + "</td><td><code>" +
               html_escape(e.operation) + "</code></td><td class=\"n\">" + number(e.offset) +
               "</td><td class=\"n\">" + number(e.bytes) + "</td><td class=\"n\">" + number(e.end_of_file) +
               "</td><td>" + html_escape(writer_name(t, e.pid)) + "</td><td class=\"mono\">";
        if (e.report >= 0) {
          const ViolationReport& r = t.reports[static_cast<size_t>(e.report)];
          out += "<pre class=\"first\">" + html_escape(r.first_line) + "</pre>";
          if (!r.site.empty()) out += "<pre class=\"site\">at: " + html_escape(r.site) + "</pre>";
          if (!r.seek_call.empty()) {
            out += "<pre class=\"site\">seek at: " + html_escape(r.seek_site) +
                   (r.seek_site.empty() ? "" : ": ") + html_escape(r.seek_call) + "</pre>";
          }
        } else {
          out += "<pre class=\"first\">" + html_escape(e.operation + " " + e.detail + " -> " + e.result) +
                 " (trace line; no report in these logs)</pre>";
        }
        out += "</td></tr>\n";
      }
      out += "</table>\n";
      if (n > kMaxRefusalRows) {
        out += "<p class=\"note muted\">" + number(n - kMaxRefusalRows) +
               " more refusals of this file not listed (" +
               "all are drawn above; <code>appendguard report</code> groups them by call site).</p>\n";
      }
    }
    out += "</section>\n";
  }
  out +=
      "<p class=\"muted\">Written by <code>appendguard report --html</code>: one file, no script, no "
      "external "
      "resource.</p>\n</body></html>\n";
  return out;
}

}  // namespace appendguard
