// Writing a file that other users may share a directory with (an `appendguard report --html` page in a
// shared /tmp or log folder): the bytes go to a new sibling made with O_CREAT|O_EXCL|O_NOFOLLOW under a
// random name, are synced, and the sibling is renamed onto the target under a descriptor of the
// directory. No name is followed or reused, so no one can plant a symlink or a file of theirs in the way.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace appendguard {

// Replaces `path` with a file holding `data`, created with `mode` (the umask applied). Returns 0, or
// the errno of the step that failed (the sibling is then removed and `path` is left as it was).
int replace_file(const std::string& path, std::string_view data, mode_t mode = 0666);

// The random part of a sibling's name: 16 hex digits, from getrandom (else the clock and the pid: the
// O_EXCL create is what keeps a guessed name harmless).
std::string random_suffix();

}  // namespace appendguard
