// What a tf_program* points to: the outcome of one run-time compilation.
#pragma once

#include <string>
#include <vector>

struct tf_program {
    std::string log;
    std::vector<char> image;  // empty when the source did not compile
};
