#include "shim/guard_seek.h"

#include <errno.h>

#include "report/report.h"
#include "shim/runtime.h"

namespace appendguard {

void note_seek_site(SeekSiteAction action, const char* operation, Description* d, off64_t offset, int whence,
                    uint64_t position, uint64_t end_of_file) {
  if (action == SeekSiteAction::kForget) {
    d->forget_seek_site();
    return;
  }
  int error = errno;
  {
    InternalScope internal;  // what the capture calls (an mmap for its scratch, Python's API) is not guarded
    if (SeekSite* site = d->seek_site_for_recording())
      record_seek_site(*site, operation, offset, whence, position, end_of_file);
  }
  errno = error;
}

}  // namespace appendguard
