// SHA-256 throughput of each engine of base/digest.cc (portable C++ and, where
// the CPU has them, the x86 SHA extensions) on one buffer, the best of a few
// passes. A package load hashes the whole file once (client/runtime/
// package_reader.cc: the trailer's digest and the content digest in one pass).
//
//   build/bench/kiln_bench_digest [MiB=256] [passes=3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/digest.h"

int main(int argc, char** argv) {
  const long mib = argc > 1 ? std::atol(argv[1]) : 256;
  const int passes = argc > 2 ? std::atoi(argv[2]) : 3;
  if (mib <= 0 || passes <= 0) {
    std::fprintf(stderr, "usage: kiln_bench_digest [MiB > 0] [passes > 0]\n");
    return 2;
  }
  std::string data(static_cast<size_t>(mib) << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 2654435761u) >> 11);
  const kiln::Sha256Bytes want = kiln::Sha256On(kiln::Sha256Engine::kPortable, data);
  std::printf("| engine | MiB | best MB/s | digest agrees |\n|---|---|---|---|\n");
  for (kiln::Sha256Engine engine : {kiln::Sha256Engine::kPortable, kiln::Sha256Engine::kShaExtensions}) {
    const char* name = engine == kiln::Sha256Engine::kPortable ? "portable" : "SHA extensions";
    if (!kiln::Sha256EngineRuns(engine)) {
      std::printf("| %s | – | not on this CPU | – |\n", name);
      continue;
    }
    double best = 1e30;
    bool agrees = true;
    for (int p = 0; p < passes; ++p) {
      const auto t0 = std::chrono::steady_clock::now();
      const kiln::Sha256Bytes got = kiln::Sha256On(engine, data);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      agrees = agrees && got == want;
    }
    std::printf("| %s | %ld | %.0f | %s |\n", name, mib, static_cast<double>(data.size()) / best / 1e6,
                agrees ? "yes" : "NO");
  }
  std::printf("(host engine: %s)\n",
              kiln::HostSha256Engine() == kiln::Sha256Engine::kShaExtensions ? "SHA extensions" : "portable");
  return 0;
}
