// Distance-to-conversion files of the endgame database (see egdb.h): checked mapping and writing.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "egdb.h"

namespace cz::egdb {

namespace {

// Not the value files' magic: one kind of file is never taken for the other.
constexpr char kDistanceMagic[8] = {'C', 'Z', 'E', 'G', 'D', 'T', 'C', '\n'};
constexpr size_t kHeaderCrcBytes = 44;  // the header checksum covers bytes 0..43

template <typename T>
void put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
T take(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

std::string distance_file_name(int size, const Signature& s) {
  return std::to_string(size) + "x" + std::to_string(size) + "_" + s.name() + ".dtc";
}

std::unique_ptr<DistanceTable> DistanceTable::open(const std::string& path, int size, const Signature& s) {
  auto fail = [&](const std::string& what) {
    return std::runtime_error("endgame distance file " + path + ": " + what);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) throw fail(std::string("cannot open (") + std::strerror(errno) + ")");
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw fail("not a regular file");
  }
  const uint64_t bytes = uint64_t(st.st_size);
  const uint64_t count = index_size(size, s);
  // Sizes first: a file that cannot be this signature's at either width is refused unread.
  if (bytes != kHeaderBytes + count && bytes != kHeaderBytes + 2 * count) {
    ::close(fd);
    throw fail(std::to_string(bytes) + " bytes, expected " + std::to_string(kHeaderBytes + count) + " or " +
               std::to_string(kHeaderBytes + 2 * count) + " (truncated, padded or another signature's)");
  }
  void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw fail("cannot map");
  std::unique_ptr<DistanceTable> t(new DistanceTable());
  t->map_ = map;
  t->map_bytes_ = bytes;
  const auto* h = static_cast<const uint8_t*>(map);
  if (std::memcmp(h, kDistanceMagic, sizeof(kDistanceMagic)) != 0)
    throw fail("not an endgame distance file (bad magic)");
  if (take<uint32_t>(h + kHeaderCrcBytes) != crc32(h, kHeaderCrcBytes))
    throw fail("damaged header (checksum mismatch)");
  const uint32_t version = take<uint32_t>(h + 8);
  if (version != kDistanceFormatVersion)
    throw fail("format version " + std::to_string(version) + ", this program reads version " +
               std::to_string(kDistanceFormatVersion));
  const uint32_t file_size = take<uint32_t>(h + 12);
  if (file_size != uint32_t(size))
    throw fail("built for the " + std::to_string(file_size) + "x" + std::to_string(file_size) +
               " board, not " + std::to_string(size) + "x" + std::to_string(size));
  const Signature fs{h[16], h[17], h[18], h[19]};
  if (!(fs == s)) throw fail("holds signature " + fs.name() + ", expected " + s.name());
  const uint32_t width = take<uint32_t>(h + 40);
  const uint64_t payload = take<uint64_t>(h + 32);
  if (take<uint64_t>(h + 24) != count || (width != 1 && width != 2) || payload != count * width ||
      bytes != kHeaderBytes + payload)
    throw fail("header disagrees with the index (" + std::to_string(count) + " positions)");
  if (crc32(h + kHeaderBytes, payload) != take<uint32_t>(h + 20))
    throw fail("damaged distances (checksum mismatch)");
  t->data_ = h + kHeaderBytes;
  t->count_ = count;
  t->width_ = int(width);
  return t;
}

DistanceTable::~DistanceTable() {
  if (map_) munmap(map_, map_bytes_);
}

void write_distances(const std::string& path, int size, const Signature& s,
                     const std::vector<uint16_t>& dist) {
  const uint16_t longest = dist.empty() ? 0 : *std::max_element(dist.begin(), dist.end());
  const uint32_t width = longest <= 0xFF ? 1 : 2;
  std::vector<uint8_t> out(kHeaderBytes + dist.size() * width, 0);
  uint8_t* payload = out.data() + kHeaderBytes;
  for (size_t i = 0; i < dist.size(); ++i) {
    payload[i * width] = uint8_t(dist[i] & 0xFF);
    if (width == 2) payload[i * 2 + 1] = uint8_t(dist[i] >> 8);
  }
  uint8_t* h = out.data();
  std::memcpy(h, kDistanceMagic, sizeof(kDistanceMagic));
  put<uint32_t>(h + 8, kDistanceFormatVersion);
  put<uint32_t>(h + 12, uint32_t(size));
  h[16] = uint8_t(s.bm);
  h[17] = uint8_t(s.bk);
  h[18] = uint8_t(s.wm);
  h[19] = uint8_t(s.wk);
  put<uint32_t>(h + 20, crc32(payload, out.size() - kHeaderBytes));
  put<uint64_t>(h + 24, uint64_t(dist.size()));
  put<uint64_t>(h + 32, uint64_t(dist.size()) * width);
  put<uint32_t>(h + 40, width);
  put<uint32_t>(h + kHeaderCrcBytes, crc32(h, kHeaderCrcBytes));
  write_file_atomically(path, out);
}

}  // namespace cz::egdb
