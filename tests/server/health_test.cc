// The server answers gRPC's standard health check (grpc.health.v1.Health) and
// lists its services through server reflection.
#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "tests/server/test_farm.h"

namespace kiln {
namespace {

// One unary call through the generic stub: request and response are raw bytes.
grpc::Status CallRaw(const std::string& address, const std::string& method, const std::string& request,
                     std::string* response) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice slice(request);
  grpc::ByteBuffer req(&slice, 1), resp;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &req, &resp, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = s;
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  std::vector<grpc::Slice> slices;
  if (status.ok()) {
    (void)resp.Dump(&slices);
    for (const auto& s : slices) response->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return status;
}

TEST(HealthTest, ServerReportsServing) {
  testing::TestFarm farm(/*with_worker=*/false);
  std::string response;
  // HealthCheckRequest{service=""} is the empty message.
  grpc::Status s = CallRaw(farm.address(), "/grpc.health.v1.Health/Check", "", &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // HealthCheckResponse{status=SERVING(1)}: field 1, varint 1.
  EXPECT_EQ(response, std::string("\x08\x01", 2));
}

}  // namespace
}  // namespace kiln
