#include "protobuf.h"

#include <openssl/evp.h>

#include <ctime>
#include <memory>
#include <set>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>
#include <google/protobuf/unknown_field_set.h>

#include "apiserver/k8s.pb.h"
#include "status.h"

namespace kubesim {

using nlohmann::json;
namespace pb = google::protobuf;

namespace {

constexpr const char* kPackage = "kubesim.k8s.";

ApiError Unsupported(const std::string& what) {
  return ApiError(415, "UnsupportedMediaType",
                  "kubesim cannot decode this protobuf body: " + what +
                      " (kubesim decodes the kinds and fields of "
                      "tools/kubesim/apiserver/k8s.proto); send the object as JSON instead, e.g. "
                      "`kubectl create -f` / `kubectl apply -f` with a manifest");
}

std::string Base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// metav1.Time (seconds) and MicroTime (microseconds) as their JSON strings; zero is null.
json TimeJson(const pb::Message& m, bool micro) {
  const pb::Descriptor* d = m.GetDescriptor();
  const pb::Reflection* r = m.GetReflection();
  const int64_t seconds = r->GetInt64(m, d->FindFieldByName("seconds"));
  const int32_t nanos = r->GetInt32(m, d->FindFieldByName("nanos"));
  if (seconds == 0 && nanos == 0) return nullptr;
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = buf;
  if (micro) {
    char frac[16];
    std::snprintf(frac, sizeof frac, ".%06d", nanos / 1000);
    out += frac;
  }
  return out + "Z";
}

json ToJson(const pb::Message& m, const std::string& path);

json FieldValue(const pb::Message& m, const pb::FieldDescriptor* f, int index,
                const std::string& path) {
  const pb::Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_STRING: {
      std::string s = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
      // []byte is base64 in JSON (Secret data, ConfigMap binaryData).
      return f->type() == pb::FieldDescriptor::TYPE_BYTES ? json(Base64(s)) : json(std::move(s));
    }
    case pb::FieldDescriptor::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
    case pb::FieldDescriptor::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      return rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      return rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      return ToJson(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f),
                    path + "." + f->name());
    default:
      throw Unsupported("field " + path + "." + f->name() + " has an unsupported type");
  }
}

// A message as the JSON the same Go object would marshal to: fields by their upstream (JSON)
// names; empty lists and maps, and zero values of non-pointer fields left out (Go's omitempty;
// gogo-protobuf writes those fields always; k8s.proto marks the pointers `go_pointer`); maps as
// objects; Time/MicroTime/FieldsV1/IntOrString in their JSON forms.
json ToJson(const pb::Message& m, const std::string& path) {
  const pb::Descriptor* d = m.GetDescriptor();
  const pb::Reflection* r = m.GetReflection();
  const std::string& type = d->full_name();
  if (type == std::string(kPackage) + "Time") return TimeJson(m, false);
  if (type == std::string(kPackage) + "MicroTime") return TimeJson(m, true);
  if (type == std::string(kPackage) + "IntOrString") {
    if (r->GetInt64(m, d->FindFieldByName("type")) == 1) {
      return r->GetString(m, d->FindFieldByName("strVal"));
    }
    const int32_t v = r->GetInt32(m, d->FindFieldByName("intVal"));
    return v == 0 ? json() : json(v);
  }
  if (type == std::string(kPackage) + "FieldsV1") {
    const std::string raw = r->GetString(m, d->FindFieldByName("Raw"));
    return raw.empty() ? json::object() : json::parse(raw);
  }
  const pb::UnknownFieldSet& unknown = r->GetUnknownFields(m);
  if (!unknown.empty()) {
    throw Unsupported("field number " + std::to_string(unknown.field(0).number()) + " of " + path +
                      " (" + d->name() + ") is not in kubesim's subset");
  }
  json out = json::object();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (f->is_map()) {
      json obj = json::object();
      const pb::FieldDescriptor* kf = f->message_type()->map_key();
      const pb::FieldDescriptor* vf = f->message_type()->map_value();
      for (int k = 0; k < r->FieldSize(m, f); ++k) {
        const pb::Message& entry = r->GetRepeatedMessage(m, f, k);
        obj[entry.GetReflection()->GetString(entry, kf)] =
            FieldValue(entry, vf, -1, path + "." + f->name());
      }
      if (!obj.empty()) out[f->name()] = std::move(obj);
    } else if (f->is_repeated()) {
      json arr = json::array();
      for (int k = 0; k < r->FieldSize(m, f); ++k)
        arr.push_back(FieldValue(m, f, k, path + "." + f->name()));
      if (!arr.empty()) out[f->name()] = std::move(arr);
    } else if (r->HasField(m, f)) {
      json v = FieldValue(m, f, -1, path);
      const bool pointer = f->options().GetExtension(k8s::go_pointer);
      if (v.is_null() || (v.is_string() && v.get<std::string>().empty() && !pointer)) continue;
      if (!pointer && ((v.is_boolean() && !v.get<bool>()) ||
                       (v.is_number_integer() && v.get<int64_t>() == 0))) {
        continue;
      }
      out[f->name()] = std::move(v);
    }
  }
  return out;
}

}  // namespace

