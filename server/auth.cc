// Identity and roles: the auth file, the metadata processor, Authorize, and
// the listener's TLS credentials.
#include "server/auth.h"

#include <sys/stat.h>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/digest.h"
#include "base/file.h"
#include "base/log.h"

namespace kiln::server {
namespace {

// AuthContext properties this file writes (the connection's context: gRPC
// keeps it for every call on the connection).
constexpr char kAuthOn[] = "kiln_auth";              // "on": this listener checks credentials
constexpr char kCredential[] = "kiln_credential";    // "sha256:<hex>" or "cert:<name>"
constexpr char kIdentity[] = "kiln_identity";
constexpr char kRoles[] = "kiln_roles";              // "client,worker"

// The connection's AuthContext is shared by its calls, and gRPC's property
// list is not safe to grow while another thread reads it: every read and
// write of Kiln's properties holds this.
std::mutex& ContextMutex() {
  static std::mutex mu;
  return mu;
}

std::string RolesText(const std::set<Role>& roles) {
  std::vector<std::string> names;
  for (Role r : roles) names.emplace_back(RoleName(r));
  return absl::StrJoin(names, ",");
}

std::string FirstValue(const grpc::AuthContext& context, const char* name) {
  std::vector<grpc::string_ref> values = context.FindPropertyValues(name);
  return values.empty() ? std::string() : std::string(values.front().data(), values.front().size());
}

// "mtime-ns size inode" of the file, or "" when it cannot be stat'ed.
std::string Stamp(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat(st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, " ", st.st_size, " ", st.st_ino);
}

bool IsLowerHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kClient:
      return "client";
    case Role::kWorker:
      return "worker";
    case Role::kAdmin:
      return "admin";
  }
  return "?";
}

absl::StatusOr<AuthTable> ParseAuthTable(std::string_view text_in, const std::string& path) {
  const absl::string_view text(text_in.data(), text_in.size());
  AuthTable table;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("auth file ", path, " line ", number, ": ", why));
    };
    if (fields.size() != 3) return bad("expected 'ROLES IDENTITY CREDENTIAL' (3 fields)");
    AuthTable::Entry entry;
    entry.identity = std::string(fields[1]);
    for (absl::string_view name : absl::StrSplit(fields[0], ',')) {
      if (name == "client") {
        entry.roles.insert(Role::kClient);
      } else if (name == "worker") {
        entry.roles.insert(Role::kWorker);
      } else if (name == "admin") {
        entry.roles.insert(Role::kAdmin);
      } else {
        return bad(absl::StrCat("unknown role '", name, "' (client, worker, admin)"));
      }
    }
    absl::string_view credential = fields[2];
    if (absl::ConsumePrefix(&credential, "sha256:")) {
      if (credential.size() != 64 || !IsLowerHex(credential)) {
        return bad("a token credential is sha256: and the 64 lower-case hex digits of the token's SHA-256");
      }
      if (!table.tokens.emplace(std::string(credential), entry).second) return bad("this token is listed twice");
    } else if (absl::ConsumePrefix(&credential, "cert:")) {
      if (credential.empty()) return bad("cert: needs the certificate's common name or subject alternative name");
      if (!table.certs.emplace(std::string(credential), entry).second) return bad("this certificate is listed twice");
    } else {
      return bad(absl::StrCat("credential '", fields[2], "' is neither sha256:<hex> nor cert:<name>"));
    }
  }
  return table;
}

absl::StatusOr<std::shared_ptr<AuthFile>> AuthFile::Open(const std::string& path) {
  std::shared_ptr<AuthFile> file(new AuthFile(path));
  file->stamp_ = Stamp(path);
  auto text = ReadFile(path);
  if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat("auth file: ", text.status().message()));
  auto table = ParseAuthTable(*text, path);
  if (!table.ok()) return table.status();
  file->table_ = std::make_shared<const AuthTable>(*std::move(table));
  file->checked_ = std::chrono::steady_clock::now();
  return file;
}

std::shared_ptr<const AuthTable> AuthFile::table() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now - checked_ < std::chrono::seconds(1)) return table_;
  checked_ = now;
  const std::string stamp = Stamp(path_);
  if (stamp.empty() || stamp == stamp_) return table_;
  auto text = ReadFile(path_);
  auto table = text.ok() ? ParseAuthTable(*text, path_) : absl::StatusOr<AuthTable>(text.status());
  if (!table.ok()) {
    LogWarn("auth file changed but cannot be used; keeping the previous one", {{"error", table.status().ToString()}});
    return table_;
  }
  stamp_ = stamp;
  table_ = std::make_shared<const AuthTable>(*std::move(table));
  LogInfo("auth file reloaded", {{"path", path_},
                                 {"tokens", absl::StrCat(table_->tokens.size())},
                                 {"certificates", absl::StrCat(table_->certs.size())}});
  return table_;
}

