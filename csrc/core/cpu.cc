// CPU feature detection: cpuid + xgetbv on x86-64, getauxval on aarch64.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/isa.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#endif
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

namespace nnkern {
namespace {

// The first line of a small text file (sysfs, /proc), without its newline; false if it cannot be read.
// C stdio, not iostreams: formatted iostream input goes through the process's locale facets, and on a
// Sapphire Rapids host running a Python 3.12 venv with torch, `ifstream >> int` here crashed inside
// libstdc++ (a facet call landing in the wrong function) before any kernel ran.
bool read_line(FILE* f, char* buf, size_t n) {
  if (!std::fgets(buf, int(n), f)) return false;
  buf[std::strcspn(buf, "\n")] = 0;
  return true;
}
bool read_first_line(const std::string& path, char* buf, size_t n) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return false;
  const bool ok = read_line(f, buf, n);
  std::fclose(f);
  return ok;
}

#if defined(__x86_64__) || defined(_M_X64)
struct Regs { uint32_t a = 0, b = 0, c = 0, d = 0; };

Regs cpuid(uint32_t leaf, uint32_t sub = 0) {
  Regs r;
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return r;
}

uint64_t xgetbv0() {
  uint32_t lo, hi;
  // Encoded directly so that no -mxsave flag is needed in baseline code.
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

void detect_x86(CpuFeatures& f) {
  f.arch = "x86_64";
  Regs r0 = cpuid(0);
  char vendor[13] = {0};
  std::memcpy(vendor + 0, &r0.b, 4);
  std::memcpy(vendor + 4, &r0.d, 4);
  std::memcpy(vendor + 8, &r0.c, 4);
  f.vendor = vendor;
  uint32_t max_leaf = r0.a;

  Regs ext0 = cpuid(0x80000000u);
  if (ext0.a >= 0x80000004u) {
    char brand[49] = {0};
    for (uint32_t i = 0; i < 3; ++i) {
      Regs r = cpuid(0x80000002u + i);
      std::memcpy(brand + 16 * i + 0, &r.a, 4);
      std::memcpy(brand + 16 * i + 4, &r.b, 4);
      std::memcpy(brand + 16 * i + 8, &r.c, 4);
      std::memcpy(brand + 16 * i + 12, &r.d, 4);
    }
    std::string s = brand;
    size_t b = s.find_first_not_of(' ');
    f.model = b == std::string::npos ? "" : s.substr(b);
  }

  Regs r1 = cpuid(1);
  f.sse42 = r1.c & (1u << 20);
  f.fma = r1.c & (1u << 12);
  f.f16c = r1.c & (1u << 29);
  bool osxsave = r1.c & (1u << 27);
  f.avx = r1.c & (1u << 28);
  if (osxsave) {
    uint64_t xcr0 = xgetbv0();
    f.os_ymm = (xcr0 & 0x6) == 0x6;            // XMM and YMM state
    f.os_zmm = f.os_ymm && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
    f.os_amx = (xcr0 & 0x60000) == 0x60000;        // XTILECFG, XTILEDATA
  }
  if (max_leaf >= 7) {
    Regs r7 = cpuid(7, 0);
    f.avx2 = r7.b & (1u << 5);
    f.avx512f = r7.b & (1u << 16);
    f.avx512dq = r7.b & (1u << 17);
    f.avx512bw = r7.b & (1u << 30);
    f.avx512vl = r7.b & (1u << 31);
    f.avx512vnni = r7.c & (1u << 11);
    f.amx_bf16 = r7.d & (1u << 22);
    f.amx_tile = r7.d & (1u << 24);
    f.amx_int8 = r7.d & (1u << 25);
    if (r7.a >= 1) {
      Regs r71 = cpuid(7, 1);
      f.avxvnni = r71.a & (1u << 4);
      f.avx512bf16 = r71.a & (1u << 5);
    }
  }
}
#endif

#if defined(__aarch64__)
void detect_arm64(CpuFeatures& f) {
  f.arch = "aarch64";
  unsigned long hw = getauxval(AT_HWCAP);
  unsigned long hw2 = getauxval(AT_HWCAP2);
  f.asimd = hw & (1ul << 1);     // HWCAP_ASIMD
  f.asimddp = hw & (1ul << 20);  // HWCAP_ASIMDDP
  f.i8mm = hw2 & (1ul << 13);    // HWCAP2_I8MM
  f.bf16 = hw2 & (1ul << 14);    // HWCAP2_BF16
  FILE* in = std::fopen("/proc/cpuinfo", "r");
  if (!in) return;
  char buf[1024];
  while (read_line(in, buf, sizeof buf)) {  // a longer line comes in pieces, none of them one of these
    const std::string line(buf);
    const size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    if (line.rfind("CPU implementer", 0) == 0 && f.vendor.empty()) f.vendor = line.substr(colon + 2);
    if (line.rfind("CPU part", 0) == 0 && f.model.empty()) f.model = "part " + line.substr(colon + 2);
  }
  std::fclose(in);
}
#endif

// Cache size of a level from sysfs (per core for L1d/L2), sysconf as a fallback.
size_t cache_bytes(int level, const char* type, int sc_name) {
  for (int idx = 0; idx < 8; ++idx) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/";
    char lv[32], ty[32], sz[32];
    if (!read_first_line(dir + "level", lv, sizeof lv) || !read_first_line(dir + "type", ty, sizeof ty) ||
        !read_first_line(dir + "size", sz, sizeof sz))
      continue;
    if (std::atoi(lv) != level || (std::strcmp(ty, type) != 0 && std::strcmp(ty, "Unified") != 0)) continue;
    char* unit = nullptr;
    size_t v = std::strtoull(sz, &unit, 10);
    if (*unit == 'K') v <<= 10;
    if (*unit == 'M') v <<= 20;
    return v;
  }
  long v = sysconf(sc_name);
  return v > 0 ? size_t(v) : 0;
}

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(_M_X64)
  detect_x86(f);
#elif defined(__aarch64__)
  detect_arm64(f);
#else
  f.arch = "unknown";
#endif
#ifdef _SC_LEVEL1_DCACHE_SIZE
  f.l1d = cache_bytes(1, "Data", _SC_LEVEL1_DCACHE_SIZE);
  f.l2 = cache_bytes(2, "Unified", _SC_LEVEL2_CACHE_SIZE);
  f.l3 = cache_bytes(3, "Unified", _SC_LEVEL3_CACHE_SIZE);
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

bool amx_permitted() {
  static const bool permitted = [] {
    const CpuFeatures& f = cpu_features();
    if (!f.amx_tile || !f.os_amx) return false;
    // A process started with a lower cap never asks: once granted, Linux refuses any later sigaltstack
    // too small for the larger signal frame, which could break other code in the process.
    const char* env = std::getenv("NNKERN_MAX_ISA");
    Isa cap;
    if (env && *env && isa_from_name(env, &cap) && cap != Isa::amx) return false;
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__linux__)
    // The raw syscall: glibc has no wrapper. Granting is per process and sticky; the state is then
    // allocated per thread on first use (the kernel's XFD trap), so every pool thread may run AMX.
    constexpr long kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
    unsigned long mask = 0;
    return syscall(SYS_arch_prctl, kArchGetXcompPerm, &mask) == 0 && (mask & (1ul << kXfeatureXtiledata));
#else
    return false;
#endif
  }();
  return permitted;
}

}  // namespace nnkern
