// An end-to-end test program: the DCP pattern with C stdio. fopen(p, "wb") writes a 64-byte header,
// then fopen(p, "r+b") + fseek(SEEK_END) + fwrite appends COUNT tensors of SIZE bytes ('0' + i).
// usage: stdio_append PATH [COUNT [SIZE [existing]]]; prints key=value lines, exits 0 only if every call
// succeeded. "existing": PATH already holds the header (a kernel append-only file cannot be truncated), skip
// the "wb" step.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* path = argv[1];
  int count = argc > 2 ? atoi(argv[2]) : 3;
  long size = argc > 3 ? atol(argv[3]) : 1000;
  int existing = argc > 4 && strcmp(argv[4], "existing") == 0;
  int ok = 1;
  FILE* f;
  if (!existing) {
    char header[64];
    memset(header, 'H', sizeof header);
    f = fopen(path, "wb");
    if (!f) {
      printf("fopen_wb=NULL errno=%d\n", errno);
      return 1;
    }
    printf("header=%zu\n", fwrite(header, 1, sizeof header, f));
    int header_closed = fclose(f);
    printf("fclose_header=%d\n", header_closed);
    if (header_closed != 0) return 1;
  }
  f = fopen(path, "r+b");
  if (!f) {
    printf("fopen_rplus=NULL errno=%d\n", errno);
    return 1;
  }
  printf("fseek_end=%d\n", fseek(f, 0, SEEK_END));
  printf("ftell=%ld\n", ftell(f));
  char* tensor = malloc((size_t)size);
  for (int i = 0; i < count; ++i) {
    memset(tensor, '0' + i, (size_t)size);
    errno = 0;
    size_t n = fwrite(tensor, 1, (size_t)size, f);
    printf("fwrite=%zu\n", n);
    if (n != (size_t)size) ok = 0;
  }
  errno = 0;
  int flushed = fflush(f);
  printf("fflush=%d errno=%d\n", flushed, flushed ? errno : 0);
  printf("ftell_after=%ld\n", ftell(f));
  errno = 0;
  int closed = fclose(f);
  printf("fclose=%d errno=%d\n", closed, closed ? errno : 0);
  free(tensor);
  if (flushed || closed) ok = 0;
  return ok ? 0 : 1;
}
