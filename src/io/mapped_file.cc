#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace qlm::io {
namespace {

// Closes the descriptor on every path out of open().
struct FdGuard {
  int fd = -1;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  const ErrorContext where{path.string(), "", ""};
  FdGuard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) {
    int err = errno;
    fail("safetensors.io", where, err == ENOENT ? "check the path" : "check the file's permissions",
         "cannot open the file: {}", std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0)
    fail("safetensors.io", where, "", "cannot stat the file: {}", std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    fail("safetensors.io", where, "pass a .safetensors file", "not a regular file (a directory, device or pipe)");

  auto file = std::shared_ptr<MappedFile>(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ == 0) return file;
  void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (p == MAP_FAILED)
    fail("safetensors.io", where, "check free address space and the filesystem", "cannot mmap {} bytes: {}",
         file->size_, std::strerror(errno));
  file->data_ = static_cast<const std::byte*>(p);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace qlm::io
