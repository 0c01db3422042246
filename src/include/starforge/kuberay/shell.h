// Shell quoting for text that KubeRay pastes unquoted into `bash -ce`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace starforge::kuberay {

// One word, always single-quoted: 'it'"'"'s'. Every byte (newlines, $, `, ;) stays literal in
// bash and POSIX sh.
std::string ShellQuote(std::string_view word);

// Words quoted and joined with single spaces.
std::string ShellJoin(const std::vector<std::string>& words);

}  // namespace starforge::kuberay
