# The web dashboard (web/dashboard) embedded in edgelm serve (serve/dashboard_assets.h).
#
# Three steps, each redone only when its inputs change:
#  1. npm ci in web/dashboard (cmake/npm_ci.cmake): skipped when node_modules already matches
#     package-lock.json, so every preset's build folder shares the one node_modules of the
#     source tree (scripts/setup.sh installs it too) and CI pays npm once;
#  2. vite build of web/dashboard's sources into <build>/dashboard/dist;
#  3. cmake/embed_assets.cmake turns dist/ into <build>/dashboard/dashboard_assets.cpp (bytes,
#     gzip, path, content type and ETag of each file), compiled into edgelm_serve.
# The steps run on the build machine (a cross build embeds the same bytes). With
# EDGELM_DASHBOARD=OFF none of this runs and GET / answers 404.
option(EDGELM_DASHBOARD "Embed the web dashboard (web/dashboard, built with Node.js and npm) in edgelm serve" ON)

# Sets `out_var` to the sources that define dashboard_assets().
function(edgelm_dashboard_sources out_var)
  if(NOT EDGELM_DASHBOARD)
    set(${out_var} ${PROJECT_SOURCE_DIR}/src/serve/dashboard_assets_off.cpp PARENT_SCOPE)
    return()
  endif()
  find_program(EDGELM_NPM npm)
  find_program(EDGELM_NODE node)
  set(missing "")
  if(NOT EDGELM_NODE OR NOT EXISTS "${EDGELM_NODE}")
    list(APPEND missing "node (Debian package nodejs)")
  endif()
  if(NOT EDGELM_NPM OR NOT EXISTS "${EDGELM_NPM}")
    list(APPEND missing "npm (Debian package npm)")
  endif()
  if(missing)
    list(JOIN missing " and " missing)
    message(FATAL_ERROR
      "The dashboard (EDGELM_DASHBOARD=ON, the default) is built from web/dashboard with Node.js and "
      "npm, and ${missing} cannot be found: install the Debian packages nodejs and npm "
      "(scripts/setup.sh does), or configure with -DEDGELM_DASHBOARD=OFF for a server without the dashboard.")
  endif()
  set(web ${PROJECT_SOURCE_DIR}/web/dashboard)
  set(out ${CMAKE_BINARY_DIR}/dashboard)
  file(MAKE_DIRECTORY ${out})
  add_custom_command(
    OUTPUT ${out}/npm-ci.stamp
    COMMAND ${CMAKE_COMMAND} -DNPM=${EDGELM_NPM} -DDIR=${web} -DSTAMP=${out}/npm-ci.stamp
            -P ${PROJECT_SOURCE_DIR}/cmake/npm_ci.cmake
    DEPENDS ${web}/package-lock.json ${web}/package.json ${PROJECT_SOURCE_DIR}/cmake/npm_ci.cmake
    COMMENT "dashboard: npm ci in web/dashboard (only when package-lock.json changed)"
    VERBATIM)
  file(GLOB_RECURSE web_sources CONFIGURE_DEPENDS ${web}/src/* ${web}/public/*)
  add_custom_command(
    OUTPUT ${out}/dist.stamp
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${out}/dist
    COMMAND ${EDGELM_NPM} run --silent build -- --logLevel warn --outDir ${out}/dist --emptyOutDir
    COMMAND ${CMAKE_COMMAND} -E touch ${out}/dist.stamp
    WORKING_DIRECTORY ${web}
    DEPENDS ${out}/npm-ci.stamp ${web_sources} ${web}/index.html ${web}/vite.config.js ${web}/package.json
    COMMENT "dashboard: vite build"
    VERBATIM)
  # The source is a byproduct (Ninja restats it): rewritten only when the bundle changed, so
  # an unchanged bundle recompiles nothing.
  add_custom_command(
    OUTPUT ${out}/embed.stamp
    BYPRODUCTS ${out}/dashboard_assets.cpp
    COMMAND ${CMAKE_COMMAND} -DDIST=${out}/dist -DOUT=${out}/dashboard_assets.cpp
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_assets.cmake
    COMMAND ${CMAKE_COMMAND} -E touch ${out}/embed.stamp
    DEPENDS ${out}/dist.stamp ${PROJECT_SOURCE_DIR}/cmake/embed_assets.cmake
    COMMENT "dashboard: embedding dist/ in the binary"
    VERBATIM)
  # The stamp too: it attaches the command above to the library that lists these sources.
  set(${out_var} ${out}/dashboard_assets.cpp ${out}/embed.stamp PARENT_SCOPE)
endfunction()
