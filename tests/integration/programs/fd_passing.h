// Passing a descriptor over a unix socket (SCM_RIGHTS), for the test programs that send one to themselves
// or to another process.
#pragma once

#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

static inline int send_fd(int sock, int fd) {
  char data = 'f';
  struct iovec iov = {&data, 1};
  char control[CMSG_SPACE(sizeof(int))];
  memset(control, 0, sizeof control);
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  return (int)sendmsg(sock, &msg, 0);
}

static inline int receive_fd(int sock) {
  char data;
  struct iovec iov = {&data, 1};
  char control[CMSG_SPACE(sizeof(int))];
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
  if (recvmsg(sock, &msg, 0) != 1) return -1;
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}
