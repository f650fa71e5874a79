// Measurement aid only: sets TCP_NODELAY on every accepted socket (what the sim lacks).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
static void nd(int fd) { int one = 1; if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); }
int accept(int s, struct sockaddr* a, socklen_t* l) {
  static int (*real)(int, struct sockaddr*, socklen_t*);
  if (!real) real = dlsym(RTLD_NEXT, "accept");
  int fd = real(s, a, l); nd(fd); return fd;
}
int accept4(int s, struct sockaddr* a, socklen_t* l, int f) {
  static int (*real)(int, struct sockaddr*, socklen_t*, int);
  if (!real) real = dlsym(RTLD_NEXT, "accept4");
  int fd = real(s, a, l, f); nd(fd); return fd;
}
