// `kiln lookup`: fetch the package an earlier compile produced, never compile.
// Packages are cached locally by digest and verified on every use.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "base/digest.h"
#include "base/exit_codes.h"
#include "client/commands.h"
#include "client/json_output.h"
#include "client/kiln_client.h"
#include "client/onnx_model_file.h"

namespace kiln::client {

int RunLookup(const LookupOptions& o) {
  auto model = ReadOnnxModelFile(o.model);
  if (!model.ok()) return ReportError("lookup", model.status());
  kiln::v1::LookupRequest request;
  request.set_onnx_model(*model);
  request.set_target(o.target);
  request.set_threads(o.threads);
  if (absl::Status s = AddShapeBindings(o.shapes, request.mutable_shapes()); !s.ok()) {
    return ReportError("lookup", s);
  }
  auto client = ConnectClient(o.server, o.connect_timeout_s);
  if (!client.ok()) return ReportError("lookup", client.status());
  auto response = (*client)->Lookup(request);
  if (!response.ok()) return ReportError("lookup", response.status());
  // --json: the server's answer, and where the package went and came from.
  auto json = [&](const std::string& output, const std::string& source) {
    return JsonObject()
        .AddRaw("lookup", ProtoToJson(*response))
        .AddRaw("output", output.empty() ? "null" : JsonString(output))
        .AddRaw("source", source.empty() ? "null" : JsonString(source))
        .str();
  };
  if (!response->found()) {
    if (o.json) std::printf("%s\n", json("", "").c_str());
    std::fprintf(stderr, "kiln lookup: no package: %s\n", response->reason().c_str());
    return kExitNotFound;
  }
  const std::string& digest = response->package_digest();
  std::string cache_dir = o.cache_dir.empty() ? DefaultKilnHome() + "/packages" : o.cache_dir;
  std::string cached_path = absl::StrCat(cache_dir, "/", digest.substr(digest.find(':') + 1), ".kpkg");
  std::string bytes;
  const char* source = "cache";
  auto cached = ReadFile(cached_path);
  if (cached.ok() && ContentDigest(*cached) == digest) {
    bytes = std::move(*cached);
  } else {
    auto fetched = (*client)->FetchArtifact(digest);
    if (!fetched.ok()) return ReportError("lookup", fetched.status());
    bytes = std::move(*fetched);
    source = "server";
    (void)WriteFileAtomic(cached_path, bytes);
  }
  if (absl::Status s = WriteFileAtomic(o.output, bytes); !s.ok()) return ReportError("lookup", s);
  if (o.json) {
    std::printf("%s\n", json(o.output, source).c_str());
    return kExitOk;
  }
  std::printf("package %s\ndigest %s (from %s)\n", o.output.c_str(), digest.c_str(), source);
  if (response->tuning_in_progress()) {
    std::printf("tuning goes on in the background: a later lookup may get a faster package\n");
  }
  return kExitOk;
}

}  // namespace kiln::client
