# The two commands a newcomer needs: `make demo` and `make check`.
BUILD      ?= build
ASAN_BUILD ?= build-asan
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?=
# V=1 shows the whole build on the terminal; by default it goes to a log.
V          ?= 0

.PHONY: all build demo check check-fast check-asan bench install clean

all: build

# One line on the terminal, the whole build in $(BUILD)/build.log; its end
# is shown if the build fails.
ifeq ($(V),0)
build:
	@mkdir -p $(BUILD)
	@echo "building vmmc in $(BUILD)/ (log: $(BUILD)/build.log) ..."
	@{ cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_ARGS) && \
	   cmake --build $(BUILD) -j $(JOBS); } >$(BUILD)/build.log 2>&1 || \
	 { tail -n 60 $(BUILD)/build.log; \
	   echo "build failed: the full log is $(BUILD)/build.log"; exit 1; }
	@echo "built: $(BUILD)/vmmc, $(BUILD)/libvmmc.so, $(BUILD)/example_hello"
else
build:
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)
endif

# Build, then run the main job on this machine: the quick benchmark report
# (2 ranks, under 30 s).
demo: build
	@$(BUILD)/vmmc bench --quick

# Build and pass every test, then again under AddressSanitizer + UBSan.
check: check-fast check-asan

check-fast: build
	cd $(BUILD) && ctest --output-on-failure -j 2 $(CTEST_ARGS)

check-asan:
	@$(MAKE) --no-print-directory build BUILD=$(ASAN_BUILD) \
	  CMAKE_ARGS="-DVMMC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_ARGS)"
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j 2 -LE nosan $(CTEST_ARGS)

# The full benchmark report (several minutes).
bench: build
	$(BUILD)/vmmc bench

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX) >$(BUILD)/install.log 2>&1 || \
	 { cat $(BUILD)/install.log; exit 1; }
	@echo "installed in $(PREFIX) (list: $(BUILD)/install.log)"

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
