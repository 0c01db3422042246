#include "tls.h"

#include <cstdio>
#include <ctime>
#include <memory>
#include <stdexcept>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace kubesim {

namespace {

struct Closer {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(FILE* f) const { std::fclose(f); }
};

void AddExt(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) throw std::runtime_error("cannot build certificate extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

}  // namespace

void WriteSelfSignedCert(const std::string& cert_path, const std::string& key_path) {
  std::unique_ptr<EVP_PKEY, Closer> key(EVP_EC_gen("P-256"));
  if (!key) throw std::runtime_error("cannot generate an EC key");
  std::unique_ptr<X509, Closer> cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), static_cast<long>(std::time(nullptr)));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 60L * 60 * 24 * 365);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("kubesim"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  AddExt(cert.get(), NID_basic_constraints, "critical,CA:TRUE");
  AddExt(cert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment,keyCertSign");
  AddExt(cert.get(), NID_ext_key_usage, "serverAuth");
  AddExt(cert.get(), NID_subject_alt_name, "IP:127.0.0.1,IP:::1,DNS:localhost");
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    throw std::runtime_error("cannot sign the certificate");
  }
  std::unique_ptr<FILE, Closer> cf(std::fopen(cert_path.c_str(), "w"));
  if (!cf || PEM_write_X509(cf.get(), cert.get()) == 0) {
    throw std::runtime_error("cannot write " + cert_path);
  }
  std::unique_ptr<FILE, Closer> kf(std::fopen(key_path.c_str(), "w"));
  if (!kf ||
      PEM_write_PrivateKey(kf.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 0) {
    throw std::runtime_error("cannot write " + key_path);
  }
}

}  // namespace kubesim
