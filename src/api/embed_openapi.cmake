# cmake -DIN=openapi.json -DOUT=api_openapi.cc -P embed_openapi.cmake
# Writes OpenApiDocument() (starforge/api/routes.h) returning IN's text as a raw string literal.
file(READ "${IN}" doc)
string(FIND "${doc}" ")sf_openapi\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )sf_openapi\"")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from src/api/openapi.json by src/api/embed_openapi.cmake. Do not edit.\n"
  "#include \"starforge/api/routes.h\"\n\n"
  "namespace starforge::api {\n\n"
  "std::string_view OpenApiDocument() {\n"
  "  static constexpr std::string_view kDocument = R\"sf_openapi(${doc})sf_openapi\";\n"
  "  return kDocument;\n"
  "}\n\n"
  "}  // namespace starforge::api\n")
file(RENAME "${OUT}.tmp" "${OUT}")
