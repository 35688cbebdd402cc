// Mounts the filesystem and serves requests until it is unmounted.
#pragma once

#include "event_log.hpp"
#include "options.hpp"

namespace appendonlyfs {

// Returns the process exit status.
int run_filesystem(const Options& options, EventLog& log);

}  // namespace appendonlyfs
