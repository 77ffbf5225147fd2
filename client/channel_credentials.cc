// TLS and token credentials of a channel to kiln-server.
#include "client/channel_credentials.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file.h"

namespace kiln::client {
namespace {

absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", text.status().message()));
  if (!absl::StrContains(*text, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": not a PEM file"));
  }
  return text;
}

void FromEnv(std::string* field, const char* name) {
  if (!field->empty()) return;
  if (const char* value = std::getenv(name); value != nullptr) *field = value;
}

}  // namespace

ChannelSecurity WithEnvironment(ChannelSecurity security) {
  FromEnv(&security.tls_ca, "KILN_TLS_CA");
  FromEnv(&security.tls_cert, "KILN_TLS_CERT");
  FromEnv(&security.tls_key, "KILN_TLS_KEY");
  FromEnv(&security.token_file, "KILN_TOKEN_FILE");
  return security;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const ChannelSecurity& s) {
  if (s.tls_ca.empty()) {
    if (!s.token_file.empty() || !s.tls_cert.empty() || !s.tls_key.empty()) {
      return absl::InvalidArgumentError(
          "--token-file and --tls-cert need --tls-ca (the server's CA): they must not go over plaintext");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (s.tls_cert.empty() != s.tls_key.empty()) return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  grpc::SslCredentialsOptions options;
  auto ca = ReadPem("--tls-ca", s.tls_ca);
  if (!ca.ok()) return ca.status();
  options.pem_root_certs = *ca;
  if (!s.tls_cert.empty()) {
    auto cert = ReadPem("--tls-cert", s.tls_cert);
    if (!cert.ok()) return cert.status();
    auto key = ReadPem("--tls-key", s.tls_key);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *cert;
    options.pem_private_key = *key;
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(options);
  if (s.token_file.empty()) return credentials;
  auto token = ReadFile(s.token_file);
  if (!token.ok()) return absl::InvalidArgumentError(absl::StrCat("--token-file: ", token.status().message()));
  const std::string trimmed(absl::StripAsciiWhitespace(*token));
  if (trimmed.empty()) return absl::InvalidArgumentError(absl::StrCat("--token-file ", s.token_file, ": empty"));
  return grpc::CompositeChannelCredentials(credentials, grpc::AccessTokenCredentials(trimmed));
}

}  // namespace kiln::client
