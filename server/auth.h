// Identity and roles on the server's gRPC listener (docs/operations.md,
// "Identity and roles"). TLS credentials come from files that are re-read
// while the server runs; the auth file names every credential and its roles:
//
//   # roles        identity       credential
//   client         ci-pipeline    sha256:<64 hex: SHA-256 of the bearer token>
//   worker         gpu-host-1     cert:gpu-host-1.farm.internal
//   admin,client   alice          sha256:<64 hex>
//
// A bearer token is sent as gRPC call credentials ("authorization: Bearer
// TOKEN"); the file holds only its digest. `cert:NAME` is a client certificate
// (mutual TLS, --tls-client-ca) whose common name or a subject alternative name
// is NAME. The file is re-read when it changes: a removed credential stops
// working on the next call, connections it opened included.
//
// gRPC's own mechanisms carry it: an AuthMetadataProcessor authenticates every
// call and writes the identity and roles into the call's AuthContext, and each
// RPC handler asks Authorize() for the role its method needs.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/auth_metadata_processor.h>

#include <chrono>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kiln::server {

enum class Role { kClient, kWorker, kAdmin };
std::string_view RoleName(Role role);  // "client", "worker", "admin"

// The parsed auth file.
struct AuthTable {
  struct Entry {
    std::string identity;
    std::set<Role> roles;
  };
  std::map<std::string, Entry> tokens;  // token digest (64 hex) -> entry
  std::map<std::string, Entry> certs;   // certificate name -> entry
};

// INVALID_ARGUMENT naming the file, line and field that is wrong.
absl::StatusOr<AuthTable> ParseAuthTable(std::string_view text, const std::string& path);

// The auth file, re-read when its modification time or size changes (checked
// at most once a second). A file that no longer parses keeps the previous
// table, and says why in the log.
class AuthFile {
 public:
  static absl::StatusOr<std::shared_ptr<AuthFile>> Open(const std::string& path);
  std::shared_ptr<const AuthTable> table();

 private:
  explicit AuthFile(std::string path) : path_(std::move(path)) {}
  std::string path_;
  std::mutex mu_;
  std::shared_ptr<const AuthTable> table_;
  std::string stamp_;  // mtime and size of what table_ was read from
  std::chrono::steady_clock::time_point checked_;
};

// Authenticates each call (see the file comment): an unknown token, or a
// second credential on one connection, is UNAUTHENTICATED; a call without one
// passes, with no roles (Authorize refuses it where a role is needed).
class AuthProcessor : public grpc::AuthMetadataProcessor {
 public:
  explicit AuthProcessor(std::shared_ptr<AuthFile> file) : file_(std::move(file)) {}
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata, OutputMetadata* response_metadata) override;
  // Process never waits (the file is stat'ed at most once a second and read
  // only when it changed): gRPC runs it inline instead of handing every call
  // to another thread and back.
  bool IsBlocking() const override { return false; }

 private:
  std::shared_ptr<AuthFile> file_;
};

// OK when the server checks no credentials (no auth file), or the caller's
// roles include one of `any_of` (admin includes every role); UNAUTHENTICATED without a
// credential; PERMISSION_DENIED naming the identity, its roles and the one
// needed.
grpc::Status Authorize(const grpc::ServerContext* context, std::initializer_list<Role> any_of);

// The caller's identity from the auth file; empty when the server checks no
// credentials or the call brought none.
std::string CallerIdentity(const grpc::ServerContext* context);

// TLS on the listener: the server's certificate and key (PEM files), and, for
// mutual TLS, the CA that signs client certificates (verified when presented).
// Files are re-read every `refresh` (a renewed certificate is served without
// a restart; replace the files atomically).
struct TlsFiles {
  std::string cert, key, client_ca;
  std::chrono::seconds refresh{10};
};

// Insecure credentials when `tls.cert` is empty (then `auth` must be null:
// tokens over plaintext would be readable by anyone on the path); otherwise
// TLS, with `auth` (if set) as the metadata processor. INVALID_ARGUMENT naming
// a file that is missing or not PEM.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& tls,
                                                                               std::shared_ptr<AuthFile> auth);

}  // namespace kiln::server
