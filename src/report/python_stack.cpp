#include "report/python_stack.h"
#include "report/escape.h"

#include <dlfcn.h>

#include <atomic>

namespace appendguard {
namespace {

using Object = void;

struct PythonApi {
  int (*is_initialized)() = nullptr;
  int (*is_finalizing)() = nullptr;
  int (*gil_ensure)() = nullptr;
  void (*gil_release)(int) = nullptr;
  Object* (*get_thread_state)() = nullptr;  // PyGILState_GetThisThreadState: NULL for non-Python threads
  Object* (*thread_frame)(Object*) = nullptr;
  Object* (*frame_back)(Object*) = nullptr;
  Object* (*frame_code)(Object*) = nullptr;
  int (*frame_line)(Object*) = nullptr;
  Object* (*get_attr)(Object*, const char*) = nullptr;
  const char* (*utf8)(Object*) = nullptr;
  void (*dec_ref)(Object*) = nullptr;
  void (*err_clear)() = nullptr;

  bool load() {
    auto get = [](const char* name) { return dlsym(RTLD_DEFAULT, name); };
    is_initialized = reinterpret_cast<int (*)()>(get("Py_IsInitialized"));
    is_finalizing = reinterpret_cast<int (*)()>(get("Py_IsFinalizing"));
    if (!is_finalizing) is_finalizing = reinterpret_cast<int (*)()>(get("_Py_IsFinalizing"));
    gil_ensure = reinterpret_cast<int (*)()>(get("PyGILState_Ensure"));
    gil_release = reinterpret_cast<void (*)(int)>(get("PyGILState_Release"));
    get_thread_state = reinterpret_cast<Object* (*)()>(get("PyGILState_GetThisThreadState"));
    thread_frame = reinterpret_cast<Object* (*)(Object*)>(get("PyThreadState_GetFrame"));
    frame_back = reinterpret_cast<Object* (*)(Object*)>(get("PyFrame_GetBack"));
    frame_code = reinterpret_cast<Object* (*)(Object*)>(get("PyFrame_GetCode"));
    frame_line = reinterpret_cast<int (*)(Object*)>(get("PyFrame_GetLineNumber"));
    get_attr = reinterpret_cast<Object* (*)(Object*, const char*)>(get("PyObject_GetAttrString"));
    utf8 = reinterpret_cast<const char* (*)(Object*)>(get("PyUnicode_AsUTF8"));
    dec_ref = reinterpret_cast<void (*)(Object*)>(get("Py_DecRef"));
    err_clear = reinterpret_cast<void (*)()>(get("PyErr_Clear"));
    return is_initialized && gil_ensure && gil_release && get_thread_state && thread_frame && frame_back &&
           frame_code && frame_line && get_attr && utf8 && dec_ref && err_clear;
  }
};

// Copies a Python string attribute of `code` into `out`.
void code_attribute(const PythonApi& py, Object* code, const char* name, char* out, size_t capacity) {
  out[0] = '\0';
  Object* value = py.get_attr(code, name);
  if (!value) {
    py.err_clear();
    return;
  }
  const char* text = py.utf8(value);
  if (text) {
    size_t i = 0;
    for (; text[i] && i + 1 < capacity; ++i) out[i] = text[i];
    out[i] = '\0';
  } else {
    py.err_clear();
  }
  py.dec_ref(value);
}

}  // namespace

namespace {

// Loaded on first use (a program may load Python after us) without a function-local static: a child
// forked while another thread held such a static's guard would wait for it forever. Threads that find
// the loading under way go without a Python stack.
constinit PythonApi g_python;
enum PythonState : int { kUnknown, kLoading, kLoaded, kUnavailable };
constinit std::atomic<int> g_python_state{kUnknown};

bool python_api_loaded() {
  int state = g_python_state.load(std::memory_order_acquire);
  if (state == kUnknown &&
      g_python_state.compare_exchange_strong(state, kLoading, std::memory_order_acq_rel)) {
    state = g_python.load() ? kLoaded : kUnavailable;
    g_python_state.store(state, std::memory_order_release);
  }
  return state == kLoaded;
}

}  // namespace

void python_stack_after_fork_child() {
  if (g_python_state.load(std::memory_order_relaxed) == kLoading) g_python_state.store(kUnknown);
}

bool format_python_stack(TextBuffer& out, int max_frames) {
  if (!python_api_loaded()) return false;
  const PythonApi& py = g_python;
  if (!py.is_initialized() || (py.is_finalizing && py.is_finalizing())) return false;
  if (!py.get_thread_state()) return false;  // a thread Python does not know: nothing to show

  int gil = py.gil_ensure();
  int count = 0;
  Object* frame = py.thread_frame(py.get_thread_state());
  while (frame && count < max_frames) {
    Object* code = py.frame_code(frame);
    char file[512];
    char function[256];
    code_attribute(py, code, "co_filename", file, sizeof file);
    code_attribute(py, code, "co_name", function, sizeof function);
    // A file or function name comes from the program: escaped, it cannot forge a line of the report.
    out.add_text("    File \"");
    add_escaped_text(out, file);
    out.add("\", line {}, in ", py.frame_line(frame));
    add_one_line(out, function);
    out.add_text("\n");
    ++count;
    py.dec_ref(code);
    Object* back = py.frame_back(frame);
    py.dec_ref(frame);
    frame = back;
  }
  if (frame) py.dec_ref(frame);
  py.gil_release(gil);
  return count > 0;
}

}  // namespace appendguard
