// test_hooks.h — what the tests use to prove a fast path ran and to force one. Not part
// of the library's API: no public header includes it, and nothing outside tests/ should.
#pragma once
#include <cstdint>

namespace sb {

// Which path the last CPU copy_kernel / fill_kernel call on this process took, and
// whether it used non-temporal stores.
enum class CopyPath : uint8_t { Empty, Memcpy, Rows, Tiled, Strided, Convert, Fill, FillStrided };
const char* copy_path_name(CopyPath p);
CopyPath last_copy_path();
bool last_copy_used_nt();
// Tiled path: whether 4- or 2-byte tiles went straight to memory as streaming bands
// (copy.cpp, Note [Transpose bands]: 16 or 32, the band's source rows; 2-byte bands are
// always 32), pipelined blocks (Note [Pipelined transpose blocks]: 64) or, for 2-byte
// elements, streaming tile runs (Note [Streaming 2-byte tile runs]: 16) rather than
// through the L1 tile buffer (0).
int last_copy_band_rows();
// Whether those bands (4- or 2-byte) were each read in address order before their
// transposes (copy.cpp, Note [Contiguous bands read in order]).
bool last_copy_read_bands();
// The streaming transposes' shape: 16 or 32 source rows per band (Note [Transpose bands])
// or 64, the pipelined blocks (Note [Pipelined transpose blocks]), and whether tasks walk
// the source rows' direction fastest. Chosen by cpu_tuning() and, where it takes blocks, per
// copy (blocks where dst rows are 4 KiB or more apart and source rows 1024 elements or
// longer, else 16-row bands); tests force each (rows = 0: back to the automatic choice).
// 2-byte elements follow the choice only where their dst rows are 4 KiB or more apart
// (blocks when it says 64, else the L1 tile buffer); nearer dst rows take their 32-row
// bands whatever it says, or no streaming below the tuning's bands16_min_bytes of output.
void set_transpose_bands(int rows, bool source_rows_outer);
// The streaming threshold of copy.h's nt_threshold_bytes(): 0 forces streaming at small
// sizes; negative: back to the default.
void set_nt_threshold_bytes(int64_t bytes);

// Whether the last CPU binary/unary/normalize call stored its output with non-temporal
// stores (elementwise.cpp, Notes [Streaming elementwise outputs] and [Streaming
// normalize outputs]: a dense output above nt_threshold_bytes() that is not also an
// input).
bool last_elementwise_used_nt();
// The grain, in elements, of the last CPU binary/unary call's loop (Note [Grain in bytes]).
int64_t last_elementwise_grain();
// How many blocks of adjacent float32 rows the one-pass guard has sent to the three
// passes in this process (normalize_cols.cpp, Note [Adjacent rows in one pass]).
int64_t normalize_cols_fallbacks();
// How many of those blocks took their write pass from a packed copy (normalize_cols.cpp,
// Note [Adjacent rows packed where their strides alias]).
int64_t normalize_cols_packed();

// The bfloat16 GEMM's packing (gemm_bf16.cpp): -1 automatic (AMX tiles where the CPU has
// AMX-BF16, pairs along k where it has AVX512_BF16, else widened to float32); 2 the tiles
// and 1 the pairs, each through its instructions or, on a CPU without them, the kernel's
// scalar stand-in, so that the packers and their driver are tested on every CPU; 0 widened.
void set_bf16_gemm_pairs(int mode);

// The step bound of the overlap search (overlap.cpp, Note [Overlap from strides]): past
// it get_overlap_status answers TooHard. Tests set 0 to take the callers' TooHard paths
// on any views that are not the same view; negative: back to the default.
void set_overlap_search_steps(int64_t steps);

// The tuning cpu_tuning() returns (Note [Tuning by microarchitecture]): t is used from
// here on (the caller keeps it alive); nullptr: back to the machine's own.
struct CpuTuning;
void set_cpu_tuning(const CpuTuning* t);
const CpuTuning* cpu_tuning_override();  // the tuning set_cpu_tuning installed, or nullptr

}  // namespace sb
