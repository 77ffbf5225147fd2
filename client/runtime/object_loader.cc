// ELF64 x86-64 relocatable object loader: layout, symbol resolution, relocation, W^X.
#include "client/runtime/object_loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>

#include <cstring>
#include <limits>
#include <vector>


namespace kiln::runtime {
namespace {

constexpr uint64_t kPage = 4096;
// Keeps every 32-bit PC-relative reference inside the region in range.
constexpr uint64_t kMaxRegionBytes = uint64_t{1} << 30;
constexpr uint64_t kStubBytes = 16;  // jmp *0(%rip); .quad target; 2 bytes pad

enum class Segment { kText, kReadOnly, kReadWrite };

struct SectionInfo {
  Elf64_Shdr hdr{};
  bool loaded = false;
  Segment segment = Segment::kText;
  uint64_t offset = 0;  // within its segment until placed, then within the region
};

struct SymbolInfo {
  Elf64_Sym sym{};
  std::string name;
  bool defined = false;   // has an address we know
  bool external = false;  // resolved outside the object
  uint64_t address = 0;
  // For SHN_COMMON: offset within the read-write segment.
  uint64_t common_offset = 0;
  int64_t got_slot = -1;
  int64_t stub = -1;
};

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

bool InRange(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

bool FitsInt32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

// Libc entry points that generated kernels call; resolved without dlsym so that
// they work even from a statically linked host.
void* BuiltinSymbol(const std::string& name) {
  if (name == "memcpy") return reinterpret_cast<void*>(&::memcpy);
  if (name == "memset") return reinterpret_cast<void*>(&::memset);
  if (name == "memmove") return reinterpret_cast<void*>(&::memmove);
  return nullptr;
}

const char* RelocationName(uint32_t type) {
  switch (type) {
    case R_X86_64_64: return "R_X86_64_64";
    case R_X86_64_PC32: return "R_X86_64_PC32";
    case R_X86_64_PLT32: return "R_X86_64_PLT32";
    case R_X86_64_32: return "R_X86_64_32";
    case R_X86_64_32S: return "R_X86_64_32S";
    case R_X86_64_GOTPCREL: return "R_X86_64_GOTPCREL";
    case R_X86_64_GOTPCRELX: return "R_X86_64_GOTPCRELX";
    case R_X86_64_REX_GOTPCRELX: return "R_X86_64_REX_GOTPCRELX";
    case R_X86_64_PC64: return "R_X86_64_PC64";
    case R_X86_64_GOTOFF64: return "R_X86_64_GOTOFF64";
    case R_X86_64_GOTPC32: return "R_X86_64_GOTPC32";
    case R_X86_64_GOTPC64: return "R_X86_64_GOTPC64";
    default: return "unknown";
  }
}

bool IsGotRelocation(uint32_t type) {
  return type == R_X86_64_GOTPCREL || type == R_X86_64_GOTPCRELX || type == R_X86_64_REX_GOTPCRELX;
}

// Parses and checks one object; the loader's state between passes.
class Linker {
 public:
  Linker(std::string_view elf, const std::string& name) : elf_(elf), name_(name) {}

  Status Parse();
  Status Layout();
  Status Resolve();
  Status MapAndRelocate(void** base, size_t* size);
  Status CollectExports(void* base, std::unordered_map<std::string, void*>* out);

 private:
  Status Error(const std::string& what) const {
    return InvalidArgumentError(Cat(name_, ": ", what));
  }
  template <typename T>
  bool ReadAt(uint64_t offset, T* out) const {
    if (!InRange(offset, sizeof(T), elf_.size())) return false;
    std::memcpy(out, elf_.data() + offset, sizeof(T));
    return true;
  }
  // NUL-terminated string at `offset` in string table section `index`.
  Result<std::string> StringAt(uint32_t index, uint64_t offset) const;
  std::string SectionName(uint32_t index) const;
  Status ParseSymbols();
  Status ScanRelocations();
  // Entry k of RELA section `h`, with its symbol index and type.
  struct Relocation {
    Elf64_Rela rela;
    uint64_t sym;
    uint32_t type;
  };
  Relocation RelocationAt(const Elf64_Shdr& h, uint64_t k) const {
    Elf64_Rela r{};
    ReadAt(h.sh_offset + k * sizeof(Elf64_Rela), &r);
    return {r, ELF64_R_SYM(r.r_info), static_cast<uint32_t>(ELF64_R_TYPE(r.r_info))};
  }
  Status ApplyRelocations(uint8_t* base);

  std::string_view elf_;
  std::string name_;
  Elf64_Ehdr ehdr_{};
  std::vector<SectionInfo> sections_;
  uint32_t shstrndx_ = 0;
  int64_t symtab_index_ = -1;
  std::vector<SymbolInfo> symbols_;
  bool needs_low_address_ = false;
  // Segment sizes and, after Layout, their starts in the region.
  uint64_t seg_size_[3] = {0, 0, 0};
  uint64_t seg_start_[3] = {0, 0, 0};
  uint64_t stubs_start_ = 0, got_start_ = 0, total_ = 0;
  int64_t num_got_slots_ = 0, num_stubs_ = 0;
};

Result<std::string> Linker::StringAt(uint32_t index, uint64_t offset) const {
  // Section 0 is the null section: its header holds no contents (Parse checks
  // only the others' ranges), whatever type it claims.
  if (index == 0 || index >= sections_.size() || sections_[index].hdr.sh_type != SHT_STRTAB) {
    return Error(Cat("string table index ", index, " is not a string table"));
  }
  const Elf64_Shdr& h = sections_[index].hdr;
  if (offset >= h.sh_size) {
    return Error(Cat("string offset ", offset, " out of range of section ", index));
  }
  std::string_view table = elf_.substr(h.sh_offset, h.sh_size);
  size_t end = table.find('\0', offset);
  if (end == std::string_view::npos) {
    return Error(Cat("unterminated string in section ", index));
  }
  return std::string(table.substr(offset, end - offset));
}

std::string Linker::SectionName(uint32_t index) const {
  if (index < sections_.size()) {
    auto s = StringAt(shstrndx_, sections_[index].hdr.sh_name);
    if (s.ok() && !s->empty()) return Cat("section '", *s, "'");
  }
  return Cat("section ", index);
}

Status Linker::Parse() {
  if (!ReadAt(0, &ehdr_)) return Error("too small to be an ELF object");
  if (std::memcmp(ehdr_.e_ident, ELFMAG, SELFMAG) != 0) return Error("not an ELF object (bad magic)");
  if (ehdr_.e_ident[EI_CLASS] != ELFCLASS64) return Error("not a 64-bit ELF object");
  if (ehdr_.e_ident[EI_DATA] != ELFDATA2LSB) return Error("not a little-endian ELF object");
  if (ehdr_.e_type != ET_REL) return Error(Cat("ELF type ", ehdr_.e_type, " is not relocatable"));
  if (ehdr_.e_machine != EM_X86_64) {
    return Error(Cat("ELF machine ", ehdr_.e_machine, " is not x86-64"));
  }
  if (ehdr_.e_shoff == 0) return Error("no section headers");
  if (ehdr_.e_shentsize != sizeof(Elf64_Shdr)) {
    return Error(Cat("section header size ", ehdr_.e_shentsize, " is not ", sizeof(Elf64_Shdr)));
  }
  uint64_t shnum = ehdr_.e_shnum;
  Elf64_Shdr first{};
  if (!ReadAt(ehdr_.e_shoff, &first)) return Error("section header table out of range");
  if (shnum == 0) shnum = first.sh_size;  // extended numbering
  shstrndx_ = ehdr_.e_shstrndx == SHN_XINDEX ? first.sh_link : ehdr_.e_shstrndx;
  if (shnum == 0 || shnum > elf_.size() / sizeof(Elf64_Shdr) ||
      !InRange(ehdr_.e_shoff, shnum * sizeof(Elf64_Shdr), elf_.size())) {
    return Error("section header table out of range");
  }
  sections_.resize(shnum);
  for (uint64_t i = 0; i < shnum; ++i) {
    Elf64_Shdr& h = sections_[i].hdr;
    ReadAt(ehdr_.e_shoff + i * sizeof(Elf64_Shdr), &h);
    if (i > 0 && h.sh_type != SHT_NOBITS && !InRange(h.sh_offset, h.sh_size, elf_.size())) {
      return Error(Cat("section ", i, " contents out of range (offset ", h.sh_offset, ", size ",
                                h.sh_size, ", object ", elf_.size(), " bytes)"));
    }
  }
  if (shstrndx_ >= shnum || sections_[shstrndx_].hdr.sh_type != SHT_STRTAB) shstrndx_ = 0;
  for (uint64_t i = 1; i < shnum; ++i) {
    if (sections_[i].hdr.sh_type != SHT_SYMTAB) continue;
    if (symtab_index_ >= 0) return Error("more than one symbol table");
    symtab_index_ = static_cast<int64_t>(i);
  }
  RT_RETURN_IF_ERROR(ParseSymbols());
  return OkStatus();
}

Status Linker::ParseSymbols() {
  if (symtab_index_ < 0) return OkStatus();
  const Elf64_Shdr& h = sections_[symtab_index_].hdr;
  if (h.sh_entsize != sizeof(Elf64_Sym) || h.sh_size % sizeof(Elf64_Sym) != 0) {
    return Error("symbol table has a bad entry size");
  }
  uint64_t n = h.sh_size / sizeof(Elf64_Sym);
  symbols_.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    SymbolInfo& s = symbols_[i];
    ReadAt(h.sh_offset + i * sizeof(Elf64_Sym), &s.sym);
    if (s.sym.st_name != 0) {
      RT_ASSIGN_OR_RETURN(s.name, StringAt(h.sh_link, s.sym.st_name));
    }
    uint16_t shndx = s.sym.st_shndx;
    if (shndx == SHN_XINDEX) return Error(Cat("symbol '", s.name, "': extended section index unsupported"));
    if (shndx != SHN_UNDEF && shndx != SHN_ABS && shndx != SHN_COMMON && shndx >= sections_.size()) {
      return Error(Cat("symbol '", s.name, "': section index ", shndx, " out of range"));
    }
    if (ELF64_ST_TYPE(s.sym.st_info) == STT_TLS) {
      return Error(Cat("symbol '", s.name, "': thread-local storage is unsupported"));
    }
  }
  return OkStatus();
}

Status Linker::Layout() {
  for (size_t i = 0; i < sections_.size(); ++i) {
    SectionInfo& s = sections_[i];
    const Elf64_Shdr& h = s.hdr;
    if (i == 0 || h.sh_type == SHT_NULL || !(h.sh_flags & SHF_ALLOC) || h.sh_size == 0) continue;
    if (h.sh_flags & SHF_TLS) return Error(Cat(SectionName(i), ": thread-local storage is unsupported"));
    if ((h.sh_flags & SHF_WRITE) && (h.sh_flags & SHF_EXECINSTR)) {
      return Error(Cat(SectionName(i), " is both writable and executable"));
    }
    uint64_t align = h.sh_addralign == 0 ? 1 : h.sh_addralign;
    if ((align & (align - 1)) != 0 || align > kPage) {
      return Error(Cat(SectionName(i), ": unsupported alignment ", h.sh_addralign));
    }
    if (h.sh_size > kMaxRegionBytes) return Error(Cat(SectionName(i), " is too large"));
    s.loaded = true;
    s.segment = (h.sh_flags & SHF_EXECINSTR) ? Segment::kText
                : (h.sh_flags & SHF_WRITE)   ? Segment::kReadWrite
                                             : Segment::kReadOnly;
    uint64_t& seg = seg_size_[static_cast<int>(s.segment)];
    s.offset = AlignUp(seg, align);
    seg = s.offset + h.sh_size;
    if (seg > kMaxRegionBytes) return Error("loaded sections are too large");
  }
  // COMMON symbols become zero-filled data in the read-write segment.
  for (SymbolInfo& s : symbols_) {
    if (s.sym.st_shndx != SHN_COMMON) continue;
    uint64_t align = s.sym.st_value == 0 ? 1 : s.sym.st_value;
    if ((align & (align - 1)) != 0 || align > kPage || s.sym.st_size > kMaxRegionBytes) {
      return Error(Cat("common symbol '", s.name, "' has a bad size or alignment"));
    }
    uint64_t& seg = seg_size_[static_cast<int>(Segment::kReadWrite)];
    s.common_offset = AlignUp(seg, align);
    seg = s.common_offset + s.sym.st_size;
    if (seg > kMaxRegionBytes) return Error("loaded sections are too large");
  }
  RT_RETURN_IF_ERROR(ScanRelocations());

  // [text | stubs] page [read-only | GOT] page [read-write]
  seg_start_[0] = 0;
  stubs_start_ = AlignUp(seg_size_[0], 16);
  uint64_t text_end = stubs_start_ + num_stubs_ * kStubBytes;
  seg_start_[1] = AlignUp(text_end, kPage);
  got_start_ = AlignUp(seg_start_[1] + seg_size_[1], 8);
  uint64_t ro_end = got_start_ + num_got_slots_ * 8;
  seg_start_[2] = AlignUp(ro_end, kPage);
  total_ = AlignUp(seg_start_[2] + seg_size_[2], kPage);
  if (total_ == 0) total_ = kPage;
  if (total_ > kMaxRegionBytes) return Error("loaded sections are too large");
  for (SectionInfo& s : sections_) {
    if (s.loaded) s.offset += seg_start_[static_cast<int>(s.segment)];
  }
  for (SymbolInfo& s : symbols_) {
    if (s.sym.st_shndx == SHN_COMMON) s.common_offset += seg_start_[2];
  }
  return OkStatus();
}

Status Linker::ScanRelocations() {
  for (size_t i = 1; i < sections_.size(); ++i) {
    const Elf64_Shdr& h = sections_[i].hdr;
    if (h.sh_type != SHT_RELA && h.sh_type != SHT_REL) continue;
    if (h.sh_info >= sections_.size()) {
      return Error(Cat(SectionName(i), ": relocated section index ", h.sh_info, " out of range"));
    }
    if (!sections_[h.sh_info].loaded) continue;  // debug info and the like
    if (h.sh_type == SHT_REL) return Error(Cat(SectionName(i), ": REL relocations are unsupported"));
    if (static_cast<int64_t>(h.sh_link) != symtab_index_) {
      return Error(Cat(SectionName(i), ": does not refer to the symbol table"));
    }
    if (h.sh_entsize != sizeof(Elf64_Rela) || h.sh_size % sizeof(Elf64_Rela) != 0) {
      return Error(Cat(SectionName(i), ": bad relocation entry size"));
    }
    for (uint64_t k = 0; k < h.sh_size / sizeof(Elf64_Rela); ++k) {
      const auto [r, sym, type] = RelocationAt(h, k);
      if (type == R_X86_64_NONE) continue;
      if (sym >= symbols_.size()) {
        return Error(Cat(SectionName(i), ": relocation ", k, " symbol index ", sym, " out of range"));
      }
      SymbolInfo& s = symbols_[sym];
      bool undefined = s.sym.st_shndx == SHN_UNDEF && sym != 0;
      if (IsGotRelocation(type) && s.got_slot < 0) s.got_slot = num_got_slots_++;
      if (type == R_X86_64_PLT32 && undefined && s.stub < 0) s.stub = num_stubs_++;
      if (type == R_X86_64_32 || type == R_X86_64_32S) needs_low_address_ = true;
    }
  }
  return OkStatus();
}

Status Linker::Resolve() {
  for (size_t i = 1; i < symbols_.size(); ++i) {
    SymbolInfo& s = symbols_[i];
    uint16_t shndx = s.sym.st_shndx;
    if (shndx == SHN_UNDEF) {
      if (s.name.empty()) continue;
      void* addr = BuiltinSymbol(s.name);
      if (addr == nullptr) addr = dlsym(RTLD_DEFAULT, s.name.c_str());
      if (addr == nullptr && ELF64_ST_BIND(s.sym.st_info) != STB_WEAK) {
        return Error(Cat("undefined symbol '", s.name, "'"));
      }
      s.defined = true;
      s.external = true;
      s.address = reinterpret_cast<uint64_t>(addr);
    } else if (shndx == SHN_ABS) {
      s.defined = true;
      s.address = s.sym.st_value;
    }
  }
  return OkStatus();
}

Status Linker::MapAndRelocate(void** base_out, size_t* size_out) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  if (needs_low_address_) flags |= MAP_32BIT;
  void* mem = mmap(nullptr, total_, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (mem == MAP_FAILED) {
    return ResourceExhaustedError(Cat(name_, ": cannot map ", total_, " bytes for code"));
  }
  *base_out = mem;
  *size_out = total_;
  auto* base = static_cast<uint8_t*>(mem);
  for (const SectionInfo& s : sections_) {
    if (s.loaded && s.hdr.sh_type != SHT_NOBITS) {
      std::memcpy(base + s.offset, elf_.data() + s.hdr.sh_offset, s.hdr.sh_size);
    }
  }
  // Addresses of symbols defined in the object.
  for (size_t i = 1; i < symbols_.size(); ++i) {
    SymbolInfo& s = symbols_[i];
    uint16_t shndx = s.sym.st_shndx;
    if (shndx == SHN_COMMON) {
      s.defined = true;
      s.address = reinterpret_cast<uint64_t>(base + s.common_offset);
    } else if (shndx != SHN_UNDEF && shndx != SHN_ABS && sections_[shndx].loaded) {
      if (s.sym.st_value > sections_[shndx].hdr.sh_size) {
        return Error(Cat("symbol '", s.name, "' lies outside its section"));
      }
      s.defined = true;
      s.address = reinterpret_cast<uint64_t>(base + sections_[shndx].offset) + s.sym.st_value;
    }
  }
  // GOT slots and jump stubs.
  for (const SymbolInfo& s : symbols_) {
    if (s.got_slot >= 0) {
      std::memcpy(base + got_start_ + s.got_slot * 8, &s.address, 8);
    }
    if (s.stub >= 0) {
      uint8_t* p = base + stubs_start_ + s.stub * kStubBytes;
      const uint8_t jmp[6] = {0xff, 0x25, 0, 0, 0, 0};  // jmp *0(%rip)
      std::memcpy(p, jmp, 6);
      std::memcpy(p + 6, &s.address, 8);
      p[14] = p[15] = 0xcc;
    }
  }
  RT_RETURN_IF_ERROR(ApplyRelocations(base));

  // W^X: text and stubs RX, read-only data and GOT R, data RW.
  struct Range { uint64_t begin, end; int prot; };
  const Range ranges[] = {
      {0, seg_start_[1], PROT_READ | PROT_EXEC},
      {seg_start_[1], seg_start_[2], PROT_READ},
  };
  for (const Range& r : ranges) {
    if (r.end > r.begin && mprotect(base + r.begin, r.end - r.begin, r.prot) != 0) {
      return InternalError(Cat(name_, ": mprotect failed: ", std::strerror(errno)));
    }
  }
  return OkStatus();
}

Status Linker::ApplyRelocations(uint8_t* base) {
  const uint64_t got = reinterpret_cast<uint64_t>(base + got_start_);
  for (size_t i = 1; i < sections_.size(); ++i) {
    const Elf64_Shdr& h = sections_[i].hdr;
    if (h.sh_type != SHT_RELA || !sections_[h.sh_info].loaded) continue;
    const SectionInfo& target = sections_[h.sh_info];
    if (target.hdr.sh_type == SHT_NOBITS) {
      return Error(Cat(SectionName(i), ": relocations against a NOBITS section"));
    }
    for (uint64_t k = 0; k < h.sh_size / sizeof(Elf64_Rela); ++k) {
      const auto [r, sym, type] = RelocationAt(h, k);
      if (type == R_X86_64_NONE) continue;
      const SymbolInfo& s = symbols_[sym];
      if (sym != 0 && !s.defined) {
        return Error(Cat(SectionName(i), ": relocation against symbol '", s.name,
                                  "' in a section that is not loaded"));
      }
      const uint64_t width = (type == R_X86_64_64 || type == R_X86_64_PC64 || type == R_X86_64_GOTOFF64 ||
                              type == R_X86_64_GOTPC64) ? 8 : 4;
      if (!InRange(r.r_offset, width, target.hdr.sh_size)) {
        return Error(Cat(SectionName(i), ": relocation ", k, " offset ", r.r_offset,
                                  " out of range"));
      }
      uint8_t* place = base + target.offset + r.r_offset;
      const uint64_t P = reinterpret_cast<uint64_t>(place);
      const uint64_t S = sym == 0 ? 0 : s.address;
      const uint64_t A = static_cast<uint64_t>(r.r_addend);
      uint64_t value = 0;
      bool check_int32 = false, check_uint32 = false;
      switch (type) {
        case R_X86_64_64: value = S + A; break;
        case R_X86_64_PC64: value = S + A - P; break;
        case R_X86_64_GOTOFF64: value = S + A - got; break;
        case R_X86_64_GOTPC64: value = got + A - P; break;
        case R_X86_64_PC32: value = S + A - P; check_int32 = true; break;
        case R_X86_64_PLT32:
          value = S + A - P;
          if (s.stub >= 0 && !FitsInt32(static_cast<int64_t>(value))) {
            value = reinterpret_cast<uint64_t>(base + stubs_start_ + s.stub * kStubBytes) + A - P;
          }
          check_int32 = true;
          break;
        case R_X86_64_GOTPCREL:
        case R_X86_64_GOTPCRELX:
        case R_X86_64_REX_GOTPCRELX:
          value = got + s.got_slot * 8 + A - P;
          check_int32 = true;
          break;
        case R_X86_64_GOTPC32: value = got + A - P; check_int32 = true; break;
        case R_X86_64_32: value = S + A; check_uint32 = true; break;
        case R_X86_64_32S: value = S + A; check_int32 = true; break;
        default:
          return Error(Cat(SectionName(i), ": unsupported relocation type ", type));
      }
      if (check_int32 && !FitsInt32(static_cast<int64_t>(value))) {
        return Error(Cat(SectionName(i), ": ", RelocationName(type), " against '", s.name,
                                  "' out of range"));
      }
      if (check_uint32 && value > std::numeric_limits<uint32_t>::max()) {
        return Error(Cat(SectionName(i), ": ", RelocationName(type), " against '", s.name,
                                  "' out of range (object not built as PIC?)"));
      }
      if (width == 8) {
        std::memcpy(place, &value, 8);
      } else {
        uint32_t v32 = static_cast<uint32_t>(value);
        std::memcpy(place, &v32, 4);
      }
    }
  }
  return OkStatus();
}

Status Linker::CollectExports(void* base, std::unordered_map<std::string, void*>* out) {
  for (size_t i = 1; i < symbols_.size(); ++i) {
    const SymbolInfo& s = symbols_[i];
    int bind = ELF64_ST_BIND(s.sym.st_info);
    if (s.name.empty() || s.external || !s.defined || (bind != STB_GLOBAL && bind != STB_WEAK)) continue;
    (*out)[s.name] = reinterpret_cast<void*>(s.address);
  }
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<LoadedObject>> LoadedObject::Load(std::string_view elf, const std::string& name) {
  Linker linker(elf, name);
  RT_RETURN_IF_ERROR(linker.Parse());
  RT_RETURN_IF_ERROR(linker.Layout());
  RT_RETURN_IF_ERROR(linker.Resolve());
  std::unique_ptr<LoadedObject> obj(new LoadedObject());
  RT_RETURN_IF_ERROR(linker.MapAndRelocate(&obj->base_, &obj->size_));
  RT_RETURN_IF_ERROR(linker.CollectExports(obj->base_, &obj->symbols_));
  return obj;
}

LoadedObject::~LoadedObject() {
  if (base_ != nullptr) munmap(base_, size_);
}

Result<void*> LoadedObject::Lookup(std::string_view symbol) const {
  auto it = symbols_.find(std::string(symbol));
  if (it == symbols_.end()) {
    return NotFoundError(Cat("symbol '", std::string(symbol), "' not found in kernel object"));
  }
  return it->second;
}

}  // namespace kiln::runtime
