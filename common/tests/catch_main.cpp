// The test runner's main() for Catch2 2.x (Catch2 3.x brings its own, Catch2::Catch2WithMain).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
