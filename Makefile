# The two commands a newcomer needs: `make demo` and `make check`.
BUILD      ?= build
ASAN_BUILD ?= build-asan
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?=

.PHONY: all build demo check check-fast check-asan bench install clean

all: build

build:
	@cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Build, then run the main job on this machine: the quick benchmark report
# (2 ranks, under 30 s).
demo: build
	$(BUILD)/vmmc bench --quick

# Build and pass every test, then again under AddressSanitizer + UBSan.
check: check-fast check-asan

check-fast: build
	cd $(BUILD) && ctest --output-on-failure -j 2 $(CTEST_ARGS)

check-asan:
	@cmake -S . -B $(ASAN_BUILD) -DVMMC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_ARGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j 2 -LE nosan $(CTEST_ARGS)

# The full benchmark report (several minutes).
bench: build
	$(BUILD)/vmmc bench

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
