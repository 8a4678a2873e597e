// storage.h — one refcounted buffer.
//
// Ownership rule: a Storage owns exactly one block from one Allocator and gives it
// back to that allocator when the last std::shared_ptr<Storage> dies. Tensors (and
// so every view) hold it through shared_ptr; a view never copies a Storage. The
// type is neither copyable nor movable: the block has one owner, always.
#pragma once
#include <cstddef>

#include "stridebench/allocator.h"

namespace sb {

class Storage {
 public:
  Storage(size_t nbytes, Allocator* allocator)
      : data_(allocator->allocate(nbytes)), nbytes_(nbytes), allocator_(allocator) {}
  ~Storage() { allocator_->deallocate(data_, nbytes_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  Storage(Storage&&) = delete;
  Storage& operator=(Storage&&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Allocator* allocator() const { return allocator_; }
  Device device() const { return allocator_->device(); }

 private:
  void* data_;
  size_t nbytes_;
  Allocator* allocator_;
};

}  // namespace sb
