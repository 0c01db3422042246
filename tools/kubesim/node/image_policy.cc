#include "node/image_policy.h"

#include <fnmatch.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "parse_yaml.h"

namespace kubesim::node {

namespace {

// Splits "name[:tag][@digest]" (a ':' after the last '/' is a tag, not a registry port).
void SplitRef(const std::string& image, std::string* name, std::string* tag, std::string* digest) {
  std::string rest = image;
  const auto at = rest.find('@');
  if (at != std::string::npos) {
    *digest = rest.substr(at + 1);
    rest.resize(at);
  }
  const auto slash = rest.rfind('/');
  const auto colon = rest.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    *tag = rest.substr(colon + 1);
    rest.resize(colon);
  }
  *name = rest;
}

}  // namespace

std::string DefaultTag(const std::string& image) {
  std::string name, tag, digest;
  SplitRef(image, &name, &tag, &digest);
  if (tag.empty() && digest.empty()) return image + ":latest";
  return image;
}

std::string NormalizeImage(const std::string& image) {
  std::string name, tag, digest;
  SplitRef(image, &name, &tag, &digest);
  const auto slash = name.find('/');
  if (slash == std::string::npos) {
    name = "docker.io/library/" + name;
  } else {
    const std::string first = name.substr(0, slash);
    const bool registry = first.find('.') != std::string::npos ||
                          first.find(':') != std::string::npos || first == "localhost";
    if (!registry) name = "docker.io/" + name;
  }
  std::string out = name;
  if (!tag.empty()) out += ":" + tag;
  if (!digest.empty()) out += "@" + digest;
  if (tag.empty() && digest.empty()) out += ":latest";
  return out;
}

ImagePolicy ImagePolicy::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read image policy " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json doc;
  try {
    doc = kubesim::ParseYamlOrThrow(ss.str());
  } catch (const std::exception& e) {
    throw std::runtime_error("image policy " + path + ": " + e.what());
  }
  if (doc.is_object() && doc.contains("images")) doc = doc["images"];
  if (doc.is_null()) doc = nlohmann::json::array();
  if (!doc.is_array()) {
    throw std::runtime_error("image policy " + path +
                             ": expected a list of image patterns (or `images: [...]`)");
  }
  std::vector<std::string> patterns;
  for (size_t i = 0; i < doc.size(); ++i) {
    if (!doc[i].is_string() || doc[i].get<std::string>().empty()) {
      throw std::runtime_error("image policy " + path + ": entry " + std::to_string(i) +
                               " must be a non-empty string");
    }
    patterns.push_back(doc[i].get<std::string>());
  }
  return FromPatterns(std::move(patterns));
}

ImagePolicy ImagePolicy::FromPatterns(std::vector<std::string> patterns) {
  ImagePolicy p;
  p.patterns_ = std::move(patterns);
  return p;
}

bool ImagePolicy::Exists(const std::string& image) const {
  if (!patterns_) return true;
  const std::string full = NormalizeImage(image);
  for (const auto& pat : *patterns_) {
    if (fnmatch(pat.c_str(), image.c_str(), 0) == 0) return true;
    if (fnmatch(pat.c_str(), full.c_str(), 0) == 0) return true;
  }
  return false;
}

}  // namespace kubesim::node
