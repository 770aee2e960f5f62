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

demo: deps
	@tools/demo.sh

doctor: deps
	@$(BAZEL) run --ui_event_filters=-info,-stdout,-stderr --noshow_progress //cli:troupe -- doctor

format: deps
	@tools/check_format.sh --fix

check-format: deps
	@tools/check_format.sh
