// `appendguard report [--json] [--html OUT.html] LOG...`: the command (options, reading the logs, output).
#pragma once

#include <string>
#include <vector>

namespace appendguard {

extern const char* const kReportUsage;

// Returns the exit status: 0 no violation, 1 violations found, 2 bad arguments or a log not read.
int report_command(const std::vector<std::string>& args);

}  // namespace appendguard
