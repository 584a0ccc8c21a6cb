# Cross toolchain for aarch64 Linux on a Debian x86-64 host: g++-aarch64-linux-gnu + qemu-user(-static).
#   cmake -S . -B build -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DNNKERN_NATIVE_TESTS=ON
# ctest then runs every test executable under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR); pick the
# emulated CPU with the QEMU_CPU environment variable (tests/native/CMakeLists.txt sets it per test).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64 REQUIRED)
# The -L sysroot: the cross glibc/libstdc++ by default; tools/test-aarch64.sh points it at its arm64
# Debian tree (which also holds Python for the extension tests).
set(ARM64_QEMU_LD_PREFIX /usr/aarch64-linux-gnu CACHE PATH "qemu-aarch64 -L sysroot")
set(CMAKE_CROSSCOMPILING_EMULATOR ${QEMU_AARCH64} -L ${ARM64_QEMU_LD_PREFIX})
