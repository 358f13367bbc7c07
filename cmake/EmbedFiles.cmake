# Writes one C++ source holding the bytes of several files and a table of
# them, so that a folder of files (the dashboard's) ships inside the binary.
# Run by add_custom_command (src/server/CMakeLists.txt):
#   cmake -DDIR=... -DFILES="a.html;b.js" -DOUTPUT=... -DNAMESPACE=... -DFUNCTION=... -P EmbedFiles.cmake
# The source defines `std::span<const EmbeddedFile> <FUNCTION>()`, where
# EmbeddedFile (declared by the caller's header) is {std::string_view name, bytes}.
set(body "")
set(table "")
set(i 0)
foreach(file IN LISTS FILES)
  file(READ "${DIR}/${file}" hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  # 0x.., per byte; 16 to a line.
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
  string(REGEX REPLACE "(('[^']+',){16})" "\\1\n    " bytes "${bytes}")
  string(APPEND body "constexpr char kFile${i}[] = {\n    ${bytes}'\\0'};\n")
  string(APPEND table "    {\"${file}\", std::string_view(kFile${i}, ${size})},\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE "${OUTPUT}.tmp"
"// Generated from ${DIR} by cmake/EmbedFiles.cmake: do not edit.
#include <array>
#include <span>
#include <string_view>

#include \"${HEADER}\"

namespace ${NAMESPACE} {
namespace {
${body}
constexpr std::array<EmbeddedFile, ${i}> kFiles = {{
${table}}};
}  // namespace

std::span<const EmbeddedFile> ${FUNCTION}() { return kFiles; }

}  // namespace ${NAMESPACE}
")
# Touch OUTPUT only when it changed, so that nothing rebuilds needlessly.
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
