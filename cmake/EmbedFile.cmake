# Writes a C++ source defining `std::string_view <FUNCTION>()` that returns
# the bytes of INPUT, so that a file (docs/openapi.yaml) ships inside the
# binary. Run by add_custom_command (src/server/CMakeLists.txt):
#   cmake -DINPUT=... -DOUTPUT=... -DNAMESPACE=... -DFUNCTION=... -P EmbedFile.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
# 0x.., per byte; 16 to a line.
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
string(REGEX REPLACE "(('[^']+',){16})" "\\1\n    " bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
"// Generated from ${INPUT} by cmake/EmbedFile.cmake: do not edit.
#include <string_view>

namespace ${NAMESPACE} {
namespace {
constexpr char kBytes[] = {
    ${bytes}'\\0'};
}  // namespace

std::string_view ${FUNCTION}() { return std::string_view(kBytes, ${size}); }

}  // namespace ${NAMESPACE}
")
# Touch OUTPUT only when it changed, so that nothing rebuilds needlessly.
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
