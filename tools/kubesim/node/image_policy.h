// Which container images "exist" for kubesim's kubelet (--images policy.yaml). kubesim never
// pulls anything — the host's programs stand in for every image — but a pod whose image is not
// in the policy fails the way the kubelet fails a pull (ErrImagePull / ImagePullBackOff).
//
// The file is a YAML list of image patterns, or a map with the list under `images:`; a pattern
// is matched with fnmatch(3) globs (`*`, `?`, `[…]`) against the image as written in the pod
// AND against its fully qualified form (docker.io/library/busybox:latest for busybox), so
// `rayproject/ray:*`, `docker.io/rayproject/ray:2.*` and `*` all work. Without --images every
// image exists.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kubesim::node {

// "busybox" -> "docker.io/library/busybox:latest"; "ghcr.io/a/b@sha256:…" unchanged.
std::string NormalizeImage(const std::string& image);

// The image with ":latest" added when it has neither tag nor digest (the kubelet's
// applyDefaultImageTag): the form kubelet events quote.
std::string DefaultTag(const std::string& image);

class ImagePolicy {
 public:
  // Every image exists.
  ImagePolicy() = default;
  // Loads a policy file; throws std::runtime_error naming the file and what is wrong.
  static ImagePolicy Load(const std::string& path);
  static ImagePolicy FromPatterns(std::vector<std::string> patterns);

  bool Exists(const std::string& image) const;

 private:
  std::optional<std::vector<std::string>> patterns_;
};

}  // namespace kubesim::node
