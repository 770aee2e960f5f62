# The front door. Each target first installs any missing Debian packages (tools/install_deps.sh),
# then hands over to Bazel. See README.md.
BAZEL ?= bazel

.PHONY: demo test build deps format check-format doctor

deps:
	@tools/install_deps.sh

build: deps
	$(BAZEL) build //...

# Runs the whole suite and ends with a line "N passed, N failed".
test: deps
	@tools/run_tests.sh

# Both build bazel-bin/cli/troupe first, showing the build's progress (tools/build_troupe.sh).
demo: deps
	@BAZEL=$(BAZEL) tools/demo.sh

doctor: deps
	@BAZEL=$(BAZEL) tools/build_troupe.sh
	@bazel-bin/cli/troupe doctor

format: deps
	@tools/check_format.sh --fix

check-format: deps
	@tools/check_format.sh
