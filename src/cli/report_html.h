// `appendguard report --html OUT.html LOG...`: one self-contained page (inline CSS and SVG, no script, no
// external resource) with a summary table and, per guarded file, a timeline of its operations. Pure.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cli/timeline.h"

namespace appendguard {

struct HtmlOptions {
  std::vector<std::string> logs;  // the logs' names, as given
  // At most this many marks per file: beyond, runs of writes are merged further and the least telling
  // marks (seeks, opens) are left out, with a note of what was.
  size_t max_drawn = 600;
  // The page stays bounded whatever the logs hold: at most this many rows of the groups and files
  // tables and this many timelines (files with refusals first), with a note of what was left out.
  size_t max_group_rows = 500;
  size_t max_file_rows = 2000;
  size_t max_timelines = 200;
};

std::string render_html(const Timelines& timelines, const HtmlOptions& options);

// Text made safe inside HTML elements and attribute values (& < > " ', control bytes as \xHH, direction
// controls as their bytes \xe2\x80\xae: cli/printable.h).
std::string html_escape(std::string_view text);

}  // namespace appendguard