bool IsProtobufContentType(const std::string& content_type) {
  std::string ct = content_type.substr(0, content_type.find(';'));
  while (!ct.empty() && ct.back() == ' ')
    ct.pop_back();
  return ct == kProtobufMediaType;
}

json DecodeProtobufBody(const std::string& body, const std::string& api_version,
                        const std::string& kind) {
  // The kinds of k8s.proto by group/version: its messages are core/v1's and authorization/v1's
  // (events.k8s.io/v1 Event is another message under the same kind name).
  static const std::set<std::string> kDecodable = {
      "v1/Namespace",
      "v1/ConfigMap",
      "v1/Secret",
      "v1/Event",
      "v1/ServiceAccount",
      "v1/Service",
      "authorization.k8s.io/v1/SelfSubjectAccessReview"};
  static const std::string kMagic("k8s\0", 4);
  if (body.compare(0, kMagic.size(), kMagic) != 0) {
    throw BadRequest(
        "error decoding body: the protobuf body does not start with the k8s\\0 "
        "envelope");
  }
  k8s::Unknown unknown;
  if (!unknown.ParseFromArray(body.data() + kMagic.size(),
                              static_cast<int>(body.size() - kMagic.size()))) {
    throw BadRequest("error decoding body: malformed protobuf envelope");
  }
  if (!unknown.contentencoding().empty()) {
    throw Unsupported("contentEncoding \"" + unknown.contentencoding() + "\"");
  }
  const std::string sent = unknown.typemeta().kind();
  if (!sent.empty() && sent != kind) {
    throw BadRequest("the object provided is unrecognized (must be of type " + kind + "): " + sent);
  }
  const pb::Descriptor* d =
      kDecodable.count(api_version + "/" + kind) == 0
          ? nullptr
          : pb::DescriptorPool::generated_pool()->FindMessageTypeByName(kPackage + kind);
  if (d == nullptr) throw Unsupported("kind " + kind + " (" + api_version + ") has no message");
  std::unique_ptr<pb::Message> msg(pb::MessageFactory::generated_factory()->GetPrototype(d)->New());
  if (!msg->ParseFromString(unknown.raw())) {
    throw BadRequest("error decoding body: malformed " + kind + " message");
  }
  json out = ToJson(*msg, kind);
  out.erase("apiVersion");
  out.erase("kind");
  json obj = {{"apiVersion", unknown.typemeta().apiversion()}, {"kind", kind}};
  if (obj["apiVersion"] == "") obj.erase("apiVersion");
  obj.update(out);
  return obj;
}

}  // namespace kubesim
