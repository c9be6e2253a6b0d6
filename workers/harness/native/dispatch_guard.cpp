// dispatch_guard.cpp: the judge's compute guard in C++ (libkforge-guard.so), loaded by the runner
// with ctypes after `import torch`.
//
// While a thread has the guard on, every call into PyTorch's dispatcher on that thread reaches
// guard_fallback first (a boxed fallback for DispatchKey::TESTING_ONLY_GenericMode, the one key
// above Autograd and Python that a library may switch on for one thread). An operator of the
// allowlist, or a composite one whose own calls are checked in turn, goes on below the key; any
// other is recorded and refused with an error, and the recorded names are what the runner reads,
// so a candidate that catches the error gains nothing. It does what guard.py's ComputeGuard does,
// with the per-call cost of a hash lookup instead of a Python function.
//
// Ownership: all state is per thread (the dispatcher's included-key set is per thread too) and
// lives in Thread below, owned by the thread; the exported functions act on the calling thread.
// The allowlist is the runner's, passed once to kfg_allow before any guard is entered.

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace {

constexpr c10::DispatchKey kKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

// What the fallback does with one operator (decided once per operator and thread).
enum class Verdict : std::int8_t { allow, composite, refuse };

struct Thread {
    std::unordered_map<const c10::OperatorName *, Verdict> seen;
    std::uint64_t epoch = 0; // which kfg_enter the guard is on for; 0 before the first
    bool on = false;
    std::int64_t calls = 0;
    std::int64_t refused = 0;
    std::string names; // refused operators, comma-separated, at most kNamesCap bytes
};

constexpr std::size_t kNamesCap = 1024;

// The allowlist: aten operator names without the namespace, set by kfg_allow. A process-wide
// table written once before the first guard and only read afterwards.
std::unordered_set<std::string> &allowlist() {
    static std::unordered_set<std::string> names;
    return names;
}

Thread &thread_state() {
    thread_local Thread t;
    return t;
}

Verdict judge(const c10::OperatorHandle &op) {
    const c10::OperatorName &name = op.operator_name();
    const std::string &full = name.name;
    if (full.rfind("aten::", 0) == 0 && allowlist().count(full.substr(6)) != 0) {
        return Verdict::allow;
    }
    // A composite operator computes nothing itself: its calls come back through this fallback.
    // One that also has a kernel of its own for a device may run that kernel instead, so it counts
    // as computing.
    if (op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
        !op.hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
        !op.hasKernelForDispatchKey(c10::DispatchKey::CUDA) &&
        !op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
        !op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional)) {
        return Verdict::composite;
    }
    return Verdict::refuse;
}

void guard_fallback(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
                    torch::jit::Stack *stack) {
    Thread &t = thread_state();
    t.calls++;
    const c10::OperatorName *key = &op.operator_name();
    auto it = t.seen.find(key);
    Verdict v = it != t.seen.end() ? it->second : t.seen.emplace(key, judge(op)).first->second;
    if (v == Verdict::refuse) {
        t.refused++;
        const std::string &name = key->name;
        if (t.names.size() + name.size() + 1 <= kNamesCap) {
            if (!t.names.empty())
                t.names += ',';
            t.names += name;
        }
        TORCH_CHECK(false, "kforge: PyTorch operator ", name, " called from ModelNew");
    }
    op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kKey), stack);
}

} // namespace

TORCH_LIBRARY_IMPL(_, TESTING_ONLY_GenericMode, m) {
    m.fallback(torch::CppFunction::makeFromBoxedFunction<&guard_fallback>());
}

extern "C" {

// Adds the comma-separated operator names of `csv` to the allowlist. Returns their count.
int kfg_allow(const char *csv) {
    int n = 0;
    std::string all(csv != nullptr ? csv : "");
    std::size_t start = 0;
    while (start <= all.size()) {
        std::size_t end = all.find(',', start);
        if (end == std::string::npos)
            end = all.size();
        if (end > start) {
            allowlist().insert(all.substr(start, end - start));
            n++;
        }
        start = end + 1;
    }
    return n;
}

// Turns the guard on for this thread, with its counts at zero. Returns the token that kfg_intact
// and kfg_leave take (positive), or -1 when the guard was on already.
std::int64_t kfg_enter(void) {
    Thread &t = thread_state();
    if (t.on || c10::impl::tls_is_dispatch_key_included(kKey)) {
        return -1;
    }
    t.epoch++;
    t.on = true;
    t.calls = 0;
    t.refused = 0;
    t.names.clear();
    c10::impl::tls_set_dispatch_key_included(kKey, true);
    return static_cast<std::int64_t>(t.epoch);
}

// 1 while the guard of `token` is on for this thread and nothing excluded its key, else 0.
int kfg_intact(std::int64_t token) {
    const Thread &t = thread_state();
    return t.on && static_cast<std::int64_t>(t.epoch) == token &&
                   c10::impl::tls_is_dispatch_key_included(kKey) &&
                   !c10::impl::tls_is_dispatch_key_excluded(kKey)
               ? 1
               : 0;
}

// Turns the guard off for this thread. Returns how many operators it refused since kfg_enter, or
// -1 when the guard of `token` was not the one on (someone left it, or left and entered again,
// in between: tampering).
std::int64_t kfg_leave(std::int64_t token) {
    Thread &t = thread_state();
    c10::impl::tls_set_dispatch_key_included(kKey, false);
    bool mine = t.on && static_cast<std::int64_t>(t.epoch) == token;
    t.on = false;
    return mine ? t.refused : -1;
}

// How many dispatcher calls the guard saw since kfg_enter.
std::int64_t kfg_calls(void) {
    return thread_state().calls;
}

// Copies the refused operators' names (comma-separated, NUL-terminated, cut to cap) to buf.
void kfg_refused_names(char *buf, std::size_t cap) {
    if (buf == nullptr || cap == 0)
        return;
    const std::string &names = thread_state().names;
    std::size_t n = names.size() < cap - 1 ? names.size() : cap - 1;
    std::memcpy(buf, names.data(), n);
    buf[n] = '\0';
}

} // extern "C"
