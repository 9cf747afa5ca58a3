// The report of `edgelm optimize`: Markdown (the machine, the SLA, why the winner won or what
// binds, the device preset, every candidate measured, the Pareto front) and an SVG plot of
// latency vs quality with memory as the marker size, written by hand (an SVG is text).
#pragma once

#include <string>

#include "core/result.h"
#include "tools/optimize/search.h"

namespace edgelm::tools::optimize {

// `svg_name`: the plot's file name as the Markdown links it (beside the report).
std::string report_markdown(const SearchOptions& o, const SearchResult& r, const std::string& svg_name);
std::string pareto_svg(const SearchOptions& o, const SearchResult& r);

// The rows of the Pareto front (latency vs KLD vs RSS) among the rows of the furthest stage
// reached (load tests, else bench runs).
std::vector<int> pareto_rows(const SearchResult& r);

// Writes both. Errors: a file cannot be written.
Status write_report(const SearchOptions& o, const SearchResult& r, const std::string& md_path,
                    const std::string& svg_path);

// "model name @ N hardware threads, ISA": from /proc/cpuinfo and the kernels' ISA choice.
std::string machine_description();

}  // namespace edgelm::tools::optimize
