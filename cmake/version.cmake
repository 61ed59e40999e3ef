# Writes version.cc with the project version and the source tree's git
# revision; run at every build (script mode), rewriting the file only when
# the text changes, so an unchanged revision rebuilds nothing.
#   cmake -DSOURCE_DIR=... -DIN=... -DOUT=... -DPIKV_VERSION=... -P version.cmake
set(PIKV_GIT_REVISION "unknown")
# A tree without its git history (the Docker build context leaves .git out)
# takes the revision from PIKV_GIT_REVISION in the environment.
if(NOT "$ENV{PIKV_GIT_REVISION}" STREQUAL "")
  set(PIKV_GIT_REVISION "$ENV{PIKV_GIT_REVISION}")
endif()
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(
    COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
    OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND rev)
    set(PIKV_GIT_REVISION "${rev}")
  endif()
endif()
configure_file("${IN}" "${OUT}" @ONLY)
