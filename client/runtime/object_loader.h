// A small loader for x86-64 ELF relocatable objects (the code section of a Kiln
// package): maps the allocatable sections, applies relocations, resolves libc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "client/runtime/status.h"

namespace kiln::runtime {

// An ELF64 x86-64 relocatable object loaded into executable memory, like LLVM's
// RuntimeDyld but for the subset that the small/PIC code model produces.
//
// All SHF_ALLOC sections go into one mmap'd region (text and jump stubs, then
// read-only data and the GOT, then writable data and .bss), so that every 32-bit
// PC-relative reference inside the object reaches; calls to symbols outside it go
// through jump stubs and GOT slots in the same region. Undefined symbols are
// resolved with dlsym(RTLD_DEFAULT) (memcpy/memset/memmove always resolve); an
// unknown symbol is an error naming it. After relocation the pages are W^X: text
// RX, read-only data R, data RW. Every index, offset and size in the object is
// checked: a corrupt object gives INVALID_ARGUMENT, never a crash.
// Static constructors (.init_array) are not run. Unmapped on destruction.
class LoadedObject {
 public:
  // `name` is used in error messages only.
  static Result<std::unique_ptr<LoadedObject>> Load(std::string_view elf,
                                                            const std::string& name = "object");
  ~LoadedObject();
  LoadedObject(const LoadedObject&) = delete;
  LoadedObject& operator=(const LoadedObject&) = delete;

  // Address of a defined global (or weak) symbol; NOT_FOUND if there is none.
  Result<void*> Lookup(std::string_view symbol) const;
  // Bytes mapped for the object (sections, stubs, GOT).
  size_t mapped_bytes() const { return size_; }

 private:
  LoadedObject() = default;
  void* base_ = nullptr;
  size_t size_ = 0;
  std::unordered_map<std::string, void*> symbols_;
};

}  // namespace kiln::runtime
