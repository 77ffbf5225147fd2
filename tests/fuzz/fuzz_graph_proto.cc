// Fuzz target: kiln.v1.Graph bytes (the compile API's second model form) ->
// ImportModel (GraphFromProto: rebuild, shape inference, verify). A graph that
// imports must round-trip (GraphFromProto(GraphToProto(g)) has g's text) and
// goes on through PrepareModel and CheckCompilable like an ONNX model.
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler_core/codegen/target.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/graph_proto.h"
#include "google/protobuf/stubs/logging.h"
#include "kiln/v1/graph.pb.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/prepare_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const kiln::CpuTarget* target = new kiln::CpuTarget(*kiln::CpuTarget::Named("x86-64-v3"));
  // Invalid UTF-8 in a string field is a parse failure, not worth a log line per input.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  kiln::v1::Graph proto;
  // Bytes that are no Graph message never reach Kiln: gRPC refuses them.
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  kiln::ModelSource source;
  source.graph = &proto;
  absl::StatusOr<std::unique_ptr<kiln::Graph>> graph = kiln::ImportModel(source);
  if (!graph.ok()) {
    kiln::fuzz::CheckInputError(graph.status(), "ImportModel(graph)");
    return 0;
  }
  kiln::v1::Graph again;
  kiln::GraphToProto(**graph, &again);
  absl::StatusOr<std::unique_ptr<kiln::Graph>> reread = kiln::GraphFromProto(again);
  if (!reread.ok()) kiln::fuzz::Fail("GraphFromProto(GraphToProto(g)) failed: " + reread.status().ToString());
  if ((*reread)->ToText() != (*graph)->ToText()) {
    kiln::fuzz::Fail("round trip changed the graph:\n" + (*graph)->ToText() + "\nbecame\n" + (*reread)->ToText());
  }
  kiln::fuzz::PrepareAndCheck(std::move(*graph), *target);
  return 0;
}
