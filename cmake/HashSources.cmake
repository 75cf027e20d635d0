# cmake -DOUTPUT=<header> -DSOURCE_LIST=<file holding "a;b;..."> -P HashSources.cmake
#
# Writes a header defining FA_COMPILER_SOURCE_HASH, the SHA-256 of the
# compiler's sources. It goes into every kernel cache key, so kernels cached
# by a different compiler (even an uncommitted edit) are never reused.
file(READ ${SOURCE_LIST} sources)
set(contents "")
foreach(source ${sources})
  file(READ ${source} text)
  string(APPEND contents "${source}\n${text}\n")
endforeach()
string(SHA256 hash "${contents}")
string(SUBSTRING ${hash} 0 16 short)
set(header "#define FA_COMPILER_SOURCE_HASH \"${short}\"\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT "${old}" STREQUAL "${header}")
  file(WRITE ${OUTPUT} "${header}")
endif()
