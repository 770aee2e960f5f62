#!/bin/sh
echo "coverage collection through Bazel is not available in troupe's offline build" >&2
exit 1
