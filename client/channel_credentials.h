// How a client or worker reaches a server that serves TLS and checks
// credentials (docs/operations.md, "Identity and roles"): the CA its
// certificate is checked against, a client certificate for mutual TLS, and a
// bearer token sent with every call as gRPC call credentials.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kiln::client {

struct ChannelSecurity {
  std::string tls_ca;              // PEM file of the CA that signed the server's certificate; empty: plaintext
  std::string tls_cert, tls_key;   // PEM files of a client certificate and key (mutual TLS)
  std::string token_file;          // a file holding the bearer token (surrounding whitespace ignored)
};

// The unset fields of `security` from the environment: KILN_TLS_CA,
// KILN_TLS_CERT, KILN_TLS_KEY, KILN_TOKEN_FILE.
ChannelSecurity WithEnvironment(ChannelSecurity security);

// Insecure credentials when no field is set; otherwise TLS (with the client
// certificate if given) composed with the token's call credentials.
// INVALID_ARGUMENT naming the file or flag that is wrong (a token or a client
// certificate without --tls-ca: they would go over plaintext).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const ChannelSecurity& security);

}  // namespace kiln::client
