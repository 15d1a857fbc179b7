# tier: nano
# reason: nano: imports only threading, functools (all in nano)
# A lock, a local and the current thread work in nano's one thread: importing threading
# starts nothing.
import threading
import functools

_lock = threading.Lock()
_local = threading.local()

@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

with _lock:
    _local.value = fib(30)
print(threading.current_thread().name, _local.value)
# A comment naming threading.Thread is not code,
print("nor is threading.Thread() in a string")
