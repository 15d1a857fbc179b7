# tier: heavy
# reason: heavy: uses sockets (asyncio event loop), which nano cannot open
# asyncio.run fails in nano before the coroutine starts: the event loop's self-pipe is a
# socket pair, and nano's socket() answers OSError: [Errno 58] Not supported.
import asyncio

async def work(i):
    await asyncio.sleep(0.01)
    return i * i

async def main():
    print(await asyncio.gather(*(work(i) for i in range(5))))

asyncio.run(main())
