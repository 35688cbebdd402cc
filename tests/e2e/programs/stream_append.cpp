// An end-to-end test program: the DCP pattern with C++ streams. std::ofstream writes a 64-byte header,
// then std::fstream(in|out|binary) + seekp(0, end) + write appends COUNT tensors of SIZE bytes ('0' + i).
// usage: stream_append PATH [COUNT [SIZE [existing]]]; prints key=value lines, exits 0 only if the streams
// stayed good. "existing": PATH already holds the header (a kernel append-only file), skip the ofstream.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* path = argv[1];
  int count = argc > 2 ? std::atoi(argv[2]) : 3;
  long size = argc > 3 ? std::atol(argv[3]) : 1000;
  bool existing = argc > 4 && std::string(argv[4]) == "existing";
  if (!existing) {
    std::ofstream header(path, std::ios::out | std::ios::binary | std::ios::trunc);
    header.write(std::string(64, 'H').data(), 64);
    header.close();
    std::cout << "header_good=" << !header.fail() << std::endl;
    if (header.fail()) return 1;
  }
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  std::cout << "is_open=" << f.is_open() << std::endl;
  f.seekp(0, std::ios::end);
  std::cout << "tellp=" << static_cast<long>(f.tellp()) << std::endl;
  for (int i = 0; i < count; ++i) {
    std::string tensor(static_cast<size_t>(size), static_cast<char>('0' + i));
    f.write(tensor.data(), static_cast<std::streamsize>(tensor.size()));
  }
  f.flush();
  std::cout << "good_after_flush=" << f.good() << std::endl;
  std::cout << "tellp_after=" << static_cast<long>(f.tellp()) << std::endl;
  f.close();
  bool ok = !f.fail();
  std::cout << "close_good=" << ok << std::endl;
  return ok ? 0 : 1;
}
