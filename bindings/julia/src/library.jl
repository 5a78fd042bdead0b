# SPDX-License-Identifier: MIT OR Apache-2.0
# Finding libtenferro_gpu.so.1.  A program that merely can use a GPU must
# load this package and learn that there is none, not fail at `using`, so
# the library is looked for once in __init__ and its absence recorded:
# gpu_available() then answers false, and the calls that would load it
# throw a TenferroError instead of Libdl's "could not load library".

# Set by _find_library in __init__, read-only afterwards.
const _LIBRARY_FOUND = Ref(false)
const _LIBRARY_PROBLEM = Ref("")

function _find_library()
    _LIBRARY_FOUND[], _LIBRARY_PROBLEM[] = false, ""
    path = get(ENV, LIBRARY_ENV, "")
    if !isempty(path)
        # Load the override first: the ccalls name the SONAME, which the
        # dynamic loader then resolves to this already loaded copy.
        h = Libdl.dlopen(path, Libdl.RTLD_NOW | Libdl.RTLD_GLOBAL; throw_error=false)
        if h === nothing
            _LIBRARY_PROBLEM[] = "$LIBRARY_ENV=$path cannot be loaded (no such file, or not a library)"
            return nothing
        end
    end
    h = Libdl.dlopen(L.libtenferro; throw_error=false)
    if h === nothing
        _LIBRARY_PROBLEM[] = "$(L.libtenferro) is not on the dynamic loader's path " *
                             "(install it, add its folder to LD_LIBRARY_PATH, or set $LIBRARY_ENV)"
        return nothing
    end
    found = Libdl.dlpath(h)
    if !isempty(path) && realpath(found) != realpath(path)
        _LIBRARY_PROBLEM[] = "$LIBRARY_ENV=$path was loaded, but $(L.libtenferro) resolves to $found: " *
                             "is the SONAME of $path $(L.libtenferro)?"
        return nothing
    end
    _LIBRARY_FOUND[] = true
    _find_optional_functions(h)
    return nothing
end

# The functions newer than 1.0, with the version that added them.  A 1.x
# library older than this binding lacks some: the package still loads and
# works, and only the calls that need a missing one throw (_need_function).
const _OPTIONAL_FUNCTIONS = (
    "tf_host_alloc" => "1.1", "tf_host_free" => "1.1", "tf_host_record_use" => "1.1",
    "tf_host_register" => "1.1", "tf_host_unregister" => "1.1",
    "tf_host_pool_stats_init" => "1.1", "tf_host_stats" => "1.1", "tf_host_trim" => "1.1",
    "tf_download_async" => "1.1", "tf_upload_async" => "1.1",
    "tf_program_retain" => "1.1", "tf_program_release_checked" => "1.1",
    "tf_memory_pool_stats_init" => "1.2", "tf_memory_stats" => "1.2", "tf_memory_reset_peak" => "1.2",
    "tf_memory_trim" => "1.2", "tf_memory_record_use" => "1.2",
    "tf_graph_capture_begin" => "1.2", "tf_graph_capture_end" => "1.2", "tf_graph_capture_update" => "1.2",
    "tf_graph_capture_abort" => "1.2", "tf_graph_launch" => "1.2", "tf_graph_retain" => "1.2",
    "tf_graph_release" => "1.2",
)

# Set by _find_library in __init__, read-only afterwards (tests may add
# names to simulate an older library).
const _MISSING_FUNCTIONS = Set{String}()

function _find_optional_functions(h)
    empty!(_MISSING_FUNCTIONS)
    for (name, _) in _OPTIONAL_FUNCTIONS
        Libdl.dlsym(h, name; throw_error=false) === nothing && push!(_MISSING_FUNCTIONS, name)
    end
    return nothing
end

"""
    TenferroGPU.library_problem() -> String

Why libtenferro_gpu.so.1 could not be used ("" when it was found at load
time).  [`gpu_available`](@ref) is `false` whenever this is not "".
"""
library_problem() = _LIBRARY_PROBLEM[]

# Throws unless the library was found; `op` is the C function about to be
# called.
@inline _need_library(op) = _LIBRARY_FOUND[] || _throw_no_library(op)

@noinline _throw_no_library(op) =
    throw(binding_error(L.TF_ERROR_LIBRARY_NOT_FOUND, op, _LIBRARY_PROBLEM[]))

# Throws unless the library was found and exports `op`, a function newer
# than 1.0: a TenferroError with TF_ERROR_NOT_SUPPORTED saying the loaded
# library is too old.
@inline function _need_function(op)
    _need_library(op)
    isempty(_MISSING_FUNCTIONS) || !(op in _MISSING_FUNCTIONS) || _throw_too_old(op)
    return true
end

# Whether the loaded library exports `op`, a function newer than 1.0, for
# the calls that fall back to a 1.0 one instead of throwing.
_has_function(op) = _LIBRARY_FOUND[] && !(op in _MISSING_FUNCTIONS)

@noinline function _throw_too_old(op)
    since = Dict(_OPTIONAL_FUNCTIONS)[op]
    throw(binding_error(L.TF_ERROR_NOT_SUPPORTED, op,
                        "the loaded libtenferro_gpu ($(version_string())) is too old: $op is new in $since"))
end
