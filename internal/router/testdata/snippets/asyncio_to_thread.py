# tier: heavy
# reason: heavy: uses threads (asyncio.to_thread), which nano cannot start
# reason: heavy: uses sockets (asyncio event loop), which nano cannot open
import asyncio
import time

def blocking():
    time.sleep(0.01)
    return 42

async def main():
    print(await asyncio.to_thread(blocking))

asyncio.run(main())
