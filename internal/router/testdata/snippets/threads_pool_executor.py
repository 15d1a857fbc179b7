# tier: heavy
# reason: heavy: uses threads (concurrent.futures), which nano cannot start
from concurrent.futures import ThreadPoolExecutor
import urllib.parse

def work(url):
    return urllib.parse.urlparse(url).netloc

with ThreadPoolExecutor(max_workers=4) as ex:
    print(list(ex.map(work, ["http://a/x", "http://b/y"])))