grpc::Status AuthProcessor::Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                                    OutputMetadata* consumed_auth_metadata, OutputMetadata* response_metadata) {
  std::shared_ptr<const AuthTable> table = file_->table();
  auto unauthenticated = [](const std::string& why) { return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why); };
  // This call's credential: a bearer token, else a verified client certificate.
  std::string credential;
  const AuthTable::Entry* entry = nullptr;
  if (auto it = auth_metadata.find("authorization"); it != auth_metadata.end()) {
    absl::string_view value(it->second.data(), it->second.size());
    if (!absl::ConsumePrefix(&value, "Bearer ") || value.empty()) {
      return unauthenticated("the authorization metadata is not 'Bearer TOKEN'");
    }
    const std::string digest = Sha256Hex(std::string_view(value.data(), value.size()));
    auto found = table->tokens.find(digest);
    if (found == table->tokens.end()) return unauthenticated("unknown token");
    credential = absl::StrCat("sha256:", digest);
    entry = &found->second;
  }
  std::lock_guard<std::mutex> lock(ContextMutex());
  if (!context->FindPropertyValues(kAuthOn).empty()) {
    // Not the connection's first call: what it authenticated as must still hold.
    const std::string prior = FirstValue(*context, kCredential);
    if (!prior.empty()) {
      if (!credential.empty() && credential != prior) {
        return unauthenticated("one credential per connection: this call's token is not the one it began with");
      }
      absl::string_view key = prior;
      const AuthTable::Entry* now = nullptr;
      if (absl::ConsumePrefix(&key, "sha256:")) {
        auto found = table->tokens.find(std::string(key));
        if (found != table->tokens.end()) now = &found->second;
      } else if (absl::ConsumePrefix(&key, "cert:")) {
        auto found = table->certs.find(std::string(key));
        if (found != table->certs.end()) now = &found->second;
      }
      if (now == nullptr) {
        return unauthenticated(absl::StrCat("the credential of '", FirstValue(*context, kIdentity), "' was revoked"));
      }
      if (RolesText(now->roles) != FirstValue(*context, kRoles)) {
        return unauthenticated(absl::StrCat("the roles of '", now->identity, "' changed: reconnect"));
      }
      return grpc::Status::OK;
    }
    if (credential.empty()) return grpc::Status::OK;  // a later call may still bring a token
  } else {
    context->AddProperty(kAuthOn, "on");
  }
  if (credential.empty()) {
    // A client certificate the TLS handshake verified, listed by one of its names.
    for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
      for (const grpc::string_ref& name : context->FindPropertyValues(property)) {
        auto found = table->certs.find(std::string(name.data(), name.size()));
        if (found == table->certs.end()) continue;
        credential = absl::StrCat("cert:", found->first);
        entry = &found->second;
        break;
      }
      if (entry != nullptr) break;
    }
  }
  if (entry == nullptr) return grpc::Status::OK;  // no credential: Authorize refuses where one is needed
  context->AddProperty(kCredential, credential);
  context->AddProperty(kIdentity, entry->identity);
  context->AddProperty(kRoles, RolesText(entry->roles));
  return grpc::Status::OK;
}

grpc::Status Authorize(const grpc::ServerContext* context, std::initializer_list<Role> any_of) {
  std::vector<std::string> needed;
  for (Role r : any_of) needed.emplace_back(RoleName(r));
  std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  if (auth == nullptr) return grpc::Status::OK;
  std::lock_guard<std::mutex> lock(ContextMutex());
  if (auth->FindPropertyValues(kAuthOn).empty()) return grpc::Status::OK;  // this listener checks nothing
  const std::string roles = FirstValue(*auth, kRoles);
  if (roles.empty()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat("this server needs a credential with the role ", absl::StrJoin(needed, " or "),
                                     ": a bearer token (--token-file) or a client certificate"));
  }
  for (absl::string_view r : absl::StrSplit(roles, ',')) {
    if (r == absl::string_view(RoleName(Role::kAdmin).data(), RoleName(Role::kAdmin).size())) return grpc::Status::OK;
    for (const std::string& n : needed) {
      if (r == n) return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat("'", FirstValue(*auth, kIdentity), "' has the roles ", roles, "; this call needs ",
                                   absl::StrJoin(needed, " or ")));
}

std::string CallerIdentity(const grpc::ServerContext* context) {
  std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  if (auth == nullptr) return "";
  std::lock_guard<std::mutex> lock(ContextMutex());
  return FirstValue(*auth, kIdentity);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& tls,
                                                                               std::shared_ptr<AuthFile> auth) {
  if (tls.cert.empty() != tls.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (tls.cert.empty()) {
    if (!tls.client_ca.empty()) return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
    if (auth != nullptr) {
      return absl::InvalidArgumentError(
          "--auth-file needs TLS (--tls-cert, --tls-key): tokens over plaintext can be read on the way");
    }
    return grpc::InsecureServerCredentials();
  }
  for (const auto& [flag, path] : {std::pair<const char*, std::string>{"--tls-cert", tls.cert},
                                   {"--tls-key", tls.key},
                                   {"--tls-client-ca", tls.client_ca}}) {
    if (path.empty()) continue;
    auto text = ReadFile(path);
    if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", text.status().message()));
    if (!absl::StrContains(*text, "-----BEGIN ")) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": not a PEM file"));
    }
  }
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key, tls.cert, tls.client_ca, static_cast<unsigned>(std::max<int64_t>(1, tls.refresh.count())));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!tls.client_ca.empty()) {
    options.watch_root_certs();
    // Verified when presented, not required: clients may use tokens instead.
    options.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::experimental::TlsServerCredentials(options);
  if (auth != nullptr) credentials->SetAuthMetadataProcessor(std::make_shared<AuthProcessor>(std::move(auth)));
  return credentials;
}

}  // namespace kiln::server
