// Tests of the content-addressed artifact store: round trip, layout on disk,
// corruption detection, pins and least-recently-used garbage collection.
#include <filesystem>
#include <fstream>

#include "base/digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tuning_db/temp_db_dir.h"
#include "tuning_db/tuning_db.h"

namespace kiln::tuningdb {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDbDir;

std::unique_ptr<TuningDb> OpenOrDie(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? std::move(*db) : nullptr;
}

std::string BlobPathOf(const TuningDb& db, const std::string& digest) {
  std::string hex = digest.substr(7);
  return db.artifact_dir() + "/sha256/" + hex.substr(0, 2) + "/" + hex;
}

TEST(ArtifactStoreTest, RoundTripAndLayout) {
  TempDbDir dir;
  std::string path = dir.Path();
  auto db = OpenOrDie(path);
  ASSERT_NE(db, nullptr);
  std::string bytes("kiln package\0with a NUL byte", 28);
  absl::StatusOr<std::string> digest = db->PutArtifact(bytes);
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(*digest, ContentDigest(bytes));
  EXPECT_TRUE(std::filesystem::exists(BlobPathOf(*db, *digest)));
  EXPECT_EQ(BlobPathOf(*db, *digest).rfind(path + ".artifacts/sha256/", 0), 0u);

  EXPECT_TRUE(*db->HasArtifact(*digest));
  auto got = db->GetArtifact(*digest);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, bytes);

  // Same bytes again: same digest, one artifact.
  EXPECT_EQ(*db->PutArtifact(bytes), *digest);
  auto stats = db->GetStats();
  EXPECT_EQ(stats->artifacts, 1);
  EXPECT_EQ(stats->artifact_bytes, 28);

  // Empty artifacts are fine too.
  auto empty = db->PutArtifact("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(**db->GetArtifact(*empty), "");

  // No temp files are left behind.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(db->artifact_dir())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

TEST(ArtifactStoreTest, ReopenKeepsArtifacts) {
  TempDbDir dir;
  std::string path = dir.Path();
  std::string digest;
  {
    auto db = OpenOrDie(path);
    ASSERT_NE(db, nullptr);
    digest = *db->PutArtifact("persisted");
  }
  auto db = OpenOrDie(path);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(**db->GetArtifact(digest), "persisted");
}

TEST(ArtifactStoreTest, MissingAndMalformedDigests) {
  TempDbDir dir;
  auto db = OpenOrDie(dir.Path());
  ASSERT_NE(db, nullptr);
  std::string absent = ContentDigest("never stored");
  auto got = db->GetArtifact(absent);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
  EXPECT_FALSE(*db->HasArtifact(absent));
  EXPECT_EQ(db->GetArtifact("sha256:../../etc/passwd").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(db->HasArtifact("nope").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(db->SetArtifactPinned(absent, true).code(), absl::StatusCode::kNotFound);
}

TEST(ArtifactStoreTest, CorruptBlobIsDetectedAndDropped) {
  TempDbDir dir;
  auto db = OpenOrDie(dir.Path());
  ASSERT_NE(db, nullptr);
  std::string bytes(4096, 'k');
  std::string digest = *db->PutArtifact(bytes);
  {
    // Same size, different content: only hashing can tell.
    std::ofstream out(BlobPathOf(*db, digest), std::ios::binary | std::ios::trunc);
    out << std::string(4096, 'X');
  }
  auto got = db->GetArtifact(digest);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr(digest));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("corrupt"));

  // The bad copy is gone; storing the bytes again repairs the store.
  EXPECT_FALSE(*db->HasArtifact(digest));
  EXPECT_FALSE(db->GetArtifact(digest)->has_value());
  ASSERT_EQ(*db->PutArtifact(bytes), digest);
  EXPECT_EQ(**db->GetArtifact(digest), bytes);
}

TEST(ArtifactStoreTest, MissingBlobIsDataLoss) {
  TempDbDir dir;
  auto db = OpenOrDie(dir.Path());
  ASSERT_NE(db, nullptr);
  std::string digest = *db->PutArtifact("soon gone");
  std::filesystem::remove(BlobPathOf(*db, digest));
  EXPECT_FALSE(*db->HasArtifact(digest));
  auto got = db->GetArtifact(digest);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("missing"));
  EXPECT_FALSE(db->GetArtifact(digest)->has_value());
}

TEST(ArtifactStoreTest, GcEvictsLeastRecentlyUsedAndHonorsPins) {
  TempDbDir dir;
  auto db = OpenOrDie(dir.Path());
  ASSERT_NE(db, nullptr);
  // Five 100-byte artifacts; a is pinned, c is used after d and e.
  std::string a = *db->PutArtifact(std::string(100, 'a'), /*pin=*/true);
  std::string b = *db->PutArtifact(std::string(100, 'b'));
  std::string c = *db->PutArtifact(std::string(100, 'c'));
  std::string d = *db->PutArtifact(std::string(100, 'd'));
  std::string e = *db->PutArtifact(std::string(100, 'e'));
  ASSERT_TRUE(db->GetArtifact(c).ok());  // c is now the most recently used
  EXPECT_EQ(db->GetStats()->artifact_bytes, 500);

  // Under the limit: nothing happens.
  EXPECT_EQ(*db->GcArtifacts(500), 0);

  // Down to 300 bytes: b then d go (a is pinned even though it is the oldest).
  EXPECT_EQ(*db->GcArtifacts(300), 200);
  EXPECT_TRUE(*db->HasArtifact(a));
  EXPECT_FALSE(*db->HasArtifact(b));
  EXPECT_TRUE(*db->HasArtifact(c));
  EXPECT_FALSE(*db->HasArtifact(d));
  EXPECT_TRUE(*db->HasArtifact(e));
  EXPECT_FALSE(std::filesystem::exists(BlobPathOf(*db, b)));
  EXPECT_FALSE(std::filesystem::exists(BlobPathOf(*db, d)));

  // Re-putting an existing artifact also counts as a use: e becomes newest.
  ASSERT_TRUE(db->PutArtifact(std::string(100, 'e')).ok());
  EXPECT_EQ(*db->GcArtifacts(200), 100);
  EXPECT_FALSE(*db->HasArtifact(c));
  EXPECT_TRUE(*db->HasArtifact(e));

  // Limit 0: every unpinned artifact goes, the pinned one stays.
  EXPECT_EQ(*db->GcArtifacts(0), 100);
  EXPECT_TRUE(*db->HasArtifact(a));
  EXPECT_EQ(**db->GetArtifact(a), std::string(100, 'a'));
  EXPECT_EQ(db->GetStats()->artifacts, 1);

  // Unpinning makes it collectable.
  ASSERT_TRUE(db->SetArtifactPinned(a, false).ok());
  EXPECT_EQ(*db->GcArtifacts(0), 100);
  EXPECT_EQ(db->GetStats()->artifacts, 0);
  EXPECT_EQ(db->GcArtifacts(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ArtifactStoreTest, PutWithoutPinKeepsExistingPin) {
  TempDbDir dir;
  auto db = OpenOrDie(dir.Path());
  ASSERT_NE(db, nullptr);
  std::string a = *db->PutArtifact("pinned", /*pin=*/true);
  ASSERT_TRUE(db->PutArtifact("pinned", /*pin=*/false).ok());
  EXPECT_EQ(*db->GcArtifacts(0), 0);
  EXPECT_TRUE(*db->HasArtifact(a));
}

}  // namespace
}  // namespace kiln::tuningdb
