// The one set of mount flags, as mount tables, child requests and plan
// steps hold it. Defined in sys/ (the layer that applies it); named here.
#pragma once

#include "sys/mount.hpp"

namespace ctx::mountspec {

/// The one set of mount flags (MOUNT_ATTR_*), set and never cleared. In a
/// mount table the mode field is its rdonly and the options field its
/// nosuid, nodev, noexec.
using Attrs = sys::MountAttrs;

}  // namespace ctx::mountspec
