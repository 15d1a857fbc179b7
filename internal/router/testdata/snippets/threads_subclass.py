# tier: heavy
# reason: heavy: uses threads (threading), which nano cannot start
import threading
import queue

class Worker(threading.Thread):
    def __init__(self, q):
        super().__init__(daemon=True)
        self.q = q

    def run(self):
        while True:
            item = self.q.get()
            print("got", item)
            self.q.task_done()

q = queue.Queue()
Worker(q).start()
for i in range(3):
    q.put(i)
q.join()
