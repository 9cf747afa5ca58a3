# cmake -DNPM=npm -DDIR=<package folder> -DSTAMP=<file> -P npm_ci.cmake
cmake_minimum_required(VERSION 3.25)
# `npm ci` in DIR unless its node_modules already holds what package-lock.json says (npm writes
# node_modules/.package-lock.json at each install: newer than the lockfile means up to date),
# then touches STAMP. Shared by every build folder, so each pays nothing once one has installed.
set(hidden ${DIR}/node_modules/.package-lock.json)
if(EXISTS ${hidden} AND NOT ${DIR}/package-lock.json IS_NEWER_THAN ${hidden})
  message(STATUS "dashboard: ${DIR}/node_modules is up to date")
else()
  message(STATUS "dashboard: npm ci in ${DIR}")
  execute_process(COMMAND ${NPM} ci --no-audit --no-fund --loglevel=error WORKING_DIRECTORY ${DIR}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "npm ci in ${DIR} failed (${rc}): it needs the npm registry once (scripts/setup.sh "
                        "runs it), or configure with -DEDGELM_DASHBOARD=OFF")
  endif()
endif()
file(TOUCH ${STAMP})
