// SPDX-License-Identifier: MIT OR Apache-2.0
package tenferro

// HeaderVersion is TF_VERSION_NUMBER of the header this package was built
// against (major*10000 + minor*100 + patch); built without cgo, that of the
// header its Go code was written for.
const HeaderVersion = uint32(headerVersionNumber)

// Version is the loaded library's version as TF_VERSION_NUMBER computes it
// (tf_version), or 0 when the library is not available.  A value below
// HeaderVersion means the library is older than the header the program was
// built with.
func Version() uint32 {
	v, _, _ := libraryVersion()
	return v
}

// VersionString is the loaded library's "major.minor.patch"
// (tf_version_string), or "" when the library is not available.
func VersionString() string {
	_, s, _ := libraryVersion()
	return s
}

// LibraryPath loads the library if no call has yet, and returns the file
// it was loaded from (as the dynamic loader names it), or the error that
// says why it is not available (errors.Is(err, ErrNotAvailable)).  See
// the package documentation, "Loading the library".
func LibraryPath() (string, error) { return libraryPath() }

// nocgoHeaderVersion is the version of the header this package's Go code
// was written for: HeaderVersion of a build without cgo, which has no
// header to read it from.
const nocgoHeaderVersion = 10200
