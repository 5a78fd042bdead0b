/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Reading enum arguments that may hold any int.  A caller can pass a value
// outside the enumerators (that is exactly what argument validation is
// for), and loading such a value as the enum type is undefined behaviour in
// C++ (UBSan's -fsanitize=enum reports it).  The double therefore copies the
// bytes of every enum argument it validates into an int first.
#ifndef TFD_RAW_ENUM_H
#define TFD_RAW_ENUM_H

#include <cstring>

namespace tfd {

template <class E>
int raw_enum(const E &e)
{
    static_assert(sizeof(E) == sizeof(int), "enum is not int-sized");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

}  // namespace tfd

#endif
