# tier: nano
# reason: nano: imports only asyncio (all in nano)
import asyncio

async def work(i):
    await asyncio.sleep(0.01)
    return i * i

async def main():
    print(await asyncio.gather(*(work(i) for i in range(5))))

asyncio.run(main())
