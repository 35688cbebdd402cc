#include "core/store_remedy.h"

namespace appendguard {
namespace {

constexpr StoreOperation kOperations[] = {
    StoreOperation::kWriteBelowEnd, StoreOperation::kAppendExisting,
    StoreOperation::kReopenOwnFile, StoreOperation::kReopenOtherFile,
    StoreOperation::kShrink,        StoreOperation::kEmpty,
    StoreOperation::kGrow,          StoreOperation::kCreateToRename,
    StoreOperation::kRenameNew,     StoreOperation::kRenameOnto,
};

// A write open of an existing file is the store's own business: its bytes stay and writes land anywhere.
bool writes_in_place(const StoreRow& row) {
  return row.write_open == WriteOpen::kKeeps && row.below_end == Accepts::kYes;
}

// A step the store may do: passed on unless the store is known to refuse or ignore it (an undocumented
// step is tried, and the store's answer reported).
bool may_pass(Accepts a) {
  return a == Accepts::kYes || a == Accepts::kUnknown;
}

}  // namespace

Remedy remedy_for(StoreOperation operation, const StoreRow& row) {
  switch (operation) {
    case StoreOperation::kWriteBelowEnd:
      return row.below_end == Accepts::kYes ? Remedy::kPassOn : Remedy::kRefuse;
    case StoreOperation::kAppendExisting:
      if (row.append == Accepts::kYes) return Remedy::kPassOn;
      return row.overwrite == Accepts::kYes ? Remedy::kRewrite : Remedy::kRefuse;
    case StoreOperation::kReopenOwnFile:
      if (writes_in_place(row)) return Remedy::kPassOn;
      return row.append == Accepts::kYes ? Remedy::kAppendReopen : Remedy::kHeldSession;
    case StoreOperation::kReopenOtherFile:
      if (writes_in_place(row)) return Remedy::kPassOn;
      if (row.append == Accepts::kYes) return Remedy::kAppendReopen;
      return row.overwrite == Accepts::kYes ? Remedy::kRewrite : Remedy::kRefuse;
    case StoreOperation::kShrink:
      return row.shrink == Accepts::kYes ? Remedy::kPassOn : Remedy::kRefuse;
    case StoreOperation::kEmpty:
      return may_pass(row.empty) ? Remedy::kPassOn : Remedy::kRefuse;
    case StoreOperation::kGrow:
      return row.grow == Accepts::kYes ? Remedy::kPassOn : Remedy::kDeferredSize;
    case StoreOperation::kCreateToRename:
      return row.rename == Rename::kNone ? Remedy::kSpool : Remedy::kPassOn;
    case StoreOperation::kRenameNew:
      return row.rename == Rename::kNone ? Remedy::kCopyOnRename : Remedy::kPassOn;
    case StoreOperation::kRenameOnto:
      switch (row.rename) {
        case Rename::kNone:
          return Remedy::kCopyOnRename;
        case Rename::kNewNameOnly:
          return Remedy::kRemoveTargetFirst;
        case Rename::kReplaces:
        case Rename::kUnknown:
          break;
      }
      return Remedy::kPassOn;
  }
  return Remedy::kRefuse;
}

std::span<const StoreOperation> store_operations() {
  return kOperations;
}

const char* store_operation_name(StoreOperation operation) {
  switch (operation) {
    case StoreOperation::kWriteBelowEnd:
      return "write below the end";
    case StoreOperation::kAppendExisting:
      return "O_APPEND open of an existing file";
    case StoreOperation::kReopenOwnFile:
      return "write open of a file this process wrote";
    case StoreOperation::kReopenOtherFile:
      return "write open of another's file";
    case StoreOperation::kShrink:
      return "truncate down";
    case StoreOperation::kEmpty:
      return "truncate to 0";
    case StoreOperation::kGrow:
      return "grow (ftruncate, fallocate)";
    case StoreOperation::kCreateToRename:
      return "O_EXCL create";
    case StoreOperation::kRenameNew:
      return "rename to a new name";
    case StoreOperation::kRenameOnto:
      return "rename onto a file";
  }
  return "?";
}

const char* remedy_name(Remedy remedy) {
  switch (remedy) {
    case Remedy::kPassOn:
      return "pass on";
    case Remedy::kAppendReopen:
      return "append reopen";
    case Remedy::kHeldSession:
      return "held session";
    case Remedy::kRewrite:
      return "rewrite";
    case Remedy::kDeferredSize:
      return "deferred size";
    case Remedy::kSpool:
      return "spool";
    case Remedy::kCopyOnRename:
      return "copy on rename";
    case Remedy::kRemoveTargetFirst:
      return "remove target first";
    case Remedy::kRefuse:
      break;
  }
  return "loud refusal";
}

bool holds_sessions(const StoreRow& row) {
  return remedy_for(StoreOperation::kReopenOwnFile, row) == Remedy::kHeldSession;
}

bool renames_files(const StoreRow& row) {
  return remedy_for(StoreOperation::kRenameNew, row) == Remedy::kPassOn;
}

bool removes_target_before_rename(const StoreRow& row) {
  return remedy_for(StoreOperation::kRenameOnto, row) == Remedy::kRemoveTargetFirst;
}

bool refuses_writes(const StoreRow& row) {
  for (StoreOperation operation :
       {StoreOperation::kWriteBelowEnd, StoreOperation::kAppendExisting, StoreOperation::kReopenOtherFile}) {
    if (remedy_for(operation, row) != Remedy::kPassOn) return true;
  }
  return false;
}

}  // namespace appendguard
