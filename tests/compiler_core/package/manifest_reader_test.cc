// The protobuf reader of a package: it reads back what the writer wrote
// (provenance included), and names what is wrong with a file that is not a
// package, has another format version, a header pointing outside it, or a
// checksum that does not match.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "client/example_models.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/package/manifest_reader.h"
#include "kiln/v1/package_layout.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

// The example MLP at its default schedules; group 0's provenance names two
// records when `with_provenance`.
PackageBytes MlpPackage(bool with_provenance) {
  auto model = client::MakeExampleModel("mlp");
  EXPECT_TRUE(model.ok());
  ModelSource source;
  source.onnx_model = model->onnx_bytes;
  source.input_shapes = model->shapes;
  auto graph = ImportModel(source);
  EXPECT_TRUE(graph.ok()) << graph.status();
  auto prepared = PrepareModel(std::move(*graph));
  EXPECT_TRUE(prepared.ok()) << prepared.status();
  PackageOptions options;
  options.model_name = "mlp";
  options.target = CpuTarget::Host();
  if (with_provenance) {
    for (size_t i = 0; i < prepared->partition.groups.size(); ++i) {
      kiln::v1::ScheduleProvenance p;
      p.set_source(i == 0 ? kiln::v1::ScheduleProvenance::RECORDS : kiln::v1::ScheduleProvenance::DEFAULT);
      p.set_record_target("cpu/x86_64/test/00000000");
      p.set_space_version(kScheduleSpaceVersion);
      if (i == 0) {
        p.add_record_keys("0000000000a1-00000000000000000000000000000001");
        p.add_record_keys("0000000000a2-00000000000000000000000000000002");
        p.set_mean_ms(0.25);
        p.set_schedules_ranked(7);
      }
      options.provenance.push_back(p);
    }
  }
  auto package = BuildPackage(*prepared, DefaultSchedules(*prepared, options.target), options);
  EXPECT_TRUE(package.ok()) << package.status();
  return *package;
}

TEST(ManifestReaderTest, ReadsWhatTheWriterWroteProvenanceIncluded) {
  const PackageBytes pkg = MlpPackage(/*with_provenance=*/true);
  ASSERT_TRUE(LooksLikePackage(pkg.bytes));
  auto info = ReadPackageInfo(pkg.bytes);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->digest, pkg.digest);
  EXPECT_EQ(info->size, static_cast<int64_t>(pkg.bytes.size()));
  EXPECT_EQ(info->manifest.model_name(), "mlp");
  ASSERT_EQ(info->manifest.groups_size(), 2);
  const kiln::v1::ScheduleProvenance& p = info->manifest.groups(0).provenance();
  EXPECT_EQ(p.source(), kiln::v1::ScheduleProvenance::RECORDS);
  EXPECT_THAT(p.record_keys(), ::testing::ElementsAre("0000000000a1-00000000000000000000000000000001",
                                                      "0000000000a2-00000000000000000000000000000002"));
  EXPECT_EQ(p.schedules_ranked(), 7);
  EXPECT_EQ(info->manifest.groups(1).provenance().source(), kiln::v1::ScheduleProvenance::DEFAULT);

  // Without provenance the field is unset; the kernels are the same.
  auto bare = ReadPackageInfo(MlpPackage(/*with_provenance=*/false).bytes);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_FALSE(bare->manifest.groups(0).has_provenance());
  EXPECT_NE(bare->digest, info->digest);
  EXPECT_TRUE(SameKernels(bare->manifest, info->manifest));
  kiln::v1::PackageManifest other = bare->manifest;
  other.mutable_groups(1)->set_schedule_config("ku=1,mr=1,nr=1");
  EXPECT_FALSE(SameKernels(other, info->manifest));
}

TEST(ManifestReaderTest, NamesWhatIsWrongWithABadFile) {
  const std::string good = MlpPackage(/*with_provenance=*/false).bytes;
  EXPECT_FALSE(LooksLikePackage("\x08\x07\x12\x04onnx"));
  auto not_package = ReadPackageInfo("\x08\x07\x12\x04onnx");
  EXPECT_EQ(not_package.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_package.status().message(), HasSubstr("not a Kiln package"));

  auto short_file = ReadPackageInfo(good.substr(0, 40));
  EXPECT_EQ(short_file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_file.status().message(), HasSubstr("shorter than its header"));

  std::string version = good;
  const uint32_t v2 = 2;
  std::memcpy(version.data() + 8, &v2, sizeof(v2));
  EXPECT_THAT(ReadPackageInfo(version).status().message(), HasSubstr("format version 2; this build reads version 1"));

  std::string outside = good;
  const uint64_t huge = uint64_t{1} << 62;
  std::memcpy(outside.data() + offsetof(package::Header, manifest_size), &huge, sizeof(huge));
  EXPECT_THAT(ReadPackageInfo(outside).status().message(), HasSubstr("lies outside the file"));

  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 1;
  EXPECT_EQ(ReadPackageInfo(flipped).status().code(), absl::StatusCode::kDataLoss);

  // Truncated anywhere: an error, never a crash.
  for (size_t n = 0; n < good.size(); n += 97) EXPECT_FALSE(ReadPackageInfo(good.substr(0, n)).ok()) << n;
}

}  // namespace
}  // namespace kiln
