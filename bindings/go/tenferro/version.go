package tenferro

// #include <tenferro_gpu.h>
import "C"

// HeaderVersion is TF_VERSION_NUMBER of the header this package was built
// against (major*10000 + minor*100 + patch).
const HeaderVersion = uint32(C.TF_VERSION_NUMBER)

// Version is the loaded library's version as TF_VERSION_NUMBER computes it
// (tf_version).  A value below HeaderVersion means the library is older than
// the header the program was built with.
func Version() uint32 { return uint32(C.tf_version()) }

// VersionString is the loaded library's "major.minor.patch"
// (tf_version_string).
func VersionString() string { return C.GoString(C.tf_version_string()) }
