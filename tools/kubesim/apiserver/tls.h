// A self-signed serving certificate made at start-up (OpenSSL), valid for 127.0.0.1, ::1 and
// localhost, and usable as its own CA (clients trust it via certificate-authority).
#pragma once

#include <string>

namespace kubesim {

// Writes a PEM certificate to `cert_path` and its PEM private key to `key_path`. Throws
// std::runtime_error on failure.
void WriteSelfSignedCert(const std::string& cert_path, const std::string& key_path);

}  // namespace kubesim
