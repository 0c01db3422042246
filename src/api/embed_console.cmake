# cmake -DDIST=web/dist -DOUT=api_console_files.cc -P embed_console.cmake
# Writes ConsoleFiles() (starforge/api/console_assets.h): every file of the built console
# (scripts/bootstrap runs `npm run build` in web/) as bytes in the binary, so `forge serve`
# needs nothing beside itself. Without a build it embeds one page that says how to make one.
file(GLOB_RECURSE files RELATIVE "${DIST}" "${DIST}/*")
list(SORT files)
set(body "")
set(table "")
set(i 0)
foreach(rel IN LISTS files)
  if(rel MATCHES "(^|/)\\.")
    continue()  # stamps and editor files are not part of the console
  endif()
  file(READ "${DIST}/${rel}" hex HEX)
  string(LENGTH "${hex}" hexlen)
  math(EXPR size "${hexlen} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "alignas(8) const unsigned char kFile${i}[] = {${bytes}0};\n")
  string(APPEND table "      {\"/${rel}\", {reinterpret_cast<const char*>(kFile${i}), ${size}}},\n")
  math(EXPR i "${i} + 1")
endforeach()
if(i EQUAL 0)
  message(WARNING "the console is not built (${DIST} is empty): forge serve will show a page "
                  "saying so; run scripts/bootstrap (npm ci && npm run build in web/)")
  string(APPEND body
    "constexpr char kFile0[] = \"<!doctype html><meta charset=utf-8><title>StarForge</title>"
    "<p>This forge was built without its web console. Run scripts/bootstrap, which builds web/ "
    "with npm, and build again. The REST API is at /api/v1 (docs/api.md).\";\n")
  string(APPEND table "      {\"/index.html\", {kFile0, sizeof kFile0 - 1}},\n")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from web/dist by src/api/embed_console.cmake. Do not edit.\n"
  "#include \"starforge/api/console_assets.h\"\n\n"
  "namespace starforge::api {\n\n"
  "namespace {\n${body}}  // namespace\n\n"
  "const std::vector<ConsoleFile>& ConsoleFiles() {\n"
  "  static const std::vector<ConsoleFile> files = {\n${table}  };\n"
  "  return files;\n"
  "}\n\n"
  "}  // namespace starforge::api\n")
file(RENAME "${OUT}.tmp" "${OUT}")
