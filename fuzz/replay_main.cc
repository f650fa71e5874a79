// Replays fuzz corpora without libFuzzer: `target DIR_OR_FILE...` feeds every file to
// LLVMFuzzerTestOneInput once. Used by ctest so corpora stay regression tests on g++.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
int RunFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  // Always exercise the empty input and a few degenerate ones.
  for (const char* s : {"", "{", "null", "\xff\xfe", "[[[[[[[[[[[[[[[["}) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s), std::char_traits<char>::length(s));
    ++count;
  }
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path p(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
      for (const auto& f : files) count += RunFile(f);
    } else if (std::filesystem::exists(p, ec)) {
      count += RunFile(p);
    }
  }
  std::printf("replayed %d inputs\n", count);
  return 0;
}
