# tier: nano
# reason: nano: imports only asyncio (all in nano)
# Coroutines driven by hand need no event loop: nothing here opens a socket.
import asyncio

async def double(x):
    return 2 * x

coro = double(21)
try:
    coro.send(None)
except StopIteration as stop:
    print(stop.value, asyncio.iscoroutinefunction(double))
# asyncio.run(...) in a comment, and "asyncio.run" in a string, run nothing.
print("asyncio.run")
