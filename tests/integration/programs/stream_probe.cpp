// A test program for C++ streams: libstdc++'s filebuf opens with fopen64 and then writes, seeks and reads
// through fileno() with write, writev, lseek64 and read. Prints key=value lines.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

namespace {

void show(const char* key, const std::ios& s) {
  std::cout << key << "=" << (s.good() ? "good" : s.bad() ? "bad" : s.fail() ? "fail" : "eof") << std::endl;
}

void write_header(const char* path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << "HEADER";
  out.close();
  show("header", out);
}

int case_append(const char* path) {
  write_header(path);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  show("open", f);
  f.seekp(0, std::ios::end);
  show("seek_end", f);
  std::cout << "tellp=" << f.tellp() << std::endl;
  f << "tensor:" << 42;
  std::string big(100000, 'B');  // larger than the buffer: written with writev
  f.write(big.data(), static_cast<std::streamsize>(big.size()));
  f.flush();
  show("write", f);
  std::cout << "tellp_after=" << f.tellp() << std::endl;
  f.close();
  show("close", f);
  return 0;
}

int case_overwrite(const char* path) {
  write_header(path);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  show("open", f);
  f.seekp(0, std::ios::end);
  f << "END";
  f.seekp(0);
  show("seek_start", f);
  f << "X";
  f.flush();
  show("write_start", f);
  f.close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s case path\n", argv[0]);
    return 2;
  }
  if (std::strcmp(argv[1], "append") == 0) return case_append(argv[2]);
  if (std::strcmp(argv[1], "overwrite") == 0) return case_overwrite(argv[2]);
  std::fprintf(stderr, "unknown case %s\n", argv[1]);
  return 2;
}
