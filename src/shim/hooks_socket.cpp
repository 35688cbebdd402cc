// Descriptors received over unix sockets (SCM_RIGHTS) are adopted if their files are guarded, or share the
// tracked description they are (shim/descriptor_identity.h). The untracked path tests the control length
// the kernel returned.
#include "shim/descriptor_identity.h"
#include "shim/hook.h"

using namespace appendguard;

APPENDGUARD_HOOK ssize_t recvmsg(int fd, msghdr* message, int flags) {
  ssize_t result = real_recvmsg(fd, message, flags);
  if (__builtin_expect(result >= 0 && message && message->msg_controllen > 0, 0) &&
      current_mode() != Mode::kOff) {
    keep_errno([&](int) { receive_descriptors("recvmsg", message); });
  }
  return result;
}

APPENDGUARD_HOOK int recvmmsg(int fd, mmsghdr* messages, unsigned int count, int flags, timespec* timeout) {
  int result = real_recvmmsg(fd, messages, count, flags, timeout);
  if (__builtin_expect(result > 0, 0) && current_mode() != Mode::kOff) {
    keep_errno([&](int) {
      for (int i = 0; i < result; ++i) {
        if (messages[i].msg_hdr.msg_controllen > 0) receive_descriptors("recvmmsg", &messages[i].msg_hdr);
      }
    });
  }
  return result;
}
