// meganeura command-line tool.
#include <cstdio>
#include <cstring>

#include "meganeura/meganeura.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    std::printf("usage: meganeura info [--json]\n");
    return argc < 2 ? 2 : 0;
  }
  std::fprintf(stderr, "meganeura: unknown command '%s'\n", argv[1]);
  return 2;
}
