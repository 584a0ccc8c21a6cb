// ISA levels, CPU features and the dispatch cap. Baseline code: no intrinsics here.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace nnkern {

// Ordered within an architecture: a level implies every level below it, except
// avxvnni, which is a side branch of avx2 (256-bit VNNI without AVX-512).
enum class Isa : int {
  scalar = 0,
  avx2,        // AVX2 + FMA
  avxvnni,     // avx2 + AVX-VNNI (VEX vpdpbusd)
  avx512,      // AVX-512 F, BW, DQ, VL
  avx512vnni,  // avx512 + AVX512_VNNI
  avx512bf16,  // avx512vnni + AVX512_BF16 (vdpbf16ps: Cooper Lake, Sapphire Rapids, AMD Zen 4)
  amx,         // avx512bf16 + AMX-TILE, AMX-INT8, AMX-BF16, with the OS's permission to use the tile data (Linux)
  neon,
  neondot,
  neoni8mm,
  neonbf16,    // neoni8mm + BF16 (BFDOT, BFMMLA: Armv8.6, Neoverse V1/V2, Graviton 3)
};

struct CpuFeatures {
  std::string arch;    // "x86_64" or "aarch64"
  std::string vendor;  // e.g. "GenuineIntel"
  std::string model;   // brand string
  // x86
  bool sse42 = false, avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512vnni = false, avxvnni = false, avx512bf16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  bool os_ymm = false, os_zmm = false;  // xgetbv: the OS saves YMM / ZMM state
  bool os_amx = false;                  // xgetbv: the OS saves XTILECFG / XTILEDATA state
  // aarch64
  bool asimd = false, asimddp = false, i8mm = false, bf16 = false;
  // caches in bytes (0 if unknown), per core for L1/L2
  size_t l1d = 0, l2 = 0, l3 = 0;
};

const CpuFeatures& cpu_features();

// Linux grants a process the AMX tile data only on request (arch_prctl ARCH_REQ_XCOMP_PERM, kernel >= 5.16).
// Asked once, on the first call, and only if the CPU and the OS's XCR0 have AMX and NNKERN_MAX_ISA (read at
// start-up) does not name a lower level; false wherever it is refused or not asked.
bool amx_permitted();

const char* isa_name(Isa isa);
bool isa_from_name(const std::string& name, Isa* out);
// All names valid on this build's architecture, lowest first.
std::vector<Isa> isa_levels();
// True if the CPU (and OS) can run code compiled for `isa`. An op may have no kernel at a level;
// the dispatcher then uses its best kernel below it.
bool isa_supported(Isa isa);
// True if `isa` <= `cap` in the partial order (avxvnni <= avx512vnni <= avx512bf16 <= amx, avxvnni !<= avx512).
bool isa_within(Isa isa, Isa cap);

// The cap: the best level the dispatcher may pick. Initialized from NNKERN_MAX_ISA; within a ScopedIsaCap, the
// best level both caps allow.
Isa max_isa();
void set_max_isa(Isa cap);

// A cap of the calling thread's own for its lifetime (an inference session's max_isa), on top of the process's;
// the thread pool's workers take it on while they run this thread's calls. Scopes nest.
class ScopedIsaCap {
 public:
  explicit ScopedIsaCap(Isa cap);
  ~ScopedIsaCap();
  ScopedIsaCap(const ScopedIsaCap&) = delete;
  ScopedIsaCap& operator=(const ScopedIsaCap&) = delete;

 private:
  int previous_;
};
int thread_isa_cap();            // the calling thread's own cap, -1 if none (for the thread pool)
void set_thread_isa_cap(int cap);
// The levels that are both supported and within the cap, lowest first.
std::vector<Isa> active_isas();
bool isa_active(Isa isa);

}  // namespace nnkern
